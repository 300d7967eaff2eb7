"""The DBA's audit: the shipped schema audits clean, and every weakening is flagged.

Each bad case is built in its own test database as the superuser and must show up in
``pyretrieve.audit_findings`` with the right code, severity and object. Roles are cluster-wide,
so every role a test creates has a name of its own and is dropped when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pyretrieve.audit import AuditReport, Finding, read_report
from pyretrieve.db.errors import translate
from pyretrieve.errors import AccessDenied
from tests.conftest import AUTHENTICATOR, SESSION_TAG, Database, role

ROOT = Path(__file__).resolve().parent.parent.parent
PGTAP_TEST = ROOT / "sql" / "tests" / "pyretrieve_test.sql"

Conn = psycopg.Connection[Any]


def report_of(db: Database, principal: str | None = None) -> AuditReport:
    if principal is None:
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            return read_report(conn)
    with db.connect(autocommit=True) as conn:
        return read_report(conn, principal)


def serious(report: AuditReport) -> list[Finding]:
    return [f for f in report.findings if f.severity != "info"]


def found(report: AuditReport, code: str, obj: str | None = None) -> list[Finding]:
    return [f for f in report.findings if f.code == code and (obj is None or obj in f.object)]


@contextlib.contextmanager
def temp_roles(db: Database, *nicks: str) -> Iterator[dict[str, str]]:
    """Roles of this test only, dropped at the end with whatever they own in the database."""
    tag = secrets.token_hex(3)
    names = {nick: f"{SESSION_TAG}_audit{tag}_{nick}" for nick in nicks}
    try:
        yield names
    finally:
        with db.admin(autocommit=True) as admin:
            for name in reversed(names.values()):
                exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
                if exists.fetchone():
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def run(db: Database, *statements: str) -> None:
    with db.admin(autocommit=True) as admin:
        for statement in statements:
            admin.execute(statement)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The shipped schema
# ---------------------------------------------------------------------------------------------
def test_the_shipped_schema_audits_clean(db: Database) -> None:
    report = report_of(db)
    assert serious(report) == [], "\n".join(
        f"{f.code} {f.object}: {f.evidence}" for f in report.findings
    )

    # What is reported as info, and why: the SQL API's SECURITY DEFINER functions, each with
    # its written reason, executable by its groups only (never PUBLIC).
    definer = found(report, "security_definer")
    names = [f.object for f in definer]
    assert "pyretrieve.create_model_index(text)" in names
    assert "pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)" in names
    for f in definer:
        assert "SECURITY DEFINER" in f.evidence.split("Reason:", 1)[1], f.object
        assert "PUBLIC" not in f.evidence.split("executable by", 1)[1].split(".")[0], f.object
    index = next(f for f in definer if f.object == "pyretrieve.create_model_index(text)")
    assert "index creation needs the table owner" in index.evidence
    # Every primary and unique key starts with workspace_id (the decisions log's id key went
    # with its partitioning: a unique key of a partitioned table holds the partition key).
    assert found(report, "unique_key_not_workspace_first") == []
    # The harness's authenticator may SET ROLE to the owner (tests check the owner is bound).
    owner = found(report, "login_can_become_owner")
    assert ("info", AUTHENTICATOR) in [(f.severity, f.object) for f in owner]
    assert {f.code for f in report.findings} == {"security_definer", "login_can_become_owner"}

    # The inventory covers the whole schema, the decisions log's monthly partitions included:
    # each has row-level security forced and no policy of its own, so it is read only through
    # pyretrieve.decisions, under its policies.
    tables = [t for t in report.tables if t.partition_of is None]
    partitions = [t for t in report.tables if t.partition_of is not None]
    assert len(tables) == 19
    assert len(partitions) >= 3
    assert {t.partition_of for t in partitions} == {"pyretrieve.decisions"}
    assert all(t.rls_enabled and t.rls_forced and t.policies == 0 for t in partitions)
    assert all(t.rls_enabled and t.rls_forced and t.policies >= 1 for t in tables)
    assert all(t.owner == "pyretrieve_owner" for t in report.tables)
    assert all(
        p.permissive
        and not p.per_row_calls
        and not p.trusts_settings_in
        and not p.reads_binding_twice
        for p in report.policies
    )
    # Every policy but the installer's is for pyretrieve_api, the role the API runs as.
    assert {r for p in report.policies for r in p.roles} == {"pyretrieve_api", "pyretrieve_owner"}
    grants_own = next(p for p in report.policies if p.policy_name == "grants_own")
    assert grants_own.command == "SELECT"
    assert grants_own.roles == ("pyretrieve_api",)
    assert all(v.security_invoker for v in report.views)
    assert all(f.search_path == "pg_catalog, pg_temp" for f in report.functions)
    assert not any(f.public_execute or f.leakproof for f in report.functions)
    # The groups hold no privilege on any table, view or sequence: the functions are the door.
    groups = {"pyretrieve_reader", "pyretrieve_writer", "pyretrieve_admin", "PUBLIC"}
    assert [
        (p.object, p.grantee, p.privilege)
        for p in report.privileges
        if p.grantee in groups and p.object_type != "schema"
    ] == []
    roles = {r.role_name: r for r in report.roles}
    assert roles["pyretrieve_writer"].app_groups == ("pyretrieve_reader", "pyretrieve_writer")
    assert roles[role("alice")].app_groups == ("pyretrieve_reader",)
    assert not roles[role("alice")].reaches_superuser
    assert not roles[role("alice")].can_become_owner
    assert {o.owner for o in report.objects} == {"pyretrieve_owner", "pyretrieve_api"}
    assert all(o.object_type == "function" for o in report.objects if o.owner == "pyretrieve_api")


def test_the_server_version_is_checked_against_the_minimum_minor_release(db: Database) -> None:
    server = report_of(db).server
    minimums = {17: 170006, 16: 160010, 15: 150014, 14: 140019, 13: 130022}
    num = server.server_version_num
    expected = num >= 180000 or (server.major in minimums and num >= minimums[server.major])
    assert server.meets_minimum is expected
    assert bool(found(report_of(db), "server_version_below_minimum")) is not expected
    assert "CVE-2025-8713" in server.fixes


def test_admins_read_the_audit_and_readers_may_not(db: Database) -> None:
    as_admin = report_of(db, role("adam"))
    assert as_admin.findings == report_of(db).findings
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as exc:
        report_of(db, role("alice"))
    assert isinstance(translate(exc.value), AccessDenied)


# ---------------------------------------------------------------------------------------------
# Each weakening, built and flagged
# ---------------------------------------------------------------------------------------------
Case = Callable[[Database, dict[str, str]], list[tuple[str, str, str]]]


def _rls_disabled(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "ALTER TABLE pyretrieve.projects DISABLE ROW LEVEL SECURITY")
    return [("error", "rls_disabled", "pyretrieve.projects")]


def _rls_not_forced(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "ALTER TABLE pyretrieve.workspaces NO FORCE ROW LEVEL SECURITY")
    return [("error", "rls_not_forced", "pyretrieve.workspaces")]


def _table_without_policy(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE TABLE pyretrieve.notes (workspace_id text, note text, PRIMARY KEY (workspace_id))",
        "ALTER TABLE pyretrieve.notes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY",
        "ALTER TABLE pyretrieve.notes OWNER TO pyretrieve_owner",
    )
    return [("warning", "table_without_policy", "pyretrieve.notes")]


def _overlapping_policies(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE POLICY grants_all ON pyretrieve.grants FOR ALL TO pyretrieve_api"
        " USING (granted_at > now() - interval '1 day')",
    )
    return [("warning", "overlapping_permissive_policies", "pyretrieve.grants")]


def _policy_true_for_a_principal(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["app"]}" NOLOGIN',
        f'GRANT pyretrieve_reader TO "{r["app"]}"',
        f'CREATE POLICY fragments_open ON pyretrieve.fragments FOR SELECT TO "{r["app"]}" USING (true)',
        "CREATE POLICY decisions_open ON pyretrieve.decisions FOR SELECT TO PUBLIC USING (true)",
    )
    return [
        ("error", "policy_true_for_principals", "fragments_open on pyretrieve.fragments"),
        ("error", "policy_true_for_principals", "decisions_open on pyretrieve.decisions"),
    ]


def _setting_hidden_behind_an_or(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE POLICY fragments_hidden ON pyretrieve.fragments FOR SELECT TO pyretrieve_api"
        " USING ((SELECT current_setting('app.workspace', true)) = workspace_id"
        "        OR current_user IS NULL)",
    )
    return [("error", "policy_trusts_setting", "fragments_hidden on pyretrieve.fragments")]


def _binding_weakened_two_calls_deep(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    # bound_decision() keeps its name and shape, but now follows a setting through two helpers.
    run(
        db,
        "CREATE FUNCTION pyretrieve.decision_setting() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN current_setting('pyretrieve.decision', true)",
        "CREATE FUNCTION pyretrieve.decision_key() RETURNS uuid LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN pyretrieve.decision_setting()::uuid",
        "ALTER FUNCTION pyretrieve.decision_setting() OWNER TO pyretrieve_owner",
        "ALTER FUNCTION pyretrieve.decision_key() OWNER TO pyretrieve_owner",
        "CREATE OR REPLACE FUNCTION pyretrieve.bound_decision() RETURNS SETOF pyretrieve.decisions"
        " LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp"
        " BEGIN ATOMIC SELECT d.* FROM pyretrieve.decisions d"
        " WHERE d.decision_id = pyretrieve.decision_key() LIMIT 1; END",
    )
    # The read binding is written only as a copy of bound_decision()'s row, so the policies
    # that check that copy now trust the setting.
    return [
        ("error", "policy_trusts_setting", "read_bindings_insert on pyretrieve.read_bindings"),
        ("error", "policy_trusts_setting", "read_bindings_replace on pyretrieve.read_bindings"),
    ]


def _filter_weakened_two_calls_deep(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    # bound_filter(), which every read policy reads in several sub-selects, keeps its name and
    # shape, but now takes the scope from a setting through two helpers.
    run(
        db,
        "CREATE FUNCTION pyretrieve.scope_setting() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN current_setting('pyretrieve.scope', true)",
        "CREATE FUNCTION pyretrieve.scope_key() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN pyretrieve.scope_setting()",
        "ALTER FUNCTION pyretrieve.scope_setting() OWNER TO pyretrieve_owner",
        "ALTER FUNCTION pyretrieve.scope_key() OWNER TO pyretrieve_owner",
        "CREATE OR REPLACE FUNCTION pyretrieve.bound_filter() RETURNS TABLE ("
        " workspace_id pyretrieve.identifier, project_id pyretrieve.identifier,"
        " ceiling pyretrieve.classification, oldest timestamptz, reading boolean)"
        " LANGUAGE sql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp"
        " BEGIN ATOMIC SELECT g.workspace_id, g.project_id, g.ceiling,"
        " '-infinity'::timestamptz, true FROM pyretrieve.grants g"
        " WHERE g.workspace_id = pyretrieve.scope_key() LIMIT 1; END",
    )
    return [
        ("error", "policy_trusts_setting", "fragments_read on pyretrieve.fragments"),
        ("error", "policy_reads_binding_twice", "fragments_read on pyretrieve.fragments"),
        ("error", "policy_reads_binding_twice", "embeddings_read on pyretrieve.embeddings"),
        ("error", "policy_reads_binding_twice", "lexical_blocks_read on pyretrieve.lexical_blocks"),
    ]


def _fields_read_by_separate_sub_selects(
    db: Database, r: dict[str, str]
) -> list[tuple[str, str, str]]:
    # The 0003 shape: a setting-selected binding, each field in its own sub-select.
    run(
        db,
        "CREATE FUNCTION pyretrieve.setting_scope() RETURNS TABLE (w text, p text)"
        " LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp BEGIN ATOMIC"
        " SELECT g.workspace_id, g.project_id FROM pyretrieve.grants g"
        " WHERE g.workspace_id = split_part(current_setting('app.scope', true), '/', 1)"
        " AND pg_has_role(g.principal, 'USAGE'); END",
        "ALTER FUNCTION pyretrieve.setting_scope() OWNER TO pyretrieve_owner",
        "CREATE POLICY fragments_by_scope ON pyretrieve.fragments FOR SELECT TO pyretrieve_api"
        " USING (workspace_id = (SELECT s.w FROM pyretrieve.setting_scope() s)"
        "        AND project_id = (SELECT s.p FROM pyretrieve.setting_scope() s))",
    )
    return [("error", "policy_reads_binding_twice", "fragments_by_scope on pyretrieve.fragments")]


def _table_privilege_for_a_group(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "GRANT SELECT ON pyretrieve.fragments TO pyretrieve_reader",
        "GRANT SELECT ON pyretrieve.scope_generations TO pyretrieve_writer",
    )
    return [
        ("error", "principal_table_privilege", "pyretrieve.fragments"),
        ("error", "principal_table_privilege", "pyretrieve.scope_generations"),
    ]


def _decisions_mutable(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "GRANT DELETE ON pyretrieve.decisions TO pyretrieve_api",
        "CREATE POLICY decisions_rewrite ON pyretrieve.decisions FOR UPDATE TO pyretrieve_api"
        " USING (xact_id = pg_current_xact_id_if_assigned())",
    )
    return [
        ("error", "decisions_mutable", "pyretrieve.decisions"),
        ("error", "decisions_mutable", "decisions_rewrite on pyretrieve.decisions"),
    ]


def _decision_partition_mutable(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    # A partition is a table of its own: a privilege or policy on it is a way around the log's.
    with db.admin() as admin:
        got = admin.execute(
            "SELECT partition_name FROM pyretrieve.decision_partition_ranges()"
            " WHERE range_start <= now() AND range_end > now()"
        ).fetchone()
    assert got is not None
    part = f"pyretrieve.{got['partition_name']}"
    run(
        db,
        f"GRANT DELETE ON {part} TO pyretrieve_api",
        f"CREATE POLICY partition_rewrite ON {part} FOR ALL TO pyretrieve_api USING (true)",
    )
    return [
        ("error", "decisions_mutable", part),
        ("error", "decisions_mutable", f"partition_rewrite on {part}"),
    ]


def _content_updatable(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "GRANT UPDATE (body, classification) ON pyretrieve.fragments TO pyretrieve_api")
    return [
        ("error", "content_updatable", "pyretrieve.fragments.body"),
        ("error", "content_updatable", "pyretrieve.fragments.classification"),
    ]


def _principal_can_become_owner(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["app"]}" NOLOGIN',
        f'GRANT pyretrieve_writer TO "{r["app"]}"',
        f'GRANT pyretrieve_api TO "{r["app"]}"',
    )
    return [("error", "principal_can_become_owner", r["app"])]


def _definer_outside_schema(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION public.every_body() RETURNS SETOF text LANGUAGE sql SECURITY DEFINER"
        " SET search_path = pg_catalog, pg_temp AS $$ SELECT body FROM pyretrieve.fragments $$",
        "GRANT EXECUTE ON FUNCTION public.every_body() TO pyretrieve_reader",
    )
    return [("error", "definer_outside_schema", "public.every_body()")]


def _view_outside_schema(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE VIEW public.all_grants AS SELECT workspace_id, principal FROM pyretrieve.grants",
        "GRANT SELECT ON public.all_grants TO pyretrieve_admin",
    )
    return [("error", "view_outside_schema", "public.all_grants")]


def _policy_trusts_setting(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE POLICY fragments_by_setting ON pyretrieve.fragments FOR SELECT TO pyretrieve_admin"
        " USING (workspace_id = current_setting('app.x'))",
    )
    return [("error", "policy_trusts_setting", "fragments_by_setting on pyretrieve.fragments")]


def _policy_trusts_setting_through_a_function(
    db: Database, r: dict[str, str]
) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.app_workspace() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN current_setting('app.workspace', true)",
        "ALTER FUNCTION pyretrieve.app_workspace() OWNER TO pyretrieve_owner",
        "CREATE POLICY fragments_by_helper ON pyretrieve.fragments FOR SELECT TO pyretrieve_admin"
        " USING (workspace_id = (SELECT pyretrieve.app_workspace()))",
    )
    return [("error", "policy_trusts_setting", "fragments_by_helper on pyretrieve.fragments")]


def _per_row_call(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.my_workspace() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN 'w1'",
        "ALTER FUNCTION pyretrieve.my_workspace() OWNER TO pyretrieve_owner",
        "CREATE POLICY workspaces_mine ON pyretrieve.workspaces FOR SELECT TO pyretrieve_writer"
        " USING (workspace_id = pyretrieve.my_workspace() AND pg_has_role(workspace_id, 'USAGE'))",
    )
    return [("warning", "policy_per_row_call", "workspaces_mine on pyretrieve.workspaces")]


def _unique_key_not_workspace_first(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE UNIQUE INDEX grants_by_purpose ON pyretrieve.grants (purpose, workspace_id, grant_id)",
    )
    return [("warning", "unique_key_not_workspace_first", "pyretrieve.grants_by_purpose")]


def _definer_without_search_path(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.count_all() RETURNS bigint LANGUAGE sql SECURITY DEFINER"
        " AS $$ SELECT count(*) FROM pyretrieve.fragments $$",
        "ALTER FUNCTION pyretrieve.count_all() OWNER TO pyretrieve_owner",
        "REVOKE ALL ON FUNCTION pyretrieve.count_all() FROM PUBLIC",
    )
    return [
        ("error", "definer_without_search_path", "pyretrieve.count_all()"),
        ("info", "security_definer", "pyretrieve.count_all()"),
    ]


def _definer_public_execute(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.count_all() RETURNS bigint LANGUAGE sql SECURITY DEFINER"
        " SET search_path = pg_catalog, pg_temp AS $$ SELECT count(*) FROM pyretrieve.fragments $$",
        "ALTER FUNCTION pyretrieve.count_all() OWNER TO pyretrieve_owner",
    )
    return [("error", "definer_public_execute", "pyretrieve.count_all()")]


def _definer_search_path_unsafe(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.count_all() RETURNS bigint LANGUAGE sql SECURITY DEFINER"
        " SET search_path = pyretrieve AS $$ SELECT count(*) FROM pyretrieve.fragments $$",
        "ALTER FUNCTION pyretrieve.count_all() OWNER TO pyretrieve_owner",
        "REVOKE ALL ON FUNCTION pyretrieve.count_all() FROM PUBLIC",
    )
    return [("warning", "definer_search_path_unsafe", "pyretrieve.count_all()")]


def _definer_follows_caller_planner(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    """A read function a reader may call, pinning its search_path but not the plans: a caller
    with index scans off makes it scan every tenant's fragments."""
    run(
        db,
        "CREATE FUNCTION pyretrieve.count_mine(p_workspace text) RETURNS bigint LANGUAGE sql"
        " STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS"
        " $$ SELECT count(*) FROM pyretrieve.fragments WHERE workspace_id = p_workspace $$",
        "ALTER FUNCTION pyretrieve.count_mine(text) OWNER TO pyretrieve_api",
        "REVOKE ALL ON FUNCTION pyretrieve.count_mine(text) FROM PUBLIC",
        "GRANT EXECUTE ON FUNCTION pyretrieve.count_mine(text) TO pyretrieve_reader",
    )
    return [("warning", "definer_follows_caller_planner", "pyretrieve.count_mine(text)")]


