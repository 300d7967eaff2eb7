"""The install script and the Alembic revisions build the same schema, and the downgrade undoes it.

Each test works in fresh databases created without the harness template, so the paths under
test (script, ``migrate.upgrade``, stamping, ``migrate.downgrade``) start from an empty
database exactly as a user's would.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from pyretrieve import resources
from pyretrieve.db import migrate, queries
from pyretrieve.tools.definitions import tool_entities
from tests.conftest import (
    HEAD,
    INSTALL_SQL,
    PASSWORD,
    SCHEMA_VERSION,
    Server,
    acting_as,
    create_database,
    drop_database,
    role,
    session_set,
)

ROLES = ("pyretrieve_owner", "pyretrieve_reader", "pyretrieve_writer", "pyretrieve_admin")

# ---------------------------------------------------------------------------------------------
# Catalog snapshot of schema pyretrieve: every category is a sorted list of tuples of names and
# server-rendered definitions (never OIDs), so two databases can be compared directly.
# ---------------------------------------------------------------------------------------------
_ROLE = "CASE WHEN {0} = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid({0}) END"
_ACL = f"""
    SELECT {_ROLE.format("a.grantor")}, {_ROLE.format("a.grantee")}, a.privilege_type, a.is_grantable
      FROM pg_catalog.aclexplode({{acl}}) a
"""
_RELACL = """coalesce(c.relacl, pg_catalog.acldefault(
    CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))"""
_FUNC = "p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')'"

CATALOG_QUERIES: dict[str, str] = {
    "schema": f"""
        SELECT n.nspname, pg_catalog.pg_get_userbyid(n.nspowner), x.*
          FROM pg_catalog.pg_namespace n,
               LATERAL ({_ACL.format(acl="coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))")}) x
         WHERE n.nspname = 'pyretrieve'
    """,
    "relations": """
        SELECT c.relname, c.relkind, c.relpersistence, pg_catalog.pg_get_userbyid(c.relowner),
               c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
               coalesce(c.reloptions::text, ''), coalesce(am.amname, '')
          FROM pg_catalog.pg_class c
          LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
         WHERE c.relnamespace = 'pyretrieve'::regnamespace
    """,
    "columns": """
        SELECT c.relname, a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),
               a.attnotnull, coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), ''),
               a.attgenerated, a.attidentity, a.attstorage, a.attcompression,
               coalesce(co.collname, '')
          FROM pg_catalog.pg_attribute a
          JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
         WHERE c.relnamespace = 'pyretrieve'::regnamespace
           AND a.attnum > 0 AND NOT a.attisdropped
    """,
    "constraints": """
        SELECT coalesce(c.relname, t.typname), co.conname, co.contype,
               pg_catalog.pg_get_constraintdef(co.oid), co.condeferrable, co.condeferred,
               co.convalidated
          FROM pg_catalog.pg_constraint co
          LEFT JOIN pg_catalog.pg_class c ON c.oid = co.conrelid
          LEFT JOIN pg_catalog.pg_type t ON t.oid = co.contypid
         WHERE co.connamespace = 'pyretrieve'::regnamespace
    """,
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_catalog.pg_indexes
         WHERE schemaname = 'pyretrieve'
    """,
    # The drafter's view definitions, as it compares them (select-list aliases aside).
    "views": f"""
        SELECT v.name, v.compared, coalesce(v.options::text, '')
          FROM ({queries.CATALOG_VIEWS}) v
    """,
    "policies": """
        SELECT tablename, policyname, permissive,
               ARRAY(SELECT r FROM unnest(roles) r ORDER BY r)::text, cmd,
               coalesce(qual, ''), coalesce(with_check, '')
          FROM pg_catalog.pg_policies
         WHERE schemaname = 'pyretrieve'
    """,
    "relation_acl": f"""
        SELECT c.relname, x.*
          FROM pg_catalog.pg_class c,
               LATERAL ({_ACL.format(acl=_RELACL)}) x
         WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind NOT IN ('i', 'I')
    """,
    "column_acl": f"""
        SELECT c.relname, a.attname, x.*
          FROM pg_catalog.pg_attribute a
          JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
               LATERAL ({_ACL.format(acl="a.attacl")}) x
         WHERE c.relnamespace = 'pyretrieve'::regnamespace AND a.attacl IS NOT NULL
    """,
    "sequences": """
        SELECT c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmax,
               s.seqmin, s.seqcache, s.seqcycle
          FROM pg_catalog.pg_sequence s
          JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid
         WHERE c.relnamespace = 'pyretrieve'::regnamespace
    """,
    "functions": f"""
        SELECT {_FUNC}, pg_catalog.pg_get_userbyid(p.proowner), p.prokind, p.prosecdef,
               coalesce(p.proconfig::text, ''), p.provolatile, p.proleakproof, p.proparallel,
               p.proisstrict, pg_catalog.pg_get_functiondef(p.oid)
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'pyretrieve'::regnamespace
    """,
    "function_acl": f"""
        SELECT {_FUNC}, x.*
          FROM pg_catalog.pg_proc p,
               LATERAL ({_ACL.format(acl="coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))")}) x
         WHERE p.pronamespace = 'pyretrieve'::regnamespace
    """,
    "triggers": """
        SELECT c.relname, t.tgname, t.tgenabled, pg_catalog.pg_get_triggerdef(t.oid)
          FROM pg_catalog.pg_trigger t
          JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'pyretrieve'::regnamespace AND NOT t.tgisinternal
    """,
    "types": """
        SELECT t.typname, t.typtype, t.typcategory, pg_catalog.pg_get_userbyid(t.typowner),
               coalesce(pg_catalog.format_type(nullif(t.typbasetype, 0), t.typtypmod), ''),
               t.typnotnull, coalesce(t.typdefault, ''),
               coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                           FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '')
          FROM pg_catalog.pg_type t
         WHERE t.typnamespace = 'pyretrieve'::regnamespace
    """,
    "type_acl": f"""
        SELECT t.typname, x.*
          FROM pg_catalog.pg_type t,
               LATERAL ({_ACL.format(acl="coalesce(t.typacl, pg_catalog.acldefault('T', t.typowner))")}) x
         WHERE t.typnamespace = 'pyretrieve'::regnamespace
    """,
    "comments": """
        SELECT o.type, o.identity, d.description
          FROM pg_catalog.pg_description d,
               LATERAL pg_catalog.pg_identify_object(d.classoid, d.objoid, d.objsubid) o
         WHERE o.schema = 'pyretrieve' OR (o.type = 'schema' AND o.identity = 'pyretrieve')
    """,
    # A catch-all: every object that depends on the schema, by kind and identity.
    "objects": """
        SELECT o.type, o.identity
          FROM pg_catalog.pg_depend dep,
               LATERAL pg_catalog.pg_identify_object(dep.classid, dep.objid, dep.objsubid) o
         WHERE dep.refclassid = 'pg_catalog.pg_namespace'::regclass
           AND dep.refobjid = 'pyretrieve'::regnamespace
    """,
    "installation": """
        SELECT schema_version, created_vector FROM pyretrieve.installation
    """,
    "vector": """
        SELECT e.extname, e.extversion, n.nspname
          FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'vector'
    """,
}

Snapshot = dict[str, list[tuple[Any, ...]]]


def snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    return {
        name: sorted(conn.execute(query).fetchall(), key=repr)
        for name, query in CATALOG_QUERIES.items()
    }


def snapshot_of(dsn: str) -> Snapshot:
    with psycopg.connect(dsn) as conn:
        return snapshot(conn)


def catalog_diff(left: Snapshot, right: Snapshot, names: tuple[str, str]) -> str:
    """A unified diff per category, one row per line; empty when the snapshots are equal."""
    out: list[str] = []
    for category in CATALOG_QUERIES:
        a = [repr(row) for row in left[category]]
        b = [repr(row) for row in right[category]]
        if a != b:
            out.append(f"== {category} ==")
            out.extend(
                difflib.unified_diff(a, b, fromfile=names[0], tofile=names[1], lineterm="", n=1)
            )
    return "\n".join(out)


