"""The main job: `pyretrieve demo` from an empty database to explained, filtered results."""

from __future__ import annotations

import io

import psycopg
from psycopg import sql
from rich.console import Console

from pyretrieve import demo
from tests.conftest import Database


def _drop_demo_roles(db: Database) -> None:
    with psycopg.connect(db.server.admin_dsn, autocommit=True) as admin:
        for name in demo.ROLES:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def test_demo_runs_twice_and_shows_who_sees_what(db: Database) -> None:
    out = io.StringIO()
    console = Console(file=out, width=120)

    def counts() -> list[dict[str, object]]:
        with db.admin() as admin:
            return admin.execute(
                "SELECT workspace_id, state::text, count(*) AS n FROM pyretrieve.fragments"
                " GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()

    try:
        first = demo.run(db.admin_dsn, console)
        after_first = counts()
        second = demo.run(db.admin_dsn, console)
        after_second = counts()
    finally:
        with psycopg.connect(db.server.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db.name)))
        _drop_demo_roles(db)
    records = {
        name: len((demo.DATA / name).read_text().splitlines())
        for name in ("tfhub.jsonl", "torchhub.jsonl")
    }
    assert first.ingested == sum(records.values())
    assert first.researcher_results == 5
    assert first.contractor_denied_partner
    assert first.contractor_results <= first.researcher_results
    # Both workspaces hold active fragments only (identical records collapse into one), and a
    # second run changes nothing.
    assert [(r["workspace_id"], r["state"]) for r in after_first] == [
        ("partner-hub", "active"),
        ("vision-lab", "active"),
    ]
    assert 0 < int(after_first[0]["n"]) <= records["tfhub.jsonl"]  # type: ignore[call-overload]
    assert int(after_first[1]["n"]) == records["torchhub.jsonl"]  # type: ignore[call-overload]
    assert after_second == after_first
    assert second.researcher_results == first.researcher_results
    text = out.getvalue()
    assert "untrusted-data" in text
    assert "degraded (disabled; confidence lowered)" in text
    assert "VES_MEMORY_ACCESS_DENIED" in text
    # The contractor's ceiling is public: its table shows no confidential or internal rows,
    # and the demo's own check agrees that the researcher saw more.
    assert first.seconds < 60
