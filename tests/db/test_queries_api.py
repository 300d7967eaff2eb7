"""The named queries call the installed SQL API with argument names it has.

A statement in ``pyretrieve/db/queries.py`` that names an argument the function does not have
would fail only when it runs; this reads every installed function's argument names and checks
each call of each named query against them.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from pyretrieve.db import queries

_CALL = re.compile(r"pyretrieve\.(\w+)\(([^()]*)\)")


def _argument_names(conn: psycopg.Connection[Any]) -> dict[str, list[set[str]]]:
    out: dict[str, list[set[str]]] = {}
    for row in conn.execute(
        "SELECT p.proname AS name, coalesce(p.proargnames, '{}') AS args"
        "  FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'pyretrieve'::regnamespace"
    ).fetchall():
        out.setdefault(row["name"], []).append(set(row["args"]))
    return out


def test_every_named_argument_exists_in_the_installed_function(
    conn: psycopg.Connection[Any],
) -> None:
    installed = _argument_names(conn)
    calls = 0
    for name in (n for n in queries.__all__ if n.isupper()):
        for function, args in _CALL.findall(getattr(queries, name)):
            named = {a.split("=>")[0].strip() for a in args.split(",") if "=>" in a}
            assert function in installed, f"{name}: no function pyretrieve.{function}"
            assert any(named <= overload for overload in installed[function]), (
                f"{name}: pyretrieve.{function} has no argument(s) {sorted(named)}"
            )
            calls += 1
    assert calls >= 20  # the read path, tools, writers and admin calls were all checked


@pytest.mark.parametrize("name", ["AUTHORIZE", "FRAGMENTS", "TOOL_ROLLOUT", "PUT_EMBEDDING"])
def test_a_misspelt_argument_would_be_caught(conn: psycopg.Connection[Any], name: str) -> None:
    installed = _argument_names(conn)
    ((function, args),) = _CALL.findall(getattr(queries, name))
    first = args.split("=>")[0].strip()
    named = {first + "x"}
    assert not any(named <= overload for overload in installed[function])