def install_script(dsn: str) -> None:
    """Install from sql/pyretrieve.sql in one transaction, as psql --single-transaction would."""
    with psycopg.connect(dsn) as conn:
        conn.execute(INSTALL_SQL.read_text(encoding="utf-8"))
        conn.commit()


# ---------------------------------------------------------------------------------------------
# Fixtures: one database per install path, shared by the read-only comparisons below. Every
# test that touches them checks an invariant that holds before and after the others run.
# ---------------------------------------------------------------------------------------------
class Built:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.script = create_database(server, None)
        self.alembic = create_database(server, None)

    def dsn(self, name: str) -> str:
        return self.server.dsn(name)


@pytest.fixture(scope="module")
def built(server: Server) -> Iterator[Built]:
    b = Built(server)
    try:
        install_script(b.dsn(b.script))
        migrate.upgrade(b.dsn(b.alembic))
        yield b
    finally:
        drop_database(server, b.script)
        drop_database(server, b.alembic)


@pytest.fixture
def fresh_db(server: Server) -> Iterator[str]:
    name = create_database(server, None)
    try:
        yield server.dsn(name)
    finally:
        drop_database(server, name)


# ---------------------------------------------------------------------------------------------
# 1. Same catalogs
# ---------------------------------------------------------------------------------------------
def test_script_and_migrations_build_identical_catalogs(built: Built) -> None:
    script = snapshot_of(built.dsn(built.script))
    alembic = snapshot_of(built.dsn(built.alembic))
    # The comparison must have something to compare in every category.
    empty = [name for name, rows in script.items() if not rows]
    assert not empty, f"catalog queries returned nothing: {empty}"
    assert len(script["relations"]) >= 9
    assert len(script["policies"]) >= 20
    diff = catalog_diff(script, alembic, ("sql/pyretrieve.sql", "migrate.upgrade"))
    assert not diff, "catalogs differ:\n" + diff


def test_the_comparison_notices_a_difference(built: Built) -> None:
    # Guard against a snapshot that silently ignores what it is meant to compare.
    with psycopg.connect(built.dsn(built.alembic)) as conn:
        before = snapshot(conn)
        conn.execute("COMMENT ON FUNCTION pyretrieve.or_tsquery(regconfig, text) IS 'changed'")
        conn.execute("GRANT SELECT ON pyretrieve.grants TO pyretrieve_writer")
        conn.execute("GRANT UPDATE (body) ON pyretrieve.fragments TO pyretrieve_admin")
        conn.execute("ALTER TABLE pyretrieve.workspaces NO FORCE ROW LEVEL SECURITY")
        conn.execute("ALTER POLICY grants_own ON pyretrieve.grants USING (true)")
        conn.execute("ALTER FUNCTION pyretrieve.content_digest(text) RESET search_path")
        conn.execute(
            "ALTER TABLE pyretrieve.embeddings ALTER COLUMN embedding SET STORAGE EXTENDED"
        )
        conn.execute("ALTER TYPE pyretrieve.classification ADD VALUE 'secret'")
        conn.execute("ALTER TRIGGER fragments_stamp ON pyretrieve.fragments RENAME TO x_stamp")
        after = snapshot(conn)
        conn.rollback()
    diff = catalog_diff(before, after, ("before", "after"))
    for category in (
        "comments",
        "relation_acl",
        "column_acl",
        "relations",
        "policies",
        "functions",
        "columns",
        "types",
        "triggers",
    ):
        assert f"== {category} ==" in diff, f"{category} change not detected:\n{diff}"


# ---------------------------------------------------------------------------------------------
# 2. upgrade is idempotent; 4. a script-installed schema is stamped, not re-created
# ---------------------------------------------------------------------------------------------
def test_upgrade_twice_is_a_no_op(built: Built) -> None:
    dsn = built.dsn(built.alembic)
    before = snapshot_of(dsn)
    assert migrate.current(dsn) == HEAD
    migrate.upgrade(dsn)
    assert migrate.current(dsn) == HEAD
    assert not catalog_diff(before, snapshot_of(dsn), ("first", "second"))
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT version_num FROM public.{migrate.VERSION_TABLE}").fetchall()
    assert rows == [(HEAD,)]


def test_script_install_then_upgrade_stamps_the_revision(built: Built) -> None:
    dsn = built.dsn(built.script)
    before = snapshot_of(dsn)
    migrate.upgrade(dsn)  # stamps the head revision, then finds nothing to do
    assert migrate.current(dsn) == HEAD
    migrate.upgrade(dsn)
    assert migrate.current(dsn) == HEAD
    after = snapshot_of(dsn)
    assert not catalog_diff(before, after, ("script", "script + upgrade"))
    assert not catalog_diff(after, snapshot_of(built.dsn(built.alembic)), ("script", "alembic"))


# ---------------------------------------------------------------------------------------------
# 3. downgrade removes what the install created, and only that
# ---------------------------------------------------------------------------------------------
_USER_OBJECTS = """
    SELECT o.type, o.identity
      FROM (SELECT 'pg_class'::regclass AS cls, oid FROM pg_catalog.pg_class
            UNION ALL SELECT 'pg_proc'::regclass, oid FROM pg_catalog.pg_proc
            UNION ALL SELECT 'pg_type'::regclass, oid FROM pg_catalog.pg_type
            UNION ALL SELECT 'pg_namespace'::regclass, oid FROM pg_catalog.pg_namespace
            UNION ALL SELECT 'pg_extension'::regclass, oid FROM pg_catalog.pg_extension
            UNION ALL SELECT 'pg_operator'::regclass, oid FROM pg_catalog.pg_operator
            UNION ALL SELECT 'pg_opclass'::regclass, oid FROM pg_catalog.pg_opclass
            UNION ALL SELECT 'pg_opfamily'::regclass, oid FROM pg_catalog.pg_opfamily
            UNION ALL SELECT 'pg_am'::regclass, oid FROM pg_catalog.pg_am
            UNION ALL SELECT 'pg_cast'::regclass, oid FROM pg_catalog.pg_cast
            UNION ALL SELECT 'pg_constraint'::regclass, oid FROM pg_catalog.pg_constraint
            UNION ALL SELECT 'pg_trigger'::regclass, oid FROM pg_catalog.pg_trigger
            UNION ALL SELECT 'pg_policy'::regclass, oid FROM pg_catalog.pg_policy
            UNION ALL SELECT 'pg_event_trigger'::regclass, oid FROM pg_catalog.pg_event_trigger
            UNION ALL SELECT 'pg_default_acl'::regclass, oid FROM pg_catalog.pg_default_acl) x,
           LATERAL pg_catalog.pg_identify_object(x.cls, x.oid, 0) o
     WHERE x.oid >= 16384
"""


def user_objects(dsn: str) -> list[tuple[Any, ...]]:
    """Every object created in this database after initdb, by kind and identity."""
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute(_USER_OBJECTS).fetchall())


def assert_nothing_of_pyretrieve_left(dsn: str, notices: list[str]) -> None:
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('pyretrieve')").fetchone() == (None,)
        left = conn.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'pyretrieve%'"
        ).fetchall()
        assert left == [], f"left behind: {left}"
        # Nothing in this database depends on (is owned by, or granted to) a pyretrieve role.
        deps = conn.execute(
            """SELECT pg_describe_object(s.classid, s.objid, s.objsubid), r.rolname, s.deptype
                 FROM pg_shdepend s JOIN pg_roles r ON r.oid = s.refobjid
                WHERE s.refclassid = 'pg_authid'::regclass AND r.rolname = ANY (%s)
                  AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())""",
            (list(ROLES),),
        ).fetchall()
        assert deps == [], f"objects in this database still depend on pyretrieve roles: {deps}"
        # Roles are cluster-wide: they may survive only because another database uses them, and
        # then the downgrade says so.
        for rolname in ROLES:
            kept = f"role {rolname} kept: another database still uses it"
            row = conn.execute(
                """SELECT count(DISTINCT s.dbid)
                     FROM pg_roles r
                     JOIN pg_shdepend s
                       ON s.refclassid = 'pg_authid'::regclass AND s.refobjid = r.oid
                    WHERE r.rolname = %s
                      AND s.dbid <> (SELECT oid FROM pg_database WHERE datname = current_database())""",
                (rolname,),
            ).fetchone()
            exists = conn.execute("SELECT to_regrole(%s)", (rolname,)).fetchone()
            if exists == (None,):
                assert kept not in notices
                continue
            assert row is not None
            assert row[0] > 0, f"{rolname} kept though no other database uses it"
            assert kept in notices, f"{rolname} kept without the notice: {notices}"