def _definer_plan_cache_mode_unpinned(
    db: Database, r: dict[str, str]
) -> list[tuple[str, str, str]]:
    """A read function a reader may call, pinning the caller's planner settings but not its plan
    cache mode: planned for each call's values first, behind the statistics of a growing scope
    its probe reads the scope."""
    run(
        db,
        "CREATE FUNCTION pyretrieve.count_mine(p_workspace text) RETURNS bigint LANGUAGE sql"
        " STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp"
        " SET enable_seqscan = off SET enable_indexscan = on SET enable_bitmapscan = on AS"
        " $$ SELECT count(*) FROM pyretrieve.fragments WHERE workspace_id = p_workspace $$",
        "ALTER FUNCTION pyretrieve.count_mine(text) OWNER TO pyretrieve_api",
        "REVOKE ALL ON FUNCTION pyretrieve.count_mine(text) FROM PUBLIC",
        "GRANT EXECUTE ON FUNCTION pyretrieve.count_mine(text) TO pyretrieve_reader",
    )
    return [("warning", "definer_plan_cache_mode_unpinned", "pyretrieve.count_mine(text)")]


def _leakproof(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE FUNCTION pyretrieve.same(a text, b text) RETURNS boolean LANGUAGE sql IMMUTABLE"
        " LEAKPROOF SET search_path = pg_catalog, pg_temp RETURN a = b",
        "ALTER FUNCTION pyretrieve.same(text, text) OWNER TO pyretrieve_owner",
        "REVOKE ALL ON FUNCTION pyretrieve.same(text, text) FROM PUBLIC",
    )
    return [("warning", "leakproof_function", "pyretrieve.same(text, text)")]


