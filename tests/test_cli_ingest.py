"""``pyretrieve ingest`` and ``pyretrieve reembed`` against a real server.

The admin setup (workspace, project, grants, model) is SQL as adam; the commands connect as
the authenticator (``--dsn``) and act as wally (``--as``). Most run in-process through click's
runner; one runs the installed console script to see exactly what a user sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from pyretrieve.cli import main
from tests.conftest import Database, acting_as, role, with_test_model

WS, PJ = "acme", "docs"
SECRET = "CONFIDENTIALPHRASE"


@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any]) -> Database:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'internal')",
            (role("wally"), WS, PJ),
        )
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")
    return db


def run(db: Database, *args: str) -> Result:
    return CliRunner().invoke(
        main,
        [*with_test_model(args), "--dsn", db.app_dsn, "--as", role("wally")],
        catch_exceptions=False,
    )


def counts(db: Database) -> tuple[int, int]:
    with db.admin() as admin:
        row = admin.execute(
            "SELECT (SELECT count(*) FROM pyretrieve.fragments) AS f,"
            " (SELECT count(*) FROM pyretrieve.embeddings) AS e"
        ).fetchone()
    assert row is not None
    return int(row["f"]), int(row["e"])


def corpus(path: Path, n: int = 5) -> Path:
    path.write_text(
        "".join(json.dumps({"id": i, "text": f"ledger line {i}"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


def test_ingest_writes_embeds_and_summarises(scope: Database, tmp_path: Path) -> None:
    path = corpus(tmp_path / "c.jsonl")
    result = run(scope, "ingest", str(path), "-w", WS, "-p", PJ, "--batch-size", "2")
    assert result.exit_code == 0, result.output
    assert "read 5, inserted 5, unchanged 0, superseded 0" in result.stdout
    assert "embedded 5 (hash-ngram-v1)" in result.stdout
    assert "3 batches" in result.stdout
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    assert counts(scope) == (5, 5)

    again = run(scope, "ingest", str(path), "-w", WS, "-p", PJ)
    assert again.exit_code == 0, again.output
    assert "read 5, inserted 0, unchanged 5" in again.stdout
    assert counts(scope) == (5, 5)


def test_no_embed_then_reembed(scope: Database, tmp_path: Path) -> None:
    path = corpus(tmp_path / "c.jsonl", 4)
    result = run(scope, "ingest", str(path), "-w", WS, "-p", PJ, "--no-embed")
    assert result.exit_code == 0, result.output
    assert "embedded 0 (no model)" in result.stdout
    assert counts(scope) == (4, 0)

    result = run(scope, "reembed", "-w", WS, "-p", PJ, "--model", "hash-ngram-v1")
    assert result.exit_code == 0, result.output
    assert "embedded 4 (missing 4, stale 0)" in result.stdout
    assert counts(scope) == (4, 4)


def test_malformed_lines_are_listed_and_strict_writes_nothing(
    scope: Database, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"id": "a", "text": "fine"})
        + "\n{not json "
        + SECRET
        + "\n"
        + json.dumps({"id": "b", "text": SECRET, "classification": "secret"})
        + "\n",
        encoding="utf-8",
    )
    strict = run(scope, "ingest", str(path), "-w", WS, "-p", PJ, "--strict")
    assert strict.exit_code != 0
    assert "malformed: bad.jsonl:2: invalid JSON" in strict.stderr
    assert "malformed: bad.jsonl:3: classification must be one of" in strict.stderr
    assert (
        strict.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "error [VES_MEMORY_INVALID_INPUT]: malformed input, nothing written: bad.jsonl:2:"
        )
    )
    assert SECRET not in strict.output
    assert counts(scope) == (0, 0)

    lenient = run(scope, "ingest", str(path), "-w", WS, "-p", PJ)
    assert lenient.exit_code == 0, lenient.output
    assert "skipped: bad.jsonl:2: invalid JSON" in lenient.stderr
    assert "read 3, inserted 1, unchanged 0, superseded 0, retracted 0, skipped 2" in lenient.stdout
    assert SECRET not in lenient.output
    assert counts(scope) == (1, 1)


def test_markdown_folder(scope: Database, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# One\n\nfirst\n\n# Two\n\nsecond\n", encoding="utf-8")
    result = run(scope, "ingest", str(root), "-w", WS, "-p", PJ, "--classification", "public")
    assert result.exit_code == 0, result.output
    with scope.admin() as admin:
        rows = admin.execute(
            "SELECT source_uri, classification::text AS c FROM pyretrieve.fragments"
            " ORDER BY source_uri"
        ).fetchall()
    assert [(r["source_uri"], r["c"]) for r in rows] == [
        ("notes/a.md#1", "public"),
        ("notes/a.md#2", "public"),
    ]


def active(db: Database) -> dict[str, str]:
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT source_uri, body FROM pyretrieve.fragments WHERE state = 'active'"
        ).fetchall()
    return {r["source_uri"]: r["body"] for r in rows}


def test_two_folders_keep_their_documents_apart(scope: Database, tmp_path: Path) -> None:
    """A fragment's identity is <source>/<relative path>#<position>: team B's README.md does
    not supersede team A's, --sync retracts deleted files, retract removes a document."""
    for team in ("teamA", "teamB"):
        (tmp_path / team).mkdir()
        (tmp_path / team / "README.md").write_text(
            f"# {team}\n\nThe {team} handbook.\n", encoding="utf-8"
        )
    (tmp_path / "teamA" / "old.txt").write_text("An obsolete runbook.\n", encoding="utf-8")
    (tmp_path / "teamA" / "keep.txt").write_text("A runbook that stays.\n", encoding="utf-8")

    first = run(scope, "ingest", str(tmp_path / "teamA"), "-w", WS, "-p", PJ)
    assert first.exit_code == 0, first.output
    assert "as source teamA" in first.stdout
    second = run(scope, "ingest", str(tmp_path / "teamB"), "-w", WS, "-p", PJ)
    assert second.exit_code == 0, second.output
    assert "inserted 1, unchanged 0, superseded 0" in second.stdout
    assert active(scope) == {
        "teamA/README.md#1": "# teamA\n\nThe teamA handbook.",
        "teamA/keep.txt#1": "A runbook that stays.",
        "teamA/old.txt#1": "An obsolete runbook.",
        "teamB/README.md#1": "# teamB\n\nThe teamB handbook.",
    }

    # --source names the input explicitly; the same folder under another name is another source.
    renamed = run(scope, "ingest", str(tmp_path / "teamB"), "-w", WS, "-p", PJ, "--source", "b/x")
    assert renamed.exit_code != 0
    assert "VES_MEMORY_INVALID_INPUT" in renamed.stderr

    # Without --sync a deleted file stays searchable; with it, it is retracted, and only it.
    (tmp_path / "teamA" / "old.txt").unlink()
    plain = run(scope, "ingest", str(tmp_path / "teamA"), "-w", WS, "-p", PJ)
    assert "retracted 0" in plain.stdout
    assert "teamA/old.txt#1" in active(scope)
    synced = run(scope, "ingest", str(tmp_path / "teamA"), "-w", WS, "-p", PJ, "--sync")
    assert synced.exit_code == 0, synced.output
    assert "removed: teamA/old.txt (no longer in the input)" in synced.stdout
    assert "retracted 1" in synced.stdout
    assert set(active(scope)) == {"teamA/README.md#1", "teamA/keep.txt#1", "teamB/README.md#1"}

    # retract: a document by its name (all its fragments), all or nothing.
    missing = run(
        scope, "retract", "-w", WS, "-p", PJ,
        "--source-uri", "teamB/README.md", "--source-uri", "teamB/nothing.md",
    )  # fmt: skip
    assert missing.exit_code != 0
    assert missing.stderr.startswith("error [VES_MEMORY_NOT_FOUND]: no active fragment under 1")
    assert "teamB/README.md#1" in active(scope)
    gone = run(scope, "retract", "-w", WS, "-p", PJ, "--source-uri", "teamB/README.md")
    assert gone.exit_code == 0, gone.output
    assert gone.stdout.strip() == "retracted teamB/README.md: 1 fragment"
    assert set(active(scope)) == {"teamA/README.md#1", "teamA/keep.txt#1"}