@pytest.fixture
def notices(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The server notices of the migrations, which pyretrieve.db.migrate logs."""
    caplog.set_level(logging.INFO, logger="pyretrieve.db.migrate")
    return caplog


@pytest.mark.parametrize("vector_before", [False, True], ids=["vector-created", "vector-existed"])
def test_downgrade_to_base_removes_what_the_install_created(
    server: Server,
    template_db: str,
    fresh_db: str,
    notices: pytest.LogCaptureFixture,
    vector_before: bool,
) -> None:
    # template_db (installed in another database of this cluster) keeps the roles in use, so
    # the downgrade must keep them and say why.
    if vector_before:
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
    before = user_objects(fresh_db)
    migrate.upgrade(fresh_db)
    with psycopg.connect(fresh_db) as conn:
        row = conn.execute("SELECT created_vector FROM pyretrieve.installation").fetchone()
        assert row == (not vector_before,)
    migrate.downgrade(fresh_db, "base")

    assert migrate.current(fresh_db) is None
    assert_nothing_of_pyretrieve_left(fresh_db, notices.messages)
    with psycopg.connect(fresh_db) as conn:
        has_vector = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
        assert has_vector.fetchone() == (int(vector_before),)
    # The database is back to exactly what it held before the install.
    assert user_objects(fresh_db) == before
    # And it can be installed again.
    migrate.upgrade(fresh_db)
    assert migrate.current(fresh_db) == HEAD


# ---------------------------------------------------------------------------------------------
# 5. An application's own Alembic environment upgrades the pyretrieve branch
# ---------------------------------------------------------------------------------------------
APP_ENV = """\
from alembic import context

context.configure(connection=context.config.attributes["connection"])
with context.begin_transaction():
    context.run_migrations()
"""

APP_REVISION = """\
from alembic import op

revision = "app_0001"
down_revision = None
branch_labels = ("app",)
depends_on = None


def upgrade():
    op.execute("CREATE TABLE public.app_notes (id integer PRIMARY KEY)")


def downgrade():
    op.execute("DROP TABLE public.app_notes")
"""


def test_application_alembic_upgrades_the_pyretrieve_branch(tmp_path: Path, fresh_db: str) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from alembic import command

    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(APP_ENV)
    (tmp_path / "versions" / "app_0001.py").write_text(textwrap.dedent(APP_REVISION))
    cfg = Config()
    cfg.set_main_option("script_location", str(tmp_path))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option(
        "version_locations",
        os.pathsep.join([str(tmp_path / "versions"), str(resources.alembic_dir() / "versions")]),
    )
    assert ScriptDirectory.from_config(cfg).get_revision("pyretrieve@head").revision == HEAD

    with migrate._engine(fresh_db).begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "pyretrieve@head")
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        assert conn.execute("SELECT schema_version FROM pyretrieve.installation").fetchone() == (
            SCHEMA_VERSION,
        )
        assert conn.execute("SELECT to_regclass('public.app_notes')").fetchone() == (None,)

    with migrate._engine(fresh_db).begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "heads")
        command.downgrade(cfg, "pyretrieve@base")
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("app_0001",)]
        assert conn.execute("SELECT to_regnamespace('pyretrieve')").fetchone() == (None,)
        assert conn.execute("SELECT to_regclass('public.app_notes')").fetchone() is not None


def _revisions() -> list[str]:
    return sorted(
        f"pyretrieve_{p.name[:4]}"
        for p in resources.sql_dir().joinpath("migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")
        if not p.name.endswith(".down.sql")
    )


# Revisions whose down script must drop a table's columns and add them again, because
# PostgreSQL cannot turn a column back into a generated one in place: below them the columns
# are the same, but they come last. Only their order is exempt from the comparison, and only
# for these tables.
READDED_COLUMNS: dict[str, tuple[str, ...]] = {"pyretrieve_0025": ("fragments",)}


def _unordered(snap: Snapshot, table: str) -> Snapshot:
    """The snapshot with ``table``'s column positions left out (every other field compared)."""
    columns = [(r[0], None, *r[2:]) if r[0] == table else r for r in snap["columns"]]
    return {**snap, "columns": sorted(columns, key=repr)}


def test_only_the_order_of_readded_columns_is_exempt() -> None:
    """The exemption hides a column moved, and nothing else: a changed column still shows."""
    rows = [("fragments", 1, "a", "text"), ("fragments", 2, "b", "text")]
    moved = [("fragments", 2, "a", "text"), ("fragments", 1, "b", "text")]
    changed = [("fragments", 1, "a", "integer"), ("fragments", 2, "b", "text")]
    base: Snapshot = {"columns": rows}
    assert _unordered(base, "fragments") == _unordered({"columns": moved}, "fragments")
    assert _unordered(base, "fragments") != _unordered({"columns": changed}, "fragments")
    assert _unordered(base, "other") != _unordered({"columns": moved}, "other")


@pytest.mark.parametrize("previous", _revisions()[:-1])
def test_each_downgrade_restores_the_previous_catalog(server: Server, previous: str) -> None:
    """Down to ``previous`` from the head gives the catalog that upgrading to ``previous`` gives."""
    up_only = create_database(server, None)
    down_again = create_database(server, None)
    try:
        migrate.upgrade(server.dsn(up_only), previous)
        migrate.upgrade(server.dsn(down_again))
        migrate.downgrade(server.dsn(down_again), previous)
        left, right = snapshot_of(server.dsn(up_only)), snapshot_of(server.dsn(down_again))
        for revision, tables in READDED_COLUMNS.items():
            for table in tables if previous < revision else ():
                left, right = _unordered(left, table), _unordered(right, table)
        assert left == right, catalog_diff(
            left, right, (f"upgrade to {previous}", "head, then down")
        )
        # And the way back up works from there.
        migrate.upgrade(server.dsn(down_again))
        assert migrate.current(server.dsn(down_again)) == HEAD
    finally:
        drop_database(server, up_only)
        drop_database(server, down_again)


def test_upgrading_a_populated_database_backfills_what_0003_derives(
    server: Server, template_db: str
) -> None:
    """Fragments and embeddings written under 0002 are found by BM25 and the vector leg after
    the upgrade: the backfills run even though the owner is bound by FORCE RLS."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    try:
        migrate.upgrade(dsn, "pyretrieve_0002")
        with psycopg.connect(app, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
                conn.execute("SELECT pyretrieve.register_model('m3', 3)")
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'restricted')",
                    (role("wally"),),
                )
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'read', 'internal')",
                    (role("alice"),),
                )
            ids = {}
            with acting_as(conn, "wally"):
                for body, cls in [
                    ("zebra crossing at noon", "internal"),
                    ("zebra secrets", "restricted"),
                    ("quiet river", "public"),
                ]:
                    row = conn.execute(
                        "SELECT pyretrieve.put_fragment('acme', 'docs', %s, %s::pyretrieve.classification) AS id",
                        (body, cls),
                    ).fetchone()
                    assert row is not None
                    ids[body] = row["id"]
                    conn.execute(
                        "SELECT pyretrieve.put_embedding('acme', 'docs', %s, 'm3', '[1,0,0]',"
                        " sha256(convert_to(%s, 'UTF8')))",
                        (row["id"], body),
                    )
                conn.execute(
                    "SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids["quiet river"],)
                )
        migrate.upgrade(dsn)
        with psycopg.connect(app, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            with acting_as(conn, "alice"):
                d = conn.execute(
                    "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', 'read', %s,"
                    " 'optional', NULL, 10)",
                    (b"\x00" * 32,),
                ).fetchone()
                assert d is not None
                lexical = conn.execute(
                    "SELECT fragment_id, terms FROM pyretrieve.lexical_candidates(%s, 'zebra', 10)",
                    (d["decision_id"],),
                ).fetchall()
                vector = conn.execute(
                    "SELECT fragment_id FROM pyretrieve.vector_candidates(%s, 'm3', '[1,0,0]', 10)",
                    (d["decision_id"],),
                ).fetchall()
                conn.execute("SET LOCAL ROLE pyretrieve_api")  # the second wall
                embeddings = conn.execute(
                    "SELECT fragment_id FROM pyretrieve.embeddings"
                ).fetchall()
            # Only the visible, active fragment: not the restricted one, not the retracted one.
            assert [r["fragment_id"] for r in lexical] == [ids["zebra crossing at noon"]]
            assert lexical[0]["terms"][0]["term"] == "zebra"
            assert [r["fragment_id"] for r in vector] == [ids["zebra crossing at noon"]]
            assert [r["fragment_id"] for r in embeddings] == [ids["zebra crossing at noon"]]
        with psycopg.connect(dsn) as admin:
            forced = admin.execute(
                "SELECT count(*) FROM pg_class WHERE relnamespace = 'pyretrieve'::regnamespace"
                " AND relkind = 'r' AND NOT relforcerowsecurity"
            ).fetchone()
            assert forced == (0,)
            counts = admin.execute(
                "SELECT (SELECT count(*) FROM pyretrieve.lexical_postings),"
                " (SELECT count(*) FROM pyretrieve.embeddings WHERE fragment_state = 'retracted')"
            ).fetchone()
            # zebra, cross, noon + zebra, secret; none for the retracted fragment.
            assert counts == (5, 1)
    finally:
        drop_database(server, name)


def test_upgrading_to_0012_gives_the_shipped_models_their_evaluated_defaults(
    server: Server, template_db: str
) -> None:
    """Models registered under 0011 get, on upgrade, the fusion and weights this package
    registers them with now (pyretrieve.embedders.registry.DEFAULTS); another model keeps what
    it was searched with, RRF and 1.0 each. The backfill runs although the owner is bound by
    FORCE RLS, and leaves the table forced."""
    from pyretrieve.embedders.registry import DEFAULTS

    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    try:
        migrate.upgrade(dsn, "pyretrieve_0011")
        with psycopg.connect(app, autocommit=True) as conn, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.register_model('someone-elses', 3)")
            for model in DEFAULTS:
                dimension = 256 if model == "hash-ngram-v1" else 384
                conn.execute("SELECT pyretrieve.register_model(%s, %s)", (model, dimension))
        migrate.upgrade(dsn, "pyretrieve_0012")
        with psycopg.connect(app, autocommit=True) as conn, acting_as(conn, "alice"):
            rows = conn.execute(
                "SELECT model_id, fusion, lexical_weight, vector_weight FROM pyretrieve.list_models()"
            ).fetchall()
        got = {r[0]: (r[1], r[2], r[3]) for r in rows}
        expected = {
            model: (d.fusion.value, d.weights.lexical, d.weights.vector)
            for model, d in DEFAULTS.items()
        }
        assert got == {**expected, "someone-elses": ("rrf", 1.0, 1.0)}
        with psycopg.connect(dsn) as admin:
            forced = admin.execute(
                "SELECT relforcerowsecurity FROM pg_class"
                " WHERE oid = 'pyretrieve.embedding_models'::regclass"
            ).fetchone()
        assert forced == (True,)
    finally:
        drop_database(server, name)


def test_upgrading_a_populated_database_moves_decisions_into_monthly_partitions_and_back(
    server: Server, template_db: str
) -> None:
    """Decisions written under 0009 (and one a year old) survive 0010's move into monthly
    partitions and its downgrade, row for row; searches and writes work on both sides."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    columns = (
        "workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at,"
        " ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest,"
        " semantic_intent, embedding_digest, xact_id::text"
    )

    def decisions() -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn) as admin:
            return admin.execute(
                f"SELECT {columns} FROM pyretrieve.decisions ORDER BY decision_id"
            ).fetchall()

    def search(conn: psycopg.Connection[Any]) -> None:
        with acting_as(conn, "alice"):
            conn.execute(
                "SELECT * FROM pyretrieve.authorize('acme', 'docs', 'read', %s, 'optional', NULL, 10)",
                (b"\x01" * 32,),
            )

    try:
        migrate.upgrade(dsn, "pyretrieve_0009")
        with psycopg.connect(app, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'read', 'internal')",
                    (role("alice"),),
                )
            for _ in range(3):
                search(conn)
        with psycopg.connect(dsn) as admin:
            # A decision from a year ago: the move makes a partition for its month too.
            admin.execute(
                "INSERT INTO pyretrieve.decisions SELECT workspace_id, gen_random_uuid(), principal,"
                " project_id, purpose, grant_id, evaluated_at - interval '1 year', ceiling, max_age,"
                " semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent,"
                " embedding_digest, xact_id FROM pyretrieve.decisions LIMIT 1"
            )
        before = decisions()
        assert len(before) == 4

        migrate.upgrade(dsn)
        assert decisions() == before
        with psycopg.connect(dsn) as admin:
            kind = admin.execute(
                "SELECT relkind::text FROM pg_class WHERE oid = 'pyretrieve.decisions'::regclass"
            ).fetchone()
            spread = admin.execute(
                "SELECT count(DISTINCT tableoid) FROM pyretrieve.decisions"
            ).fetchone()
        assert kind == ("p",)
        assert spread == (2,)
        with psycopg.connect(app, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            search(conn)
            with acting_as(conn, "adam"):
                listed = conn.execute(
                    "SELECT count(*) AS n FROM pyretrieve.list_decisions(now() - interval '2 years')"
                ).fetchone()
        assert listed == {"n": 5}
        after = decisions()

        migrate.downgrade(dsn, "pyretrieve_0009")
        assert decisions() == after
        with psycopg.connect(app, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            search(conn)
        assert len(decisions()) == 6
    finally:
        drop_database(server, name)


def test_upgrading_to_0016_drops_the_per_model_indexes_and_keeps_a_scopes_own(
    server: Server,
) -> None:
    """Under 0015 register_model built an HNSW index over every scope per model; 0016 drops
    those (no search read them) and leaves a scope's own index in place; a new model gets none;
    the downgrade builds the per-model ones again."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)

    def indexes() -> set[str]:
        with psycopg.connect(dsn) as admin:
            rows = admin.execute(
                "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw_%'"
            ).fetchall()
        return {r[0] for r in rows}

    try:
        migrate.upgrade(dsn, "pyretrieve_0015")
        with psycopg.connect(app, autocommit=True) as conn, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.create_workspace('acme')")
            conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
            conn.execute("SELECT pyretrieve.register_model('m-one', 3)")
            conn.execute("SELECT pyretrieve.create_vector_index('acme', 'docs', 'm-one')")
        before = indexes()
        assert "embeddings_hnsw_m1" in before
        scope_index = {i for i in before if i.startswith("embeddings_hnsw_s")}
        assert len(scope_index) == 1
        migrate.upgrade(dsn)
        assert indexes() == scope_index
        with psycopg.connect(app, autocommit=True) as conn, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.register_model('m-two', 3)")
        assert indexes() == scope_index
        migrate.downgrade(dsn, "pyretrieve_0015")
        assert indexes() == scope_index | {"embeddings_hnsw_m1", "embeddings_hnsw_m2"}
    finally:
        drop_database(server, name)


def test_upgrading_to_0018_logs_each_scopes_statistics_and_keeps_every_score(
    server: Server, template_db: str
) -> None:
    """0018 serves BM25's document count and average length from the statistics log: the
    upgrade backfills it from the active fragments (past RLS, as the installer), after which
    every score and term of the lexical leg is bit for bit what 0017 computed from the
    fragments, and writes keep the log exact; the downgrade removes it."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)

    def leg(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
        with acting_as(conn, "alice"):
            d = conn.execute(
                "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', 'bench',"
                " sha256('q'::bytea), 'disabled', NULL, 100)"
            ).fetchone()
            assert d is not None
            rows = conn.execute(
                "SELECT fragment_id, score, terms FROM pyretrieve.lexical_candidates(%s,"
                " 'zebra herd grazing savanna', 100)",
                (d[0],),
            ).fetchall()
        return [tuple(r) for r in rows]

    def log_matches(admin: psycopg.Connection[Any]) -> bool:
        grouped = """
            SELECT workspace_id, project_id, classification, observed_at, expires_at, {n}, {s}
              FROM pyretrieve.{t} {w} GROUP BY 1, 2, 3, 4, 5 {h} ORDER BY 1, 2, 3, 4, 5"""
        log = admin.execute(
            grouped.format(
                n="sum(fragments)",
                s="sum(length_sum)",
                t="statistics_log",
                w="",
                h="HAVING sum(fragments) <> 0",
            )
        ).fetchall()
        active = admin.execute(
            grouped.format(
                n="count(*)::numeric",
                s="sum(doc_length)::numeric",
                t="fragments",
                w="WHERE state = 'active'",
                h="",
            )
        ).fetchall()
        return bool(active) and log == active

    try:
        migrate.upgrade(dsn, "pyretrieve_0017")
        with psycopg.connect(app, autocommit=True) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest',"
                    " 'restricted')",
                    (role("wally"),),
                )
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'bench',"
                    " 'internal', interval '30 days')",
                    (role("alice"),),
                )
            with acting_as(conn, "wally"):
                ids = [
                    conn.execute(
                        "SELECT pyretrieve.put_fragment('acme', 'docs', %s,"
                        " %s::pyretrieve.classification, now() - %s::interval)",
                        (f"zebra herd {'grazing ' * (i % 4)}on savanna {i}", cls, age),
                    ).fetchone()[0]  # type: ignore[index]
                    for i, (cls, age) in enumerate(
                        [("internal", "1 day"), ("public", "2 days"), ("confidential", "1 day"),
                         ("internal", "40 days"), ("internal", "3 days"), ("public", "1 day")]
                        * 3
                    )
                ]  # fmt: skip
                conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[0],))
            before = leg(conn)
            assert before
            migrate.upgrade(dsn)
            with psycopg.connect(dsn) as admin:
                assert log_matches(admin)
            assert leg(conn) == before
            with acting_as(conn, "wally"):
                conn.execute(
                    "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra herd anew')",
                    (ids[1],),
                )
            with psycopg.connect(dsn) as admin:
                assert log_matches(admin)
        migrate.downgrade(dsn, "pyretrieve_0017")
        with psycopg.connect(dsn) as admin:
            gone = admin.execute("SELECT to_regclass('pyretrieve.statistics_log')").fetchone()
        assert gone == (None,)
    finally:
        drop_database(server, name)