def _view_without_security_invoker(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "CREATE VIEW pyretrieve.all_workspaces AS SELECT workspace_id FROM pyretrieve.workspaces",
        "ALTER VIEW pyretrieve.all_workspaces OWNER TO pyretrieve_owner",
        "REVOKE ALL ON pyretrieve.all_workspaces FROM PUBLIC",
    )
    return [("error", "view_without_security_invoker", "pyretrieve.all_workspaces")]


def _bypassrls_direct(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["app"]}" NOLOGIN BYPASSRLS',
        f'GRANT pyretrieve_reader TO "{r["app"]}"',
    )
    return [("error", "app_role_bypassrls", r["app"])]


def _bypassrls_through_membership(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["bypass"]}" NOLOGIN BYPASSRLS',
        f'CREATE ROLE "{r["app"]}" NOLOGIN',
        f'GRANT pyretrieve_reader TO "{r["app"]}"',
        f'GRANT "{r["bypass"]}" TO "{r["app"]}"',
    )
    return [("error", "app_role_bypassrls", r["app"])]


def _superuser_through_membership(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["su"]}" NOLOGIN SUPERUSER',
        f'CREATE ROLE "{r["app"]}" NOLOGIN',
        f'GRANT pyretrieve_writer TO "{r["app"]}"',
        f'GRANT "{r["su"]}" TO "{r["app"]}"',
    )
    return [("error", "app_role_superuser", r["app"])]


