"""``pyretrieve search`` and the admin commands against a real server, as principals.

Commands connect as the authenticator (``--dsn``) and act with ``--as``, as an application
would; every check reads what the command printed or what the database now holds.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from pyretrieve.cli import main
from pyretrieve.embedders.hashing import HashNgramEmbedder
from tests.conftest import Database, acting_as, role, with_test_model

WS, PJ, PURPOSE = "acme", "docs", "support"
BODIES = {
    "public": "how to rotate the API credentials every ninety days",
    "internal": "credential rotation runbook for the payments service",
    "confidential": "HIDDEN-SENTINEL rotation keys for the vault",
}


def cli(db: Database, nick: str, *args: str) -> Result:
    runner = CliRunner(env={"COLUMNS": "200"})
    return runner.invoke(main, [*with_test_model(args), "--dsn", db.app_dsn, "--as", role(nick)])


@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any]) -> Database:
    assert cli(db, "adam", "workspaces", "create", WS, "--project", PJ).exit_code == 0
    assert cli(db, "adam", "models", "register", "hash-ngram-v1").exit_code == 0
    granted = cli(
        db, "adam", "grant", role("wally"), "--workspace", WS, "--project", PJ,
        "--purpose", "ingest", "--ceiling", "restricted",
    )  # fmt: skip
    assert granted.exit_code == 0, granted.output
    embedder = HashNgramEmbedder()
    for classification, body in BODIES.items():
        with acting_as(conn, "wally"):
            fid = conn.execute(
                "SELECT pyretrieve.put_fragment(%s, %s, %s, %s::pyretrieve.classification) AS id",
                (WS, PJ, body, classification),
            ).fetchone()
            assert fid is not None
            vector = embedder.embed_query(body)
            conn.execute(
                "SELECT pyretrieve.put_embedding(%s, %s, %s, 'hash-ngram-v1', %s::vector,"
                " pyretrieve.content_digest(%s))",
                (WS, PJ, fid["id"], str(vector), body),
            )
    return db


def grant_alice(db: Database, *extra: str) -> Result:
    return cli(
        db, "adam", "grant", role("alice"), "--workspace", WS, "--project", PJ,
        "--purpose", PURPOSE, "--ceiling", "internal", *extra,
    )  # fmt: skip


def search(db: Database, *extra: str, nick: str = "alice") -> Result:
    return cli(
        db, nick, "search", "rotate credentials", "--workspace", WS, "--project", PJ,
        "--purpose", PURPOSE, *extra,
    )  # fmt: skip


def test_search_prints_a_table_and_the_explanation(scope: Database) -> None:
    assert grant_alice(scope).exit_code == 0
    out = search(scope, "--explain")
    assert out.exit_code == 0, out.output
    assert "semantic: used" in out.output
    assert "rotate the API credentials" in out.output
    assert '"trust": "untrusted-data"' in out.output
    # Above alice's ceiling: not in the table, not counted, not anywhere.
    assert "HIDDEN-SENTINEL" not in out.output
    assert "results: 2" in out.output


def test_search_json_is_the_canonical_result(scope: Database) -> None:
    assert grant_alice(scope).exit_code == 0
    out = search(scope, "--json", "--limit", "1")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert out.output.strip() == json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert len(doc["results"]) == 1
    # --limit bounds the output: what the limit cut is a count unless --omissions.
    assert "omissions" not in doc
    assert doc["omission_count"] == 1
    assert "HIDDEN-SENTINEL" not in out.output

    listed = search(scope, "--json", "--limit", "1", "--omissions")
    assert listed.exit_code == 0, listed.output
    full = json.loads(listed.output)
    assert full["omission_count"] == 1
    assert len(full["omissions"]) == 1
    assert full["omissions"][0]["reason"] == "result_limit"


def test_search_errors_are_one_line_with_a_code(scope: Database) -> None:
    out = search(scope, nick="bob")  # bob holds no grant
    assert out.exit_code == 2
    assert out.output.strip() == "error [VES_MEMORY_ACCESS_DENIED]: access denied"
    out = search(scope, "--limit", "0")
    assert out.exit_code == 2
    assert out.output.startswith("error [VES_MEMORY_INVALID_INPUT]:")
    assert "Traceback" not in out.output


def test_semantic_disabled_by_policy_is_shown(scope: Database) -> None:
    assert grant_alice(scope, "--semantic", "disabled").exit_code == 0
    out = search(scope)
    assert out.exit_code == 0, out.output
    assert "semantic: degraded (disabled; confidence lowered)" in out.output


def test_grant_revoke_and_principals(scope: Database) -> None:
    assert grant_alice(scope, "--max-age", "30 days").exit_code == 0
    listed = cli(scope, "adam", "principals")
    assert listed.exit_code == 0, listed.output
    assert role("alice") in listed.output
    assert "720:00:00" in listed.output  # stored as clock time
    revoked = cli(
        scope, "adam", "revoke", role("alice"), "--workspace", WS, "--project", PJ,
        "--purpose", PURPOSE,
    )  # fmt: skip
    assert revoked.output.strip() == "revoked"
    again = cli(
        scope, "adam", "revoke", role("alice"), "--workspace", WS, "--project", PJ,
        "--purpose", PURPOSE,
    )  # fmt: skip
    assert again.output.strip() == "no such grant"
    assert search(scope).exit_code == 2


def test_admin_commands_need_an_admin(scope: Database) -> None:
    out = grant_alice(scope)
    assert out.exit_code == 0
    denied = cli(
        scope, "alice", "grant", role("alice"), "--workspace", WS, "--project", PJ,
        "--purpose", PURPOSE, "--ceiling", "restricted",
    )  # fmt: skip
    assert denied.exit_code == 2
    assert denied.output.startswith("error [VES_MEMORY_ACCESS_DENIED]")
    # Only admins list workspaces and grants.
    for command in ("workspaces", "principals"):
        listed = cli(scope, "alice", command)
        assert listed.exit_code == 2, command
        assert listed.output.startswith("error [VES_MEMORY_ACCESS_DENIED]"), command
        assert WS not in listed.output


def test_workspaces_and_models_list_what_exists(scope: Database) -> None:
    ws = cli(scope, "adam", "workspaces")
    assert ws.exit_code == 0
    assert WS in ws.output
    assert PJ in ws.output
    models = cli(scope, "adam", "models")
    assert "hash-ngram-v1" in models.output
    assert "256" in models.output
    unknown = cli(scope, "adam", "models", "register", "no-such-model")
    assert unknown.exit_code == 2
    assert unknown.output.startswith("error [VES_MEMORY_UNKNOWN_MODEL]")


def test_search_says_why_the_vector_leg_gave_nothing(
    scope: Database, conn: psycopg.Connection[Any]
) -> None:
    """No silent lexical-only answer: a model with an embedder but no registration, and a
    scope whose fragments have no embedding for the model, are both said in words."""
    assert grant_alice(scope).exit_code == 0
    unregistered = search(scope, "--model", "all-MiniLM-L6-v2-int8")
    assert unregistered.exit_code == 0, unregistered.output
    assert "semantic: degraded (unavailable; confidence lowered)" in unregistered.output
    assert "the vector leg was unavailable for model all-MiniLM-L6-v2-int8" in unregistered.output

    embedded = search(scope)
    assert "the vector leg ran but found nothing" not in embedded.output
    # A project ingested without embeddings: the vector leg runs over nothing.
    assert cli(scope, "adam", "workspaces", "create", WS, "--project", "bare").exit_code == 0
    for nick, purpose, ceiling in (("wally", "ingest", "internal"), ("alice", PURPOSE, "internal")):
        granted = cli(scope, "adam", "grant", role(nick), "--workspace", WS, "--project", "bare",
                      "--purpose", purpose, "--ceiling", ceiling)  # fmt: skip
        assert granted.exit_code == 0, granted.output
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.put_fragment(%s, 'bare', %s)", (WS, BODIES["public"]))
    bare = cli(scope, "alice", "search", "rotate credentials", "--workspace", WS,
               "--project", "bare", "--purpose", PURPOSE)  # fmt: skip
    assert bare.exit_code == 0, bare.output
    assert "semantic: used" in bare.output
    assert "the vector leg ran but found nothing: no fragment you may see here has an" in (
        " ".join(bare.output.split())
    )
    assert "pyretrieve reembed --model hash-ngram-v1" in " ".join(bare.output.split())


def test_an_admin_gives_a_scope_its_own_vector_index_and_drops_it(scope: Database) -> None:
    assert grant_alice(scope).exit_code == 0
    before = search(scope, "--json")
    assert before.exit_code == 0, before.output
    made = cli(scope, "adam", "models", "index", "hash-ngram-v1", "-w", WS, "-p", PJ)
    assert made.exit_code == 0, made.output
    assert "embeddings_hnsw_s" in made.output
    with scope.admin() as admin:
        row = admin.execute(
            "SELECT count(*) AS n FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw_s%'"
        ).fetchone()
    assert row == {"n": 1}
    during = search(scope, "--json")
    assert during.exit_code == 0, during.output
    ids = [r["fragment"]["fragment_id"] for r in json.loads(before.output)["results"]]
    assert [r["fragment"]["fragment_id"] for r in json.loads(during.output)["results"]] == ids
    # Each result says how its vector leg searched: exactly before, through the index now.
    assert _vector_searches(before.output) == {"exact"}
    assert _vector_searches(during.output) == {"hnsw"}
    assert "HIDDEN-SENTINEL" not in during.output
    # Only an admin, and only for a scope that exists.
    denied = cli(scope, "alice", "models", "index", "hash-ngram-v1", "-w", WS, "-p", PJ, "--drop")
    assert denied.exit_code == 2
    assert denied.output.startswith("error [VES_MEMORY_ACCESS_DENIED]")
    absent = cli(scope, "adam", "models", "index", "hash-ngram-v1", "-w", WS, "-p", "nowhere")
    assert absent.exit_code == 2
    assert absent.output.startswith("error [VES_MEMORY_NOT_FOUND]")
    dropped = cli(scope, "adam", "models", "index", "hash-ngram-v1", "-w", WS, "-p", PJ, "--drop")
    assert dropped.exit_code == 0, dropped.output
    assert "dropped" in dropped.output
    again = cli(scope, "adam", "models", "index", "hash-ngram-v1", "-w", WS, "-p", PJ, "--drop")
    assert "had none" in again.output


def _vector_searches(output: str) -> set[str]:
    return {
        r["modalities"]["vector"]["search"]
        for r in json.loads(output)["results"]
        if r["modalities"]["vector"] is not None
    }


def test_maintain_indexes_puts_each_scopes_index_where_its_size_says(scope: Database) -> None:
    assert grant_alice(scope).exit_code == 0

    def maintain(nick: str, *args: str) -> Any:
        return cli(scope, nick, "models", "maintain-indexes", *args)

    planned = maintain("adam", "--min-rows", "2", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert _row_of(planned.output) == (WS, "create", "False")
    assert _vector_searches(search(scope, "--json").output) == {"exact"}
    made = maintain("adam", "--min-rows", "2")
    assert made.exit_code == 0, made.output
    assert _row_of(made.output) == (WS, "create", "True")
    assert _vector_searches(search(scope, "--json").output) == {"hnsw"}
    dropped = maintain("adam", "--min-rows", "1000000")
    assert _row_of(dropped.output) == (WS, "drop", "True")
    assert _vector_searches(search(scope, "--json").output) == {"exact"}
    denied = maintain("alice")
    assert denied.exit_code == 2
    assert denied.output.startswith("error [VES_MEMORY_ACCESS_DENIED]")
    too_low = maintain("adam", "--min-rows", "1")
    assert too_low.exit_code == 2
    assert "--min-rows" in too_low.output


def _row_of(output: str) -> tuple[str, str, str]:
    """The workspace, action and applied cells of the one scope row of the table."""
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in output.splitlines()
        if line.startswith("│") and PJ in line
    ]
    assert len(rows) == 1, output
    return rows[0][0], rows[0][4], rows[0][5]