def test_upgrading_to_0020_counts_each_scopes_embeddings_and_labels_the_vector_leg(
    server: Server, template_db: str
) -> None:
    """0020 counts each scope's embeddings of each model in a log: the upgrade backfills it
    from the embeddings (past RLS, as the installer), later writes keep it exact, the vector
    leg's rows say how it searched, and maintenance places the scope's index from the count;
    the downgrade removes the log and the label."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    counted = """
        SELECT workspace_id, project_id, model_id, {n} FROM pyretrieve.{t}
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"""

    def log_matches(admin: psycopg.Connection[Any]) -> bool:
        log = admin.execute(counted.format(n="sum(embeddings)", t="embedding_count_log"))
        rows = admin.execute(counted.format(n="count(*)::numeric", t="embeddings")).fetchall()
        return bool(rows) and log.fetchall() == rows

    def put(conn: psycopg.Connection[Any], project: str, i: int) -> None:
        body = f"zebra {project} {i}"
        row = conn.execute(
            "SELECT pyretrieve.put_fragment('acme', %s, %s)", (project, body)
        ).fetchone()
        assert row is not None
        conn.execute(
            "SELECT pyretrieve.put_embedding('acme', %s, %s, 'm3', %s::public.vector,"
            " sha256(convert_to(%s, 'UTF8')))",
            (project, row[0], f"[1,{i},0.5]", body),
        )

    try:
        migrate.upgrade(dsn, "pyretrieve_0019")
        with psycopg.connect(app, autocommit=True) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.register_model('m3', 3)")
                for project in ("docs", "notes"):
                    conn.execute("SELECT pyretrieve.create_project('acme', %s)", (project,))
                    conn.execute(
                        "SELECT pyretrieve.grant_access(%s::regrole, 'acme', %s, 'ingest',"
                        " 'restricted')",
                        (role("wally"), project),
                    )
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'bench',"
                    " 'restricted')",
                    (role("alice"),),
                )
            for project, n in (("docs", 5), ("notes", 2)):
                with acting_as(conn, "wally"):
                    for i in range(n):
                        put(conn, project, i)
            migrate.upgrade(dsn)
            with psycopg.connect(dsn) as admin:
                assert log_matches(admin)
            with acting_as(conn, "wally"):
                put(conn, "docs", 5)
            with psycopg.connect(dsn) as admin:
                assert log_matches(admin)
            with acting_as(conn, "adam"):
                rows = conn.execute(
                    "SELECT project_id, embeddings, action FROM"
                    " pyretrieve.maintain_vector_indexes(p_min_rows => 6)"
                ).fetchall()
            assert [tuple(r) for r in rows] == [("docs", 6, "create")]
            with acting_as(conn, "alice"):
                d = conn.execute(
                    "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', 'bench',"
                    " sha256('q'::bytea), 'optional', NULL, 10)"
                ).fetchone()
                assert d is not None
                labels = conn.execute(
                    "SELECT DISTINCT search FROM pyretrieve.vector_candidates(%s, 'm3',"
                    " '[1,1,1]'::public.vector, 10)",
                    (d[0],),
                ).fetchall()
            assert labels == [("hnsw",)]
        migrate.downgrade(dsn, "pyretrieve_0019")
        with psycopg.connect(dsn) as admin:
            gone = admin.execute(
                "SELECT to_regclass('pyretrieve.embedding_count_log'),"
                " to_regprocedure('pyretrieve.maintain_vector_indexes(integer, boolean)')"
            ).fetchone()
        assert gone == (None, None)
    finally:
        drop_database(server, name)


def _zebra_leg(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """The lexical leg of the zebra scope, as alice (internal ceiling, 30 days)."""
    with acting_as(conn, "alice"):
        d = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', 'bench',"
            " sha256('q'::bytea), 'disabled', NULL, 100)"
        ).fetchone()
        assert d is not None
        rows = conn.execute(
            "SELECT fragment_id, score, terms FROM pyretrieve.lexical_candidates(%s, %s, 100)",
            (d[0], "zebra herd grazing savanna river"),
        ).fetchall()
    return [tuple(r) for r in rows]


def _zebra_scope(conn: psycopg.Connection[Any]) -> list[Any]:
    """Two projects of 175 fragments of five classifications, ages and expiries, one retracted
    and one superseded; returns the ids."""
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'wiki')")
        for project in ("docs", "wiki"):
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'acme', %s, 'ingest', 'restricted')",
                (role("wally"), project),
            )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'bench',"
            " 'internal', interval '30 days')",
            (role("alice"),),
        )
    with acting_as(conn, "wally"):
        ids = [
            conn.execute(
                "SELECT pyretrieve.put_fragment('acme', %s, %s,"
                " %s::pyretrieve.classification, now() - %s::interval, %s)",
                (project, f"zebra herd {'grazing ' * (i % 4)}on savanna {i} river"[: 40 + i],
                 cls, age, expiry),
            ).fetchone()[0]  # type: ignore[index]
            for i, (project, cls, age, expiry) in enumerate(
                [("docs", "internal", "1 day", None), ("docs", "public", "2 days", None),
                 ("docs", "confidential", "1 day", None), ("docs", "internal", "40 days", None),
                 ("docs", "internal", "3 days", "2999-01-01"), ("docs", "public", "1 day", None),
                 ("wiki", "internal", "1 day", None)]
                * 25
            )
        ]  # fmt: skip
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[0],))
        conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra river anew')",
            (ids[1],),
        )
    return ids


def test_upgrading_to_0021_rebuilds_the_lexical_index_in_blocks_and_keeps_every_score(
    server: Server, template_db: str
) -> None:
    """0021 moves the lexical index from a row per posting to blocks: the upgrade gives every
    fragment its document number and builds each scope's blocks from its active fragments
    (past RLS, as the installer), after which every row, score and term of the lexical leg is
    what 0020 returned, writes keep the index exact, and the downgrade brings the postings
    back with the same rows, scores and terms."""
    from tests.db.seed import lexical_index_errors

    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)

    try:
        migrate.upgrade(dsn, "pyretrieve_0020")
        with psycopg.connect(app, autocommit=True) as conn:
            ids = _zebra_scope(conn)
            before = _zebra_leg(conn)
            assert len(before) > 20
            migrate.upgrade(dsn, "pyretrieve_0021")
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                assert lexical_index_errors(admin) == {}
                held = admin.execute(
                    "SELECT (SELECT count(*) FROM pyretrieve.lexical_blocks) AS blocks,"
                    " (SELECT sum((n + 127) / 128) FROM (SELECT count(*) AS n"
                    "    FROM pyretrieve.lexical_postings GROUP BY workspace_id, project_id,"
                    "    lexeme, classification) g) AS fewest,"
                    " (SELECT count(*) FROM pyretrieve.lexical_postings) AS postings"
                    " FROM pyretrieve.installation"
                ).fetchone()
            assert held is not None
            # Built whole: each lexeme's postings of a classification in the fewest blocks.
            assert held["blocks"] == held["fewest"] < held["postings"]
            assert _zebra_leg(conn) == before
            with acting_as(conn, "wally"):
                conn.execute(
                    "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra herd anew')",
                    (ids[2],),
                )
                conn.execute("SELECT pyretrieve.put_fragment('acme', 'docs', 'a savanna river')")
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                assert lexical_index_errors(admin) == {}
            after = _zebra_leg(conn)
        migrate.downgrade(dsn, "pyretrieve_0020")
        with psycopg.connect(dsn) as admin:
            gone = admin.execute(
                "SELECT to_regclass('pyretrieve.lexical_blocks'), to_regclass('pyretrieve.postings')"
            ).fetchone()
        assert gone is not None
        assert gone[0] is None
        assert gone[1] is not None
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_leg(conn) == after
    finally:
        drop_database(server, name)


def test_upgrading_to_0022_moves_small_lists_into_pages_and_keeps_every_score(
    server: Server, template_db: str
) -> None:
    """0022 keeps the postings of lexemes with fewer than 128 in a scope and classification in
    pages: the upgrade compacts every scope (past RLS, as the installer), after which no small
    lexeme keeps a block, the pages hold what the blocks held, every row, score and term of the
    lexical leg is 0021's, writes and a writer's compaction keep the index exact, and the
    downgrade moves the pages' postings back into blocks with the same rows, scores and terms."""
    from tests.db.seed import lexical_index_errors

    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    count_rows = (
        "SELECT (SELECT count(*) FROM pyretrieve.lexical_blocks) AS blocks,"
        " (SELECT count(*) FROM pyretrieve.lexical_postings) AS postings"
        " FROM pyretrieve.installation"
    )
    try:
        migrate.upgrade(dsn, "pyretrieve_0021")
        with psycopg.connect(app, autocommit=True) as conn:
            ids = _zebra_scope(conn)
            before = _zebra_leg(conn)
            assert len(before) > 20
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                held = admin.execute(count_rows).fetchone()
            migrate.upgrade(dsn)
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                assert lexical_index_errors(admin) == {}
                now = admin.execute(
                    count_rows.replace(
                        " FROM pyretrieve.installation",
                        ", (SELECT count(*) FROM pyretrieve.lexical_pages) AS pages,"
                        " (SELECT count(*) FROM pyretrieve.lexical_blocks b"
                        "   WHERE NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks f"
                        "    WHERE (f.workspace_id, f.project_id, f.lexeme, f.classification)"
                        "        = (b.workspace_id, b.project_id, b.lexeme, b.classification)"
                        "      AND f.postings = 128)) AS small_blocks"
                        " FROM pyretrieve.installation",
                    )
                ).fetchone()
            assert held is not None
            assert now is not None
            # Every small list left its blocks for pages, fewer rows than the blocks they were.
            assert now["small_blocks"] == 0
            assert 0 < now["pages"] < held["blocks"] - now["blocks"]
            assert now["postings"] == held["postings"]
            assert _zebra_leg(conn) == before
            with acting_as(conn, "wally"):
                conn.execute(
                    "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra herd anew')",
                    (ids[2],),
                )
                conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[3],))
                conn.execute("SELECT pyretrieve.put_fragment('acme', 'docs', 'a savanna river')")
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                assert lexical_index_errors(admin) == {}
                tombstones = admin.execute(
                    "SELECT count(*) AS n FROM pyretrieve.lexical_tombstones"
                ).fetchone()
            # The retracted fragment's postings were in pages: tombstones until compaction.
            assert tombstones is not None
            assert tombstones["n"] > 0
            after = _zebra_leg(conn)
            with acting_as(conn, "wally"):
                moved = conn.execute(
                    "SELECT * FROM pyretrieve.compact_lexical_index('acme', 'docs')"
                ).fetchone()
            assert moved is not None
            assert moved[2] > 0
            with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
                assert lexical_index_errors(admin) == {}
                tombstones = admin.execute(
                    "SELECT count(*) AS n FROM pyretrieve.lexical_tombstones"
                ).fetchone()
            assert tombstones is not None
            assert tombstones["n"] == 0
            assert _zebra_leg(conn) == after
        migrate.downgrade(dsn, "pyretrieve_0021")
        with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
            gone = admin.execute("SELECT to_regclass('pyretrieve.lexical_pages') AS t").fetchone()
            assert gone is not None
            assert gone["t"] is None
            assert lexical_index_errors(admin) == {}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_leg(conn) == after
    finally:
        drop_database(server, name)