def _app_role_owns_objects(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["app"]}" NOLOGIN',
        f'GRANT pyretrieve_admin TO "{r["app"]}"',
        "CREATE SEQUENCE pyretrieve.ticket_seq",
        f'ALTER SEQUENCE pyretrieve.ticket_seq OWNER TO "{r["app"]}"',
    )
    return [("error", "app_role_owns_objects", "pyretrieve.ticket_seq")]


def _owned_by_login_role(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["deployer"]}" LOGIN',
        "CREATE SEQUENCE pyretrieve.ticket_seq",
        f'ALTER SEQUENCE pyretrieve.ticket_seq OWNER TO "{r["deployer"]}"',
    )
    return [("error", "owned_by_login_role", "pyretrieve.ticket_seq")]


def _truncate_granted(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "GRANT TRUNCATE ON pyretrieve.fragments TO pyretrieve_admin")
    return [("error", "truncate_granted", "pyretrieve.fragments")]


def _references_granted(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        "GRANT REFERENCES (fragment_id) ON pyretrieve.fragments TO pyretrieve_writer",
        "GRANT REFERENCES ON pyretrieve.projects TO pyretrieve_reader",
    )
    return [
        ("warning", "references_granted", "pyretrieve.fragments.fragment_id"),
        ("warning", "references_granted", "pyretrieve.projects"),
    ]


