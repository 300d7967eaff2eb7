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


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("│").split("│")]


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
        first_text = out.getvalue()
        after_first = counts()
        second = demo.run(db.admin_dsn, console, json=True, embedded=True)
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
    # JSON only behind json=True; the embedded server's life is said only for it.
    assert "untrusted-data" not in first_text
    assert "untrusted-data" in text[len(first_text) :]
    assert "pyretrieve db stop" not in first_text
    assert "pyretrieve db stop" in text[len(first_text) :]
    assert "degraded (disabled; confidence lowered)" in first_text
    assert "VES_MEMORY_ACCESS_DENIED" in first_text

    # One screen: the same query side by side, with a classification column per principal.
    header = next(line for line in first_text.splitlines() if "demo_researcher" in line)
    assert "demo_contractor" in header
    assert header.count("classification") == 2
    rows = [line for line in first_text.splitlines() if line.startswith("│")]
    left = [cells(line)[2] for line in rows]
    right = [cells(line)[4] for line in rows]
    assert set(right) <= {"public", ""}
    assert {"internal", "confidential"} & set(left)
    # What the researcher sees and the contractor cannot is counted (from both answers) and
    # explained by the ceiling, and it matches the table.
    above = sum(1 for c in left if c in ("internal", "confidential"))
    assert first.above_contractor_ceiling == above > 0
    assert f"{above} of demo_researcher's 5 results" in first_text
    assert "above demo_contractor's ceiling (public)" in first_text
    # The contractor's ceiling is public: its table shows no confidential or internal rows,
    # and the demo's own check agrees that the researcher saw more.
    assert first.seconds < 60
