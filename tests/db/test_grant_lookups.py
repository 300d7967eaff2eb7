"""Grant look-ups probe the grants' key once per role of the caller, and resolve membership as
PostgreSQL does.

A workspace may grant a project to thousands of principals, one grant each. Each request looks
up the caller's grants (authorize's choice of the grant and the decision's check of it; a
writer's ceiling, at its binding and in its binding's check); reading every principal's grants
of the scope to keep the caller's made each request cost in proportion to the scope's users.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import AUTHENTICATOR, SESSION_TAG, Database, acting_as, role, rows_read
from tests.db.seed import PURPOSE, authorize

CROWD = 200


@pytest.fixture
def crowd(db: Database) -> Iterator[list[str]]:
    """CROWD roles, dropped at the end with whatever they hold in the database. Their names
    need quoting (capitals, a space, a double quote), as a caller's name may."""
    tag = secrets.token_hex(2)
    names = [f'{SESSION_TAG}_Crowd "{tag}" {i}' for i in range(CROWD)]
    try:
        with db.admin(autocommit=True) as admin:
            for name in names:
                admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
        yield names
    finally:
        with db.admin(autocommit=True) as admin:
            for name in names:
                ident = sql.Identifier(name)
                if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
                    admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def _grant(admin: psycopg.Connection[Any], principal: str, purpose: str, ceiling: str) -> None:
    admin.execute(
        "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, %s)",
        (sql.Identifier(principal).as_string(admin), purpose, ceiling),
    )


def test_a_request_reads_the_callers_grants_not_every_principals_of_the_scope(
    db: Database, conn: psycopg.Connection[Any], crowd: list[str]
) -> None:
    """200 other principals hold a grant on acme/docs to read and to write. Until 0044 each
    authorize read all 200 of them twice over (and each write binding as many), and kept the
    caller's, and each request read every role of the cluster to refuse a superuser caller."""
    with db.admin(autocommit=True) as admin:
        admin.execute("SELECT pyretrieve.create_workspace('acme')")
        admin.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        for name in crowd:
            _grant(admin, name, PURPOSE, "internal")
            _grant(admin, name, "ingest", "internal")
        _grant(admin, role("alice"), PURPOSE, "internal")
        _grant(admin, role("wally"), "ingest", "internal")
        admin.execute("ANALYZE pyretrieve.grants")
    with acting_as(conn, "alice"), rows_read(conn) as read:
        conn.execute(
            "SELECT * FROM pyretrieve.authorize('acme', 'docs', %s,"
            " pyretrieve.content_digest('q'), 'optional', NULL, 10)",
            (PURPOSE,),
        ).fetchall()
    with acting_as(conn, "wally"), rows_read(conn) as wrote:
        conn.execute("SELECT pyretrieve.put_fragment('acme', 'docs', 'a note', 'internal')")
    # A probe of the key per role of the caller, at each of the few look-ups; its own
    # memberships read by their keys, never the cluster's roles (the crowd's 200 and more).
    for call in (read, wrote):
        assert call["pyretrieve.grants"] <= 10, (read, wrote)
        assert call["pg_catalog.pg_authid"] <= 20, (read, wrote)


def test_grants_reach_through_inherited_memberships_only(
    db: Database, conn: psycopg.Connection[Any], crowd: list[str]
) -> None:
    """The key probes find what pg_has_role(..., 'USAGE') finds: a grant to a group of a group
    of the caller applies, whatever the caller's name; through a membership that does not pass
    privileges on, it does not; the caller's own grant is preferred to a wider one of its
    group."""
    # The walk up the memberships reaches org from outsider; pg_has_role does not.
    org, team, gate, outsider, member = crowd[:5]
    with db.admin(autocommit=True) as admin:
        ident = sql.Identifier
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(org), ident(team)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(team), ident(role("bob"))))
        # outsider is a member of org through gate, which does not inherit org's privileges.
        admin.execute(sql.SQL("ALTER ROLE {} NOINHERIT").format(ident(gate)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(org), ident(gate)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(gate), ident(outsider)))
        admin.execute(sql.SQL("GRANT pyretrieve_reader TO {}").format(ident(outsider)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(outsider), ident(AUTHENTICATOR)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(team), ident(member)))
        admin.execute(sql.SQL("GRANT pyretrieve_reader TO {}").format(ident(member)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(member), ident(AUTHENTICATOR)))
        admin.execute("SELECT pyretrieve.create_workspace('acme')")
        admin.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        _grant(admin, org, PURPOSE, "confidential")
        _grant(admin, role("carol"), PURPOSE, "public")
        admin.execute(sql.SQL("GRANT {} TO {}").format(ident(team), ident(role("carol"))))
    with acting_as(conn, "bob"):
        assert authorize(conn)["ceiling"] == "confidential"
    with acting_as(conn, "carol"):
        assert authorize(conn)["ceiling"] == "public"
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(member)))
        assert authorize(conn)["ceiling"] == "confidential"
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(outsider)))
        with pytest.raises(psycopg.Error) as denied, conn.transaction():
            authorize(conn)
    assert denied.value.sqlstate == "PR001"
