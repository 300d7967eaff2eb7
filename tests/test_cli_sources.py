"""Old source names, ``pyretrieve sources`` and ``retract --source-prefix``.

Before source names existed, a folder's fragments were named ``<relative path>#<n>``; a
folder ingested then and again now is in the index twice. A run names those old copies, and
``--retract-legacy`` retracts them. ``sources`` lists what a writer may see in a scope, and
``retract --source-prefix`` takes a whole source. Every listing and retraction is bounded by
the writer's grant: the attacks are a second writer with a lower ceiling and a writer in
another project, asking for the names and the retraction of what it may not see.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from pyretrieve.cli import main
from pyretrieve.ingest import Ingestor
from tests.conftest import Database, acting_as, role, with_test_model

WS, PJ, OTHER = "acme", "docs", "other"


@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any]) -> Database:
    """wally writes acme/docs up to internal; walt only up to public there, and up to
    internal in acme/other."""
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        for project in (PJ, OTHER):
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, project))
        for nick, project, ceiling in (
            ("wally", PJ, "internal"),
            ("walt", PJ, "public"),
            ("walt", OTHER, "internal"),
        ):
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', %s)",
                (role(nick), WS, project, ceiling),
            )
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")
    return db


def run(db: Database, nick: str, *args: str) -> Result:
    return CliRunner().invoke(
        main,
        [*with_test_model(args), "--dsn", db.app_dsn, "--as", role(nick)],
        catch_exceptions=False,
    )


def put(
    conn: psycopg.Connection[Any],
    uri: str,
    body: str,
    classification: str = "internal",
    project: str = PJ,
    nick: str = "wally",
) -> None:
    """A fragment as a writer wrote it, by the SQL API: how the old scheme's names got in."""
    with acting_as(conn, nick):
        conn.execute(
            "SELECT pyretrieve.put_fragment(p_workspace => %s, p_project => %s, p_body => %s,"
            " p_classification => %s::pyretrieve.classification, p_source_uri => %s)",
            (WS, project, body, classification, uri),
        )


def active(db: Database, project: str = PJ) -> set[str]:
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT source_uri FROM pyretrieve.fragments WHERE state = 'active'"
            " AND project_id = %s",
            (project,),
        ).fetchall()
    return {str(r["source_uri"]) for r in rows}


def folder(tmp_path: Path) -> Path:
    root = tmp_path / "teamA"
    (root / "sub").mkdir(parents=True)
    (root / "README.md").write_text("# Team A\n\nThe handbook of team A.\n", encoding="utf-8")
    (root / "sub" / "guide.md").write_text("How team A deploys.\n", encoding="utf-8")
    return root