def _schema_create_granted(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "GRANT CREATE ON SCHEMA pyretrieve TO pyretrieve_admin")
    return [("warning", "schema_create_granted", "pyretrieve")]


def _public_privilege(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(db, "GRANT SELECT ON pyretrieve.workspaces TO PUBLIC")
    return [("warning", "public_privilege", "pyretrieve.workspaces")]


def _grant_to_dropped_role(db: Database, r: dict[str, str]) -> list[tuple[str, str, str]]:
    run(
        db,
        f'CREATE ROLE "{r["gone"]}" NOLOGIN',
        "SELECT pyretrieve.create_workspace('w1')",
        "SELECT pyretrieve.create_project('w1', 'p1')",
        f"SELECT pyretrieve.grant_access('\"{r['gone']}\"', 'w1', 'p1', 'support', 'internal')",
        f'DROP ROLE "{r["gone"]}"',
    )
    return [("warning", "grant_to_dropped_role", "w1/p1 purpose support")]


CASES: dict[str, tuple[Case, tuple[str, ...]]] = {
    "rls_disabled": (_rls_disabled, ()),
    "rls_not_forced": (_rls_not_forced, ()),
    "table_without_policy": (_table_without_policy, ()),
    "overlapping_permissive_policies": (_overlapping_policies, ()),
    "policy_true_for_principals": (_policy_true_for_a_principal, ("app",)),
    "setting_hidden_behind_an_or": (_setting_hidden_behind_an_or, ()),
    "binding_weakened_two_calls_deep": (_binding_weakened_two_calls_deep, ()),
    "filter_weakened_two_calls_deep": (_filter_weakened_two_calls_deep, ()),
    "fields_read_by_separate_sub_selects": (_fields_read_by_separate_sub_selects, ()),
    "principal_table_privilege": (_table_privilege_for_a_group, ()),
    "decisions_mutable": (_decisions_mutable, ()),
    "decision_partition_mutable": (_decision_partition_mutable, ()),
    "content_updatable": (_content_updatable, ()),
    "principal_can_become_owner": (_principal_can_become_owner, ("app",)),
    "definer_outside_schema": (_definer_outside_schema, ()),
    "view_outside_schema": (_view_outside_schema, ()),
    "policy_trusts_setting": (_policy_trusts_setting, ()),
    "policy_trusts_setting_through_a_function": (_policy_trusts_setting_through_a_function, ()),
    "policy_per_row_call": (_per_row_call, ()),
    "unique_key_not_workspace_first": (_unique_key_not_workspace_first, ()),
    "definer_without_search_path": (_definer_without_search_path, ()),
    "definer_public_execute": (_definer_public_execute, ()),
    "definer_search_path_unsafe": (_definer_search_path_unsafe, ()),
    "definer_follows_caller_planner": (_definer_follows_caller_planner, ()),
    "definer_plan_cache_mode_unpinned": (_definer_plan_cache_mode_unpinned, ()),
    "leakproof_function": (_leakproof, ()),
    "view_without_security_invoker": (_view_without_security_invoker, ()),
    "app_role_bypassrls_direct": (_bypassrls_direct, ("app",)),
    "app_role_bypassrls_through_membership": (_bypassrls_through_membership, ("bypass", "app")),
    "app_role_superuser_through_membership": (_superuser_through_membership, ("su", "app")),
    "app_role_owns_objects": (_app_role_owns_objects, ("app",)),
    "owned_by_login_role": (_owned_by_login_role, ("deployer",)),
    "truncate_granted": (_truncate_granted, ()),
    "references_granted": (_references_granted, ()),
    "schema_create_granted": (_schema_create_granted, ()),
    "public_privilege": (_public_privilege, ()),
    "grant_to_dropped_role": (_grant_to_dropped_role, ("gone",)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_weakening_is_flagged(db: Database, case: str) -> None:
    build, nicks = CASES[case]
    with temp_roles(db, *nicks) as roles:
        expected = build(db, roles)
        report = report_of(db)
    for severity, code, obj in expected:
        hits = [f for f in found(report, code) if f.object == obj]
        assert hits, f"{code} on {obj} not flagged; findings:\n" + "\n".join(
            f"  {f.severity} {f.code} {f.object}" for f in report.findings
        )
        assert all(f.severity == severity for f in hits)
        assert all(f.evidence and f.fix for f in hits)
    # Nothing else of error or warning grade that the case did not build.
    expected_codes = {code for _, code, _ in expected}
    others = {f.code for f in serious(report)} - expected_codes
    assert others <= _SIDE_EFFECTS.get(case, set()), others


# Findings a case cannot avoid producing besides the one it builds.
_SIDE_EFFECTS: dict[str, set[str]] = {
    # current_setting() outside a sub-select is also evaluated once per row.
    "policy_trusts_setting": {"policy_per_row_call"},
    # A policy beside the shipped ones for the same role and command overlaps them.
    "policy_true_for_principals": {"overlapping_permissive_policies"},
    "setting_hidden_behind_an_or": {"overlapping_permissive_policies", "policy_per_row_call"},
    "fields_read_by_separate_sub_selects": {"overlapping_permissive_policies"},
    "decisions_mutable": set(),
    # Privileges of principal groups are the function door's error as well.
    "truncate_granted": {"principal_table_privilege"},
    "references_granted": {"principal_table_privilege"},
    "public_privilege": {"principal_table_privilege"},
    # A definer every role may execute is one a principal may call with its own plan settings.
    "definer_public_execute": {
        "definer_follows_caller_planner",
        "definer_plan_cache_mode_unpinned",
    },
    # A function that plans with the caller's settings pins no plan cache mode either.
    "definer_follows_caller_planner": {"definer_plan_cache_mode_unpinned"},
    # The weakened helper is a SQL function of the owner called by every read policy.
    "binding_weakened_two_calls_deep": {"policy_trusts_setting", "policy_reads_binding_twice"},
    "filter_weakened_two_calls_deep": {"policy_trusts_setting", "policy_reads_binding_twice"},
}


def test_the_flagged_roles_name_the_membership_chain(db: Database) -> None:
    with temp_roles(db, "su", "app") as r:
        _superuser_through_membership(db, r)
        report = report_of(db)
        hit = found(report, "app_role_superuser", r["app"])[0]
        assert f"{r['app']} -> {r['su']}" in hit.evidence
        assert hit.fix.startswith(f"REVOKE {r['su']} FROM {r['app']};")
        roles = {x.role_name: x for x in report.roles}
        assert roles[r["app"]].reaches_superuser
        assert roles[r["app"]].app_groups == ("pyretrieve_reader", "pyretrieve_writer")
        assert roles[r["app"]].can_become_owner


def test_sound_policies_are_not_flagged(db: Database) -> None:
    # A setting that only selects among what the identity was granted, and calls wrapped in a
    # sub-select or reading the row, are the patterns the findings recommend.
    run(
        db,
        "CREATE FUNCTION pyretrieve.my_workspace() RETURNS text LANGUAGE sql STABLE"
        " SET search_path = pg_catalog, pg_temp RETURN current_setting('app.workspace', true)",
        "ALTER FUNCTION pyretrieve.my_workspace() OWNER TO pyretrieve_owner",
        "CREATE POLICY fragments_selected ON pyretrieve.fragments FOR SELECT TO pyretrieve_admin"
        " USING (workspace_id = (SELECT pyretrieve.my_workspace())"
        "        AND pg_has_role(workspace_id, 'USAGE'))",
    )
    report = report_of(db)
    policy = next(p for p in report.policies if p.policy_name == "fragments_selected")
    assert policy.per_row_calls == ()
    assert policy.trusts_settings_in == ()
    assert serious(report) == []


def test_per_row_calls_name_the_function(db: Database) -> None:
    _per_row_call(db, {})
    policy = next(p for p in report_of(db).policies if p.policy_name == "workspaces_mine")
    # pg_has_role(workspace_id, ...) reads the row, so only the helper is per row.
    assert policy.per_row_calls == ("pyretrieve.my_workspace()",)


# ---------------------------------------------------------------------------------------------
# The access matrix
# ---------------------------------------------------------------------------------------------
def test_the_access_matrix_resolves_grants_as_postgres_does(db: Database) -> None:
    with temp_roles(db, "team") as r:
        team = r["team"]
        past = datetime.now(UTC) - timedelta(days=1)
        run(
            db,
            f'CREATE ROLE "{team}" NOLOGIN',
            f'GRANT "{team}" TO "{role("bob")}"',
            "SELECT pyretrieve.create_workspace('acme')",
            "SELECT pyretrieve.create_project('acme', 'docs')",
            "SELECT pyretrieve.create_project('acme', 'wiki')",
        )
        with db.admin(autocommit=True) as admin:
            grant = "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, %s, %s, %s, %s)"
            admin.execute(
                grant,
                (
                    f'"{role("alice")}"',
                    "acme",
                    "docs",
                    "support",
                    "internal",
                    timedelta(hours=48),
                    "optional",
                    None,
                ),
            )
            admin.execute(
                grant,
                (f'"{team}"', "acme", "wiki", "research", "confidential", None, "required", None),
            )
            admin.execute(
                grant,
                (
                    f'"{role("wally")}"',
                    "acme",
                    "docs",
                    "ingest",
                    "restricted",
                    None,
                    "disabled",
                    None,
                ),
            )
            admin.execute(
                grant,
                (f'"{role("carol")}"', "acme", "docs", "support", "public", None, "optional", past),
            )
        access = report_of(db).access

    rows = {(a.principal, a.workspace_id, a.project_id, a.purpose): a for a in access}
    alice = rows[(role("alice"), "acme", "docs", "support")]
    assert (alice.granted_to, alice.through_membership) == (role("alice"), False)
    assert (alice.can_read, alice.can_write, alice.live) == (True, False, True)
    assert (alice.ceiling, alice.max_age, alice.semantic_policy) == (
        "internal",
        timedelta(hours=48),
        "optional",
    )
    # A group's grant reaches its members, and the group itself holds it.
    bob = rows[(role("bob"), "acme", "wiki", "research")]
    assert (bob.granted_to, bob.through_membership, bob.can_read) == (team, True, True)
    assert (bob.ceiling, bob.semantic_policy) == ("confidential", "required")
    group = rows[(team, "acme", "wiki", "research")]
    assert (group.can_read, group.through_membership) == (False, False)
    # Writers write.
    wally = rows[(role("wally"), "acme", "docs", "ingest")]
    assert (wally.can_read, wally.can_write) == (True, True)
    # An expired grant is listed, not live.
    carol = rows[(role("carol"), "acme", "docs", "support")]
    assert carol.live is False
    assert carol.expires_at is not None
    assert carol.expires_at < datetime.now(UTC)
    # Nobody else holds anything: not alice's fellow readers, not the NOINHERIT
    # authenticator (it must SET ROLE first), not superusers.
    principals = {a.principal for a in access}
    assert principals == {role("alice"), role("bob"), team, role("wally"), role("carol")}


def test_the_access_matrix_agrees_with_authorize(db: Database) -> None:
    # What the matrix says a principal may read, authorize() grants, and nothing more.
    run(
        db,
        "SELECT pyretrieve.create_workspace('acme')",
        "SELECT pyretrieve.create_project('acme', 'docs')",
        f"SELECT pyretrieve.grant_access('\"{role('alice')}\"', 'acme', 'docs', 'support', 'internal')",
    )
    access = report_of(db).access
    with db.connect(autocommit=True) as conn:
        for nick in ("alice", "bob"):
            listed = any(a.principal == role(nick) and a.can_read and a.live for a in access)
            error: psycopg.Error | None = None
            try:
                with conn.transaction():
                    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role(nick))))
                    conn.execute(
                        "SELECT * FROM pyretrieve.authorize('acme', 'docs', 'support',"
                        " sha256('q'::bytea), 'disabled', NULL, 10)"
                    )
            except psycopg.Error as exc:
                error = exc
            if error is not None:
                assert isinstance(translate(error), AccessDenied)
            allowed = error is None
            assert allowed is listed, nick