def test_upgrading_to_0025_keeps_each_fragments_analysis_and_every_score(
    server: Server, template_db: str
) -> None:
    """0025 analyses a fragment's text once per write: tsv and doc_length stop being generated
    columns and keep their stored values (no row is rewritten); fragments written after the
    upgrade get what the generated columns gave; every row, score and term of the lexical leg is
    0024's; and the downgrade makes them generated again with the same values and scores."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    analysis = (
        "SELECT fragment_id, tsv::text, doc_length,"
        " tsv = to_tsvector(ts_config, body) AND doc_length"
        "     = pyretrieve.tsvector_length(to_tsvector(ts_config, body)) AS exact"
        " FROM pyretrieve.fragments ORDER BY fragment_id"
    )
    generated = (
        "SELECT attname, attgenerated FROM pg_attribute"
        " WHERE attrelid = 'pyretrieve.fragments'::regclass AND attname IN ('tsv', 'doc_length')"
        " ORDER BY attname"
    )
    try:
        migrate.upgrade(dsn, "pyretrieve_0024")
        with psycopg.connect(app, autocommit=True) as conn:
            _zebra_scope(conn)
            before = _zebra_leg(conn)
            assert len(before) > 20
            with psycopg.connect(dsn) as admin:
                held = admin.execute(analysis).fetchall()
                pages = admin.execute("SELECT ctid FROM pyretrieve.fragments").fetchall()
            migrate.upgrade(dsn)
            with psycopg.connect(dsn) as admin:
                assert admin.execute(generated).fetchall() == [("doc_length", ""), ("tsv", "")]
                assert admin.execute(analysis).fetchall() == held
                # The columns changed in the catalog only: every row is where it was.
                assert admin.execute("SELECT ctid FROM pyretrieve.fragments").fetchall() == pages
            assert _zebra_leg(conn) == before
            with acting_as(conn, "wally"):
                conn.execute(
                    "SELECT pyretrieve.put_fragment('acme', 'docs', 'zebra river, zebra herd')"
                )
            with psycopg.connect(dsn) as admin:
                now = admin.execute(analysis).fetchall()
            assert len(now) == len(held) + 1
            assert all(r[3] for r in now)
            after = _zebra_leg(conn)
            assert after != before
        migrate.downgrade(dsn, "pyretrieve_0024")
        with psycopg.connect(dsn) as admin:
            assert admin.execute(generated).fetchall() == [("doc_length", "s"), ("tsv", "s")]
            assert admin.execute(analysis).fetchall() == now
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_leg(conn) == after
    finally:
        drop_database(server, name)


def _tool_penalties(conn: psycopg.Connection[Any], query: str) -> dict[str, list[str]]:
    with acting_as(conn, "alice"), conn.transaction():
        row = conn.execute(
            "SELECT pyretrieve.discover_tools(p_workspace => 'acme', p_project => 'agents',"
            " p_purpose => 'agent', p_query => %s, p_mode => 'lexical') AS d",
            (query,),
        ).fetchone()
    assert row is not None
    return {t["name"]: [p["code"] for p in t["penalties"]] for t in row["d"]["tools"]}


def test_upgrading_to_0030_stores_each_tools_entities_and_reads_its_description(
    server: Server, template_db: str
) -> None:
    """0030 adds pyretrieve.tools.entities (the entity words of the name and the description)
    to the rows already there, and discovery stops penalising a write tool whose description,
    not its name, names what the request asks about; the downgrade drops the column and gives
    0029's penalties back."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    tools = {
        "reschedule": ("update", "Moves an event to a new time."),
        "delete_invoice": ("delete", "Delete an invoice."),
        "list_games": ("list", "Lists the games of a platform."),
    }
    query = "Reschedule event 'Alice-One' to November 1 and delete invoice 7"
    try:
        migrate.upgrade(dsn, "pyretrieve_0029")
        with psycopg.connect(app, autocommit=True, row_factory=dict_row) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.create_project('acme', 'agents')")
                for nick, purpose in (("wally", "ingest"), ("alice", "agent")):
                    conn.execute(
                        "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'agents', %s,"
                        " 'internal')",
                        (role(nick), purpose),
                    )
            with acting_as(conn, "wally"):
                for tool, (family, about) in tools.items():
                    schema = {"name": tool, "description": about, "parameters": {}}
                    conn.execute(
                        "SELECT pyretrieve.put_tool('acme', 'agents', %s::jsonb, %s)",
                        (json.dumps(schema), family),
                    )
            before = _tool_penalties(conn, query)
            assert before["reschedule"] == ["no_shared_entity"]
            assert before["delete_invoice"] == []
            migrate.upgrade(dsn)
            with psycopg.connect(dsn) as admin:
                stored = dict(
                    admin.execute("SELECT name, entities FROM pyretrieve.tools").fetchall()
                )
            assert stored == {t: sorted(tool_entities(t, a)) for t, (_, a) in tools.items()}
            assert stored["list_games"] == ["game", "platform"]
            after = _tool_penalties(conn, query)
            assert after == {**before, "reschedule": []}
            migrate.downgrade(dsn, "pyretrieve_0029")
            with psycopg.connect(dsn) as admin:
                gone = admin.execute(
                    "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pyretrieve.tools'::regclass"
                    " AND attname = 'entities' AND NOT attisdropped"
                ).fetchone()
            assert gone == (0,)
            assert _tool_penalties(conn, query) == before
    finally:
        drop_database(server, name)