def test_progress_lines_when_stderr_is_not_a_terminal(scope: Database, tmp_path: Path) -> None:
    path = corpus(tmp_path / "c.jsonl", 6)
    result = run(
        scope, "ingest", str(path), "-w", WS, "-p", PJ, "--batch-size", "2",
        "--progress-every", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "ingesting: 2 of 6 records",
        "ingesting: 4 of 6 records",
        "ingesting: 6 of 6 records",
        "ingesting: 6 of 6 records",
    ]


def test_errors_are_one_line_with_a_code(scope: Database, tmp_path: Path) -> None:
    path = corpus(tmp_path / "c.jsonl", 1)
    denied = CliRunner().invoke(
        main,
        [
            *with_test_model(["ingest", str(path), "-w", WS, "-p", PJ]),
            *("--dsn", scope.app_dsn, "--as", role("alice")),
        ],
    )
    assert denied.exit_code != 0
    assert denied.stderr.strip() == "error [VES_MEMORY_ACCESS_DENIED]: access denied"

    unknown = run(scope, "ingest", str(path), "-w", WS, "-p", PJ, "--model", "nope")
    assert unknown.exit_code != 0
    assert unknown.stderr.startswith("error [VES_MEMORY_UNKNOWN_MODEL]: no embedder for model")

    ceiling = run(scope, "ingest", str(path), "-w", WS, "-p", PJ, "--classification", "restricted")
    assert ceiling.exit_code != 0
    assert ceiling.stderr.startswith("error [VES_MEMORY_ACCESS_DENIED]")
    assert counts(scope) == (0, 0)


def test_the_console_script_prints_no_traceback(scope: Database, tmp_path: Path) -> None:
    script = shutil.which("pyretrieve", path=str(Path(sys.executable).parent))
    command = (
        [script] if script else [sys.executable, "-c", "from pyretrieve.cli import main; main()"]
    )
    path = corpus(tmp_path / "c.jsonl", 3)
    env = {**os.environ, "PYRETRIEVE_DSN": scope.app_dsn}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *with_test_model(args)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    ok = cli("ingest", str(path), "-w", WS, "-p", PJ, "--as", role("wally"))
    assert ok.returncode == 0, ok.stderr
    assert "inserted 3" in ok.stdout

    denied = cli(
        "reembed", "-w", WS, "-p", "other", "--model", "hash-ngram-v1", "--as", role("wally")
    )
    assert denied.returncode != 0
    assert denied.stderr.strip() == "error [VES_MEMORY_ACCESS_DENIED]: access denied"
    assert "Traceback" not in denied.stderr