# ---------------------------------------------------------------------------------------------
# Migration: 0002 goes down and up cleanly
# ---------------------------------------------------------------------------------------------
def test_the_audit_views_are_documented_and_locked_down(db: Database) -> None:
    with db.admin() as conn:
        rows = conn.execute(
            """SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment,
                      c.reloptions, c.relacl::text AS acl
                 FROM pg_class c
                WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'v'
                  AND c.relname LIKE 'audit%'
                ORDER BY 1"""
        ).fetchall()
    assert [r["relname"] for r in rows] == [
        "audit_access",
        "audit_findings",
        "audit_function_reach",
        "audit_functions",
        "audit_keys",
        "audit_objects",
        "audit_policies",
        "audit_privileges",
        "audit_roles",
        "audit_server",
        "audit_tables",
        "audit_views",
    ]
    for r in rows:
        assert r["comment"], r["relname"]
        assert r["reloptions"] == ["security_invoker=true"]
        # Readable by pyretrieve_api only (the admins' audit functions run as it): no
        # principal group holds a privilege on a view.
        grantees = set(re.findall(r"([a-z_]*)=", r["acl"]))
        assert grantees == {"pyretrieve_owner", "pyretrieve_api"}, r


# ---------------------------------------------------------------------------------------------
# pgTAP: the file DBAs run with pg_prove
# ---------------------------------------------------------------------------------------------
def _pgtap_install_script() -> Path | None:
    """pgTAP's install script, from PGTAP_SQL or a Debian/Ubuntu postgresql-NN-pgtap package."""
    env = os.environ.get("PGTAP_SQL")
    if env:
        return Path(env)
    candidates = sorted(Path("/usr/share/postgresql").glob("*/extension/pgtap--*.sql"))
    full = [p for p in candidates if re.fullmatch(r"pgtap--\d+\.\d+\.\d+\.sql", p.name)]
    return full[-1] if full else None