def _zebra_search(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """The zebra scope's SQL search as alice, lexical, 7 of its candidates returned; each
    explanation without what differs from call to call (decision, its time, ages)."""
    with acting_as(conn, "alice"), conn.transaction():
        rows = conn.execute(
            "SELECT rank, fragment_id, final_score, explanation FROM pyretrieve.search("
            " p_workspace => 'acme', p_project => 'docs', p_purpose => 'bench',"
            " p_query => 'zebra herd grazing savanna river', p_mode => 'lexical', p_limit => 7)"
        ).fetchall()
    out = []
    for rank, fragment_id, score, explanation in rows:
        e = dict(explanation)
        for key in ("decision_id", "provenance", "freshness", "final_score", "confidence"):
            e.pop(key)
        out.append((rank, fragment_id, score == explanation["final_score"], e))
    return out


def test_upgrading_to_0031_keeps_every_search_explanation(server: Server, template_db: str) -> None:
    """0031 renders the lexical terms of pyretrieve.search's explanations only for the rows it
    returns: the rows, their terms and every other part of the explanations are 0030's, and so
    after the downgrade."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    try:
        migrate.upgrade(dsn, "pyretrieve_0030")
        with psycopg.connect(app, autocommit=True) as conn:
            _zebra_scope(conn)
            before = _zebra_search(conn)
            assert len(before) == 7
            terms = [t for *_, e in before for t in e["modalities"]["lexical"]["terms"]]
            assert len(terms) > 7
            assert all(isinstance(t["idf"], float) for t in terms)
            migrate.upgrade(dsn)
            assert _zebra_search(conn) == before
            migrate.downgrade(dsn, "pyretrieve_0030")
            assert _zebra_search(conn) == before
    finally:
        drop_database(server, name)


def _settings(
    conn: psycopg.Connection[Any], functions: tuple[str, ...], names: tuple[str, ...]
) -> dict[str, list[str]]:
    """The pinned settings ``names`` of each of the schema's ``functions``, in catalog order."""
    rows = conn.execute(
        "SELECT p.proname::text, coalesce(p.proconfig, '{}') FROM pg_proc p"
        " WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.proname = ANY (%s)",
        (list(functions),),
    ).fetchall()
    return {name: [c for c in config if c.split("=")[0] in names] for name, config in rows}


def _plan_settings(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    return _settings(conn, ("lexical_candidates", "search"), ("plan_cache_mode",))


@contextlib.contextmanager
def _zebra_database(server: Server, revision: str) -> Iterator[tuple[str, str]]:
    """A scratch database migrated to ``revision`` and holding the zebra scope: its admin and
    application DSNs. Dropped at the end."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    try:
        migrate.upgrade(dsn, revision)
        app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
        with psycopg.connect(app, autocommit=True) as conn:
            _zebra_scope(conn)
        yield dsn, app
    finally:
        drop_database(server, name)


def test_upgrading_to_0032_plans_generically_from_the_first_call(
    server: Server, template_db: str
) -> None:
    """0032 pins plan_cache_mode = force_generic_plan on lexical_candidates and search: the
    searches of one session, from its first on (the calls PL/pgSQL planned afresh before), return
    0031's rows and explanations, and so after the downgrade, which removes the setting."""
    with _zebra_database(server, "pyretrieve_0031") as (dsn, app):
        with psycopg.connect(app, autocommit=True) as conn:
            before = _zebra_search(conn)
        assert len(before) == 7
        migrate.upgrade(dsn)
        with psycopg.connect(dsn) as admin:
            generic = ["plan_cache_mode=force_generic_plan"]
            assert _plan_settings(admin) == {"lexical_candidates": generic, "search": generic}
        with psycopg.connect(app, autocommit=True) as conn:
            assert [_zebra_search(conn) for _ in range(7)] == [before] * 7
        migrate.downgrade(dsn, "pyretrieve_0031")
        with psycopg.connect(dsn) as admin:
            assert _plan_settings(admin) == {"lexical_candidates": [], "search": []}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search(conn) == before


def _vector_settings(conn: psycopg.Connection[Any]) -> list[str]:
    found = _settings(conn, ("vector_candidates",), ("plan_cache_mode", "enable_seqscan"))
    return found["vector_candidates"]


def _zebra_vectors(conn: psycopg.Connection[Any], calls: int) -> list[list[tuple[Any, ...]]]:
    """alice's vector leg over the zebra scope, in ``calls`` transactions of one session."""
    out = []
    for _ in range(calls):
        with acting_as(conn, "alice"), conn.transaction():
            row = conn.execute(
                "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', 'bench', %s,"
                " 'optional', NULL, 100)",
                (b"\x00" * 32,),
            ).fetchone()
            assert row is not None
            rows = conn.execute(
                "SELECT rank, fragment_id, content_digest, distance, source_digest, search"
                " FROM pyretrieve.vector_candidates(p_decision => %s, p_model => 'm3',"
                " p_embedding => '[1,0.3,0.5]', p_limit => 100)",
                (row[0],),
            ).fetchall()
        out.append([tuple(r) for r in rows])
    return out


def test_upgrading_to_0033_plans_the_vector_leg_generically_with_the_same_rows(
    server: Server, template_db: str
) -> None:
    """0033 pins plan_cache_mode = force_generic_plan and enable_seqscan = off on
    vector_candidates (0032 planned every call afresh): a session's vector legs, its first
    call and its sixth and later alike, return 0032's rows, and so after the downgrade, which
    puts the custom plans back."""
    name = create_database(server, None)
    dsn = server.dsn(name)
    app = server.dsn(name, user=role("authenticator"), password=PASSWORD)
    try:
        migrate.upgrade(dsn, "pyretrieve_0032")
        with psycopg.connect(app, autocommit=True) as conn:
            ids = _zebra_scope(conn)
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.register_model('m3', 3)")
            with acting_as(conn, "wally"):
                for i, fid in enumerate(ids):
                    conn.execute(
                        "SELECT pyretrieve.put_embedding('acme', %s, %s, 'm3', %s::public.vector,"
                        " sha256(convert_to(%s, 'UTF8')))",
                        ("wiki" if i % 7 == 6 else "docs", fid, f"[1,{i % 11},0.5]", str(fid)),
                    )
            before = _zebra_vectors(conn, 1)[0]
        # Active, internal or public, fresh enough for alice's 30 days: four of each seven docs
        # rows, less the retracted and the superseded one.
        assert len(before) == 98
        with psycopg.connect(dsn) as admin:
            assert _vector_settings(admin) == ["plan_cache_mode=force_custom_plan"]
        migrate.upgrade(dsn)
        with psycopg.connect(dsn) as admin:
            assert _vector_settings(admin) == [
                "plan_cache_mode=force_generic_plan",
                "enable_seqscan=off",
            ]
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_vectors(conn, 8) == [before] * 8
        migrate.downgrade(dsn, "pyretrieve_0032")
        with psycopg.connect(dsn) as admin:
            assert _vector_settings(admin) == ["plan_cache_mode=force_custom_plan"]
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_vectors(conn, 1) == [before]
    finally:
        drop_database(server, name)


def _binding_settings(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    return _settings(conn, ("bound_decision", "bound_write"), ("enable_seqscan",))


def test_upgrading_to_0034_finds_bindings_by_their_index(server: Server, template_db: str) -> None:
    """0034 pins enable_seqscan = off on bound_decision and bound_write: 0033's zebra search
    returns the same rows and explanations after the upgrade and after the downgrade, which
    removes the setting."""
    with _zebra_database(server, "pyretrieve_0033") as (dsn, app):
        with psycopg.connect(app, autocommit=True) as conn:
            before = _zebra_search(conn)
        assert len(before) == 7
        with psycopg.connect(dsn) as admin:
            assert _binding_settings(admin) == {"bound_decision": [], "bound_write": []}
        migrate.upgrade(dsn)
        with psycopg.connect(dsn) as admin:
            off = ["enable_seqscan=off"]
            assert _binding_settings(admin) == {"bound_decision": off, "bound_write": off}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search(conn) == before
        migrate.downgrade(dsn, "pyretrieve_0033")
        with psycopg.connect(dsn) as admin:
            assert _binding_settings(admin) == {"bound_decision": [], "bound_write": []}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search(conn) == before


def _zebra_search_at(conn: psycopg.Connection[Any], digits: int) -> list[tuple[Any, ...]]:
    """:func:`_zebra_search`'s ranks, ids and explanations in a session whose
    extra_float_digits is ``digits`` (the final_score column itself reaches such a session
    rounded, as any float does: only the explanations are pyretrieve's to write)."""
    with session_set(conn, f"extra_float_digits = {digits}"):
        return [(rank, fid, e) for rank, fid, _, e in _zebra_search(conn)]


def test_upgrading_to_0035_explains_exact_floats_whatever_the_caller_set(
    server: Server, template_db: str
) -> None:
    """0035 pins extra_float_digits = 1 on pyretrieve.search: at 0034 a caller's
    extra_float_digits of 0 rounded the lexical scores its explanations show; after the upgrade
    they are the default session's, byte for byte, and after the downgrade rounded again."""
    with _zebra_database(server, "pyretrieve_0034") as (dsn, app):
        with psycopg.connect(app, autocommit=True) as conn:
            exact = _zebra_search_at(conn, 1)
            assert _zebra_search_at(conn, 0) != exact
        migrate.upgrade(dsn, "pyretrieve_0035")
        with psycopg.connect(dsn) as admin:
            assert _settings(admin, ("search",), ("extra_float_digits",)) == {
                "search": ["extra_float_digits=1"]
            }
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search_at(conn, 0) == exact
            assert _zebra_search_at(conn, -15) == exact
        migrate.downgrade(dsn, "pyretrieve_0034")
        with psycopg.connect(dsn) as admin:
            assert _settings(admin, ("search",), ("extra_float_digits",)) == {"search": []}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search_at(conn, 0) != exact
            assert _zebra_search_at(conn, 1) == exact


def test_upgrading_to_0036_keeps_every_search_explanation(server: Server, template_db: str) -> None:
    """0036 hands search()'s legs to its fusion as arrays instead of jsonb: the zebra search's
    rows and explanations are 0035's after the upgrade, and after the downgrade, whatever
    extra_float_digits the session set."""
    with _zebra_database(server, "pyretrieve_0035") as (dsn, app):
        with psycopg.connect(app, autocommit=True) as conn:
            before = _zebra_search(conn)
        assert len(before) == 7
        migrate.upgrade(dsn, "pyretrieve_0036")
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search(conn) == before
            assert _zebra_search_at(conn, 0) == _zebra_search_at(conn, 1)
        migrate.downgrade(dsn, "pyretrieve_0035")
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_search(conn) == before


def _page_keys(dsn: str) -> dict[str, int]:
    """Pages under a bucket's key and under a group's, and postings in pages (superuser)."""
    with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
        got = admin.execute(
            "SELECT count(*) FILTER (WHERE bucket < 256) AS buckets,"
            "       count(*) FILTER (WHERE bucket >= 256) AS groups,"
            "       coalesce(sum(postings), 0) AS postings"
            "  FROM pyretrieve.lexical_pages"
        ).fetchone()
    assert got is not None
    return {k: int(v) for k, v in got.items()}


def test_upgrading_to_0059_merges_each_small_group_into_one_page_and_keeps_every_score(
    server: Server, template_db: str
) -> None:
    """0059 keeps a group of 16 buckets' small lists in one page of its own where they hold
    fewer than 1,024 postings: the upgrade compacts every scope, after which the zebra scopes'
    pages are the groups' own, fewer than the buckets' they replace, with the same postings, the
    index exact and every row, score and term of the lexical leg 0058's; the downgrade writes
    them back as the buckets' pages, the same rows again."""
    from tests.db.seed import lexical_index_errors

    with _zebra_database(server, "pyretrieve_0058") as (dsn, app):
        with psycopg.connect(app, autocommit=True) as conn:
            # Compacted at 0058: every small list in its bucket's pages.
            with acting_as(conn, "wally"):
                for project in ("docs", "wiki"):
                    conn.execute("SELECT pyretrieve.compact_lexical_index('acme', %s)", (project,))
            before = _zebra_leg(conn)
        assert len(before) > 20
        old = _page_keys(dsn)
        assert old["groups"] == 0
        assert old["buckets"] > 0
        migrate.upgrade(dsn, "pyretrieve_0059")
        new = _page_keys(dsn)
        assert new["buckets"] == 0
        assert 0 < new["groups"] < old["buckets"]
        assert new["postings"] == old["postings"]
        with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
            assert lexical_index_errors(admin) == {}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_leg(conn) == before
        migrate.downgrade(dsn, "pyretrieve_0058")
        back = _page_keys(dsn)
        assert back["groups"] == 0
        assert back["postings"] == old["postings"]
        with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as admin:
            assert lexical_index_errors(admin) == {}
        with psycopg.connect(app, autocommit=True) as conn:
            assert _zebra_leg(conn) == before
