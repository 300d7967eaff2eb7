"""``pyretrieve.error_code()`` in SQL names the typed error the client raises, for every SQLSTATE.

A vector leg that fails degrades on both sides, and both name the failure's cause: the client
by translating the driver's exception (:func:`pyretrieve.db.errors.translate`), ``search()`` by
``error_code(SQLSTATE, SQLERRM)``. Here the server raises every SQLSTATE the driver knows (and
a few it does not), with plain messages and with the messages that change the translation
(a missing schema, a missing role, a role that may not be set); the client's translation of
each real exception must be the code ``error_code`` returns for it.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from pyretrieve.db.errors import schema_errors, translate
from tests.conftest import acting_as, rolled_back

# Classes 00-02 are not errors (success, warning, no data): RAISE EXCEPTION cannot raise them.
_NOT_ERRORS = ("00", "01", "02")

# The driver's table maps SQLSTATEs (and their names) to exception classes.
_KNOWN = {code for code in psycopg.errors._sqlcodes if re.fullmatch(r"[0-9A-Z]{5}", code)}
STATES = sorted(
    {c for c in _KNOWN if not c.startswith(_NOT_ERRORS)}
    | set(schema_errors())
    | {"PR099", "ZZ001", "08ZZZ", "22ZZZ", "HV0ZZ", "XX00Z"}
)

# Messages that make translate() look twice at an SQLSTATE.
CONTEXTUAL = [
    ("3F000", 'schema "pyretrieve" does not exist'),
    ("3F000", 'schema "other" does not exist'),
    ("42883", "function pyretrieve.search(unknown) does not exist"),
    ("42P01", 'relation "pyretrieve.fragments" does not exist'),
    ("42P01", 'relation "public.other" does not exist'),
    ("22023", 'role "ghost" does not exist'),
    ("42704", 'role "ghost" does not exist'),
    ("42704", 'role "ghost" does not exist\nand more'),
    ("42704", 'type "ghost" does not exist'),
    ("42501", 'permission denied to set role "ghost"'),
    ("42501", "permission denied for function vector_candidates"),
    ("28P01", "password authentication failed"),
]


def _raised(conn: psycopg.Connection[Any], state: str, message: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info, rolled_back(conn):
        conn.execute(
            sql.SQL("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = {}, MESSAGE = {}; END $$").format(
                sql.Literal(state), sql.Literal(message)
            )
        )
    assert info.value.sqlstate == state
    return info.value


def _sql_code(conn: psycopg.Connection[Any], state: str, message: str) -> str:
    row = conn.execute("SELECT pyretrieve.error_code(%s, %s) AS c", (state, message)).fetchone()
    assert row is not None
    return str(row["c"])


def test_every_sqlstate_gets_the_clients_code(conn: psycopg.Connection[Any]) -> None:
    assert len(STATES) > 200
    mismatches = []
    with acting_as(conn, "alice"):
        for state in STATES:
            message = f"something failed ({state})"
            want = translate(_raised(conn, state, message)).code
            got = _sql_code(conn, state, message)
            if got != want:
                mismatches.append((state, got, want))
    assert mismatches == []


@pytest.mark.parametrize(("state", "message"), CONTEXTUAL)
def test_the_messages_that_change_the_translation(
    conn: psycopg.Connection[Any], state: str, message: str
) -> None:
    with acting_as(conn, "alice"):
        want = translate(_raised(conn, state, message)).code
        assert _sql_code(conn, state, message) == want


def test_the_contextual_cases_are_not_all_the_same(conn: psycopg.Connection[Any]) -> None:
    # The check above could pass with a function that ignores the message only if translate()
    # ignored it too; it does not.
    with acting_as(conn, "alice"):
        codes = {_sql_code(conn, s, m) for s, m in CONTEXTUAL}
    assert {
        "VES_MEMORY_SCHEMA_MISSING",
        "VES_MEMORY_UNKNOWN_PRINCIPAL",
        "VES_MEMORY_ACCESS_DENIED",
        "VES_MEMORY_AUTHENTICATION_FAILED",
        "VES_MEMORY_INTERNAL",
    } <= codes