def _load_pgtap(db: Database) -> None:
    with db.admin(autocommit=True) as admin:
        available = admin.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'pgtap'"
        ).fetchone()
        if available:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pgtap WITH SCHEMA public")
            return
        script = _pgtap_install_script()
        if script is None or not script.is_file():
            pytest.skip(
                "pgTAP is not available: install Debian's postgresql-15-pgtap (or set "
                "PGTAP_SQL to a pgtap--X.Y.Z.sql install script)"
            )
        # The extension script is plain SQL apart from its psql guard line.
        body = "\n".join(
            line
            for line in script.read_text(encoding="utf-8").splitlines()
            if not line.startswith("\\echo") and not line.startswith("\\quit")
        )
        with admin.transaction():
            admin.execute("SET LOCAL search_path = public")
            admin.execute(body)  # type: ignore[arg-type]


def _prove(db: Database) -> subprocess.CompletedProcess[str]:
    pg_prove = shutil.which("pg_prove")
    psql = shutil.which("psql")
    if pg_prove is None or psql is None:
        pytest.skip("pg_prove and psql are needed (Debian: libtap-parser-sourcehandler-pgtap-perl)")
    params = psycopg.conninfo.conninfo_to_dict(db.admin_dsn)
    env = {**os.environ, "PGOPTIONS": "-c search_path=public"}
    args = [pg_prove, "--verbose", "-d", str(params["dbname"])]
    for key, flag in (("host", "-h"), ("port", "-p"), ("user", "-U")):
        if params.get(key):
            args += [flag, str(params[key])]
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    return subprocess.run(
        [*args, str(PGTAP_TEST)], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_the_pgtap_file_passes_on_the_shipped_schema(db: Database) -> None:
    _load_pgtap(db)
    result = _prove(db)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    planned = re.search(r"^1\.\.(\d+)$", result.stdout, re.MULTILINE)
    assert planned, out
    assert int(planned.group(1)) >= 150
    assert "not ok" not in result.stdout
    assert "All tests successful." in out


def test_the_pgtap_file_fails_on_a_weakened_schema(db: Database) -> None:
    _load_pgtap(db)
    run(
        db,
        "ALTER TABLE pyretrieve.grants NO FORCE ROW LEVEL SECURITY",
        "GRANT TRUNCATE ON pyretrieve.fragments TO pyretrieve_admin",
    )
    result = _prove(db)
    assert result.returncode != 0
    assert "row-level security is forced on pyretrieve.grants" in result.stdout
    assert "no role but the owner holds TRUNCATE or REFERENCES" in result.stdout
