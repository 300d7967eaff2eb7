"""The migration drafter: a function, policy, view or trigger changed in the head schema is
written once; the drafted up and down scripts take one catalog to the other and back."""

from __future__ import annotations

from typing import Any

import psycopg

from pyretrieve.db import draft
from tests.conftest import Database


def _without_oids(catalog: draft.Catalog) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, items in catalog.items():
        out[kind] = {k: {f: v for f, v in row.items() if f != "oid"} for k, row in items.items()}
    return out


def _apply(dsn: str, script: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(script)  # type: ignore[call-overload]


def test_identical_catalogs_draft_no_change(db: Database) -> None:
    result = draft.draft_between(
        db.admin_dsn, db.admin_dsn, number="0099", previous="0098", name="x"
    )
    assert result.empty
    assert "-- (no change)" in result.up
    assert "-- (no change)" in result.down


def test_the_draft_takes_the_release_to_the_head_and_back(db: Database, server: Any) -> None:
    from tests.conftest import create_database, drop_database

    head_name = create_database(server, db.name)
    head = server.dsn(head_name)
    try:
        # The "head": one function body, one policy and one view changed, a function added.
        _apply(
            head,
            """
            SET ROLE pyretrieve_owner;
            CREATE OR REPLACE FUNCTION pyretrieve.or_tsquery(p_config regconfig, p_query text)
            RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
            SET search_path = pg_catalog, pg_temp SET client_min_messages = warning
            BEGIN ATOMIC SELECT plainto_tsquery(p_config, p_query); END;
            DROP POLICY installation_read ON pyretrieve.installation;
            CREATE POLICY installation_read ON pyretrieve.installation FOR SELECT
                TO pyretrieve_api USING (singleton);
            RESET ROLE;
            GRANT CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
            SET ROLE pyretrieve_api;
            CREATE FUNCTION pyretrieve.drafted_probe() RETURNS integer LANGUAGE sql STABLE
                SECURITY DEFINER SET search_path = pg_catalog, pg_temp RETURN 1;
            COMMENT ON FUNCTION pyretrieve.drafted_probe() IS 'A probe. SECURITY DEFINER.';
            REVOKE ALL ON FUNCTION pyretrieve.drafted_probe() FROM PUBLIC;
            GRANT EXECUTE ON FUNCTION pyretrieve.drafted_probe() TO pyretrieve_reader;
            RESET ROLE;
            REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
            """,
        )
        before = draft.snapshot(db.admin_dsn)
        result = draft.draft_between(
            db.admin_dsn, head, number="0099", previous="0098", name="probe"
        )
        assert not result.empty
        assert "CREATE OR REPLACE FUNCTION pyretrieve.or_tsquery" in result.up
        assert "pyretrieve.drafted_probe" in result.up
        assert "DROP FUNCTION pyretrieve.drafted_probe() CASCADE;" in result.down
        _apply(db.admin_dsn, result.up)
        assert _without_oids(draft.snapshot(db.admin_dsn)) == _without_oids(draft.snapshot(head))
        _apply(db.admin_dsn, result.down)
        assert _without_oids(draft.snapshot(db.admin_dsn)) == _without_oids(before)
    finally:
        drop_database(server, head_name)


def test_column_changes_are_left_to_a_human(db: Database, server: Any) -> None:
    from tests.conftest import create_database, drop_database

    head_name = create_database(server, db.name)
    try:
        _apply(server.dsn(head_name), "ALTER TABLE pyretrieve.workspaces ADD COLUMN note text")
        result = draft.draft_between(
            db.admin_dsn, server.dsn(head_name), number="0099", previous="0098", name="note"
        )
    finally:
        drop_database(server, head_name)
    assert result.todos == ("-- TODO column workspaces.note text is new: add and backfill it",)
    assert result.todos[0] in result.up


def test_a_role_already_in_effect_is_not_set_again() -> None:
    statements = [
        "SET LOCAL ROLE pyretrieve_owner;", "CREATE FUNCTION a();", "SET LOCAL ROLE pyretrieve_owner;",
        "SET LOCAL ROLE pyretrieve_api;", "CREATE FUNCTION b();", "SET LOCAL ROLE pyretrieve_owner;",
        "SET LOCAL ROLE pyretrieve_api;", "CREATE FUNCTION c();", "SET LOCAL ROLE pyretrieve_api;",
    ]  # fmt: skip
    assert draft._roles_once(statements, "pyretrieve_owner") == [
        "CREATE FUNCTION a();",
        "SET LOCAL ROLE pyretrieve_api;", "CREATE FUNCTION b();", "SET LOCAL ROLE pyretrieve_owner;",
        "SET LOCAL ROLE pyretrieve_api;", "CREATE FUNCTION c();",
    ]  # fmt: skip
    script = draft._script("t", statements, [], "9999")
    assert script.count("SET LOCAL ROLE pyretrieve_owner;") == 2  # the header's and b's return