def test_a_folder_run_names_its_old_copies_and_retracts_them_on_request(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    root = folder(tmp_path)
    # The old scheme: the same files without a source in front, one with two fragments.
    put(conn, "README.md#1", "# Team A")
    put(conn, "README.md#2", "The old handbook of team A.")
    put(conn, "sub/guide.md#1", "How team A deployed.")
    # Not this folder's: a file it no longer holds, a JSON Lines record, a fragment whose
    # position is no number.
    put(conn, "gone.md#1", "A file deleted long ago.")
    put(conn, "c.jsonl#1", "a record")
    put(conn, "sub/guide.md#intro", "named by hand")

    first = run(scope, "wally", "ingest", str(root), "-w", WS, "-p", PJ)
    assert first.exit_code == 0, first.output
    assert "note: 2 files of this folder are also in the index under the name" in first.stderr
    assert "(README.md, sub/guide.md)" in first.stderr
    assert "--retract-legacy" in first.stderr
    assert "retracted 0" in first.stdout
    assert {"README.md#1", "README.md#2", "sub/guide.md#1"} <= active(scope)

    second = run(scope, "wally", "ingest", str(root), "-w", WS, "-p", PJ, "--retract-legacy")
    assert second.exit_code == 0, second.output
    assert "removed: README.md (its name from before source names)" in second.stdout
    assert "removed: sub/guide.md (its name from before source names)" in second.stdout
    assert "unchanged 2" in second.stdout
    assert "retracted 3" in second.stdout
    assert active(scope) == {
        "teamA/README.md#1",
        "teamA/sub/guide.md#1",
        "gone.md#1",
        "c.jsonl#1",
        "sub/guide.md#intro",
    }
    third = run(scope, "wally", "ingest", str(root), "-w", WS, "-p", PJ, "--retract-legacy")
    assert "retracted 0" in third.stdout
    assert "note:" not in third.stderr


def test_what_this_run_writes_is_never_an_old_copy(scope: Database, tmp_path: Path) -> None:
    """In a folder named docs, the new name of x.md (docs/x.md#1) is the old name of the
    nested docs/x.md: written by this very run, it is kept."""
    root = tmp_path / "docs"
    (root / "docs").mkdir(parents=True)
    (root / "x.md").write_text("top level\n", encoding="utf-8")
    (root / "docs" / "x.md").write_text("nested\n", encoding="utf-8")
    done = run(scope, "wally", "ingest", str(root), "-w", WS, "-p", PJ, "--retract-legacy")
    assert done.exit_code == 0, done.output
    assert "removed:" not in done.stdout
    assert "retracted 0" in done.stdout
    assert active(scope) == {"docs/x.md#1", "docs/docs/x.md#1"}


def test_sources_lists_documents_and_retract_takes_a_prefix(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    root = folder(tmp_path)
    assert run(scope, "wally", "ingest", str(root), "-w", WS, "-p", PJ).exit_code == 0
    put(conn, "README.md#1", "# Team A")
    put(conn, "README.md#2", "old")
    put(conn, "c.jsonl#a", "a record")
    put(conn, "c.jsonl#b", "another record")

    listed = run(scope, "wally", "sources", "-w", WS, "-p", PJ)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == [
        "README.md\t2",
        "c.jsonl\t2",
        "teamA/README.md\t1",
        "teamA/sub/guide.md\t1",
    ]
    assert listed.stderr.strip() == "4 documents, 6 active fragments in acme/docs"
    under = run(scope, "wally", "sources", "-w", WS, "-p", PJ, "--prefix", "teamA/")
    assert under.stdout.splitlines() == ["teamA/README.md\t1", "teamA/sub/guide.md\t1"]
    # LIKE's wildcards in a prefix are plain characters.
    assert run(scope, "wally", "sources", "-w", WS, "-p", PJ, "--prefix", "%").stdout == ""

    # All or nothing: one prefix with nothing under it retracts nothing.
    missing = run(scope, "wally", "retract", "-w", WS, "-p", PJ,
                  "--source-prefix", "teamA/", "--source-prefix", "teamZ/")  # fmt: skip
    assert missing.exit_code != 0
    assert missing.stderr.startswith("error [VES_MEMORY_NOT_FOUND]: no active fragment under 1")
    assert len(active(scope)) == 6
    gone = run(scope, "wally", "retract", "-w", WS, "-p", PJ,
               "--source-prefix", "teamA/", "--source-uri", "c.jsonl")  # fmt: skip
    assert gone.exit_code == 0, gone.output
    assert gone.stdout.splitlines() == [
        "retracted c.jsonl: 2 fragments",
        "retracted teamA/: 2 fragments",
    ]
    assert active(scope) == {"README.md#1", "README.md#2"}
    nothing = run(scope, "wally", "retract", "-w", WS, "-p", PJ)
    assert nothing.exit_code == 2
    assert "--source-uri URI or --source-prefix PREFIX" in nothing.output


def test_a_writer_learns_and_retracts_nothing_outside_its_grant(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """walt writes acme/docs only up to public. wally's internal documents there, and all of
    acme/other's for a writer without a grant there, stay unnamed and unretractable: listing
    shows them not, by name or by count; retracting one by its exact name, by prefix or as
    an old copy of a folder answers as for a name that never existed; another scope is
    denied as one that does not exist."""
    put(conn, "secret/plan.md#1", "the internal plan")
    put(conn, "plan.md#1", "the internal plan, old name")
    put(conn, "open/notice.md#1", "a public notice", classification="public")
    before = active(scope)

    listed = run(scope, "walt", "sources", "-w", WS, "-p", PJ)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == ["open/notice.md\t1"]
    assert listed.stderr.strip() == "1 documents, 1 active fragments in acme/docs"
    assert run(scope, "walt", "sources", "-w", WS, "-p", PJ, "--prefix", "secret/").stdout == ""

    def not_found(*args: str) -> str:
        result = run(scope, "walt", "retract", "-w", WS, "-p", PJ, *args)
        assert result.exit_code != 0
        return result.stderr

    # The message quotes only what was asked: a hidden name and an absent one read alike.
    assert not_found("--source-uri", "secret/plan.md") == not_found(
        "--source-uri", "secret/plam.md"
    ).replace("plam", "plan")
    assert not_found("--source-uri", "secret/plan.md#1").startswith("error [VES_MEMORY_NOT_FOUND]:")
    assert not_found("--source-prefix", "secret/") == not_found(
        "--source-prefix", "secreu/"
    ).replace("secreu", "secret")

    # An old copy above the ceiling is neither named nor retracted by a folder run.
    root = tmp_path / "walts"
    root.mkdir()
    (root / "plan.md").write_text("a public plan\n", encoding="utf-8")
    run_ = run(scope, "walt", "ingest", str(root), "-w", WS, "-p", PJ,
               "--classification", "public", "--retract-legacy")  # fmt: skip
    assert run_.exit_code == 0, run_.output
    assert "retracted 0" in run_.stdout
    assert "removed:" not in run_.stdout
    assert "note:" not in run_.stderr
    assert before <= active(scope)

    # The widest prefix takes only what walt may see; the hidden ones neither fail it nor count.
    wide = run(scope, "walt", "retract", "-w", WS, "-p", PJ, "--source-prefix", "open/",
               "--source-prefix", "s")  # fmt: skip
    assert wide.exit_code != 0
    assert "first: 's'" in wide.stderr
    opened = run(scope, "walt", "retract", "-w", WS, "-p", PJ, "--source-prefix", "o")
    assert opened.stdout.splitlines() == ["retracted o: 1 fragment"]
    assert active(scope) == (before - {"open/notice.md#1"}) | {"walts/plan.md#1"}

    # Another scope: walt writes acme/other; wally holds no grant there.
    put(conn, "x.md#1", "other's text", project=OTHER, nick="walt")
    denied = run(scope, "wally", "sources", "-w", WS, "-p", OTHER)
    absent = run(scope, "wally", "sources", "-w", WS, "-p", "nope")
    assert denied.exit_code == absent.exit_code == 2
    assert denied.stderr == absent.stderr == "error [VES_MEMORY_ACCESS_DENIED]: access denied\n"
    for args in (["--source-uri", "x.md"], ["--source-prefix", "x"]):
        refused = run(scope, "wally", "retract", "-w", WS, "-p", OTHER, *args)
        assert refused.stderr == "error [VES_MEMORY_ACCESS_DENIED]: access denied\n"

    # A reader may list nothing at all.
    reader = run(scope, "alice", "sources", "-w", WS, "-p", PJ)
    assert reader.exit_code == 2
    assert reader.stderr.startswith("error [VES_MEMORY_ACCESS_DENIED]")


def test_the_library_lists_under_the_same_bound(
    scope: Database, conn: psycopg.Connection[Any]
) -> None:
    put(conn, "secret/plan.md#1", "the internal plan")
    put(conn, "open/notice.md#1", "a public notice", classification="public")
    put(conn, "open/notice.md#2", "more of it", classification="public")
    with scope.connect(autocommit=True) as app:
        walt = Ingestor(app, principal=role("walt")).sources(workspace=WS, project=PJ)
        wally = Ingestor(app, principal=role("wally")).sources(workspace=WS, project=PJ)
    assert walt.documents == {"open/notice.md": 2}
    assert walt.fragments == 2
    assert wally.documents == {"open/notice.md": 2, "secret/plan.md": 1}
