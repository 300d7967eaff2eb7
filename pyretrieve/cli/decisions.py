"""``pyretrieve decisions``: the audit log of read decisions, its retention, and who searched
what scope when (admins)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import click
import psycopg

from pyretrieve.cli import main
from pyretrieve.cli.admin import _table
from pyretrieve.cli.common import as_option, connect, dsn_option, handle_errors, transaction
from pyretrieve.db import queries


@main.group()
def decisions() -> None:
    """The decisions log (one row per search, partitioned by month): list, retention."""


@decisions.command("list")
@click.option("--since", required=True, help="Timestamp or date, e.g. 2026-11-01 or '-7 days'.")
@click.option("--until", default=None, help="End of the range (exclusive); default: now.")
@click.option("--workspace", default=None)
@click.option("--project", default=None, help="With --workspace.")
@click.option("--principal", "who", default=None, help="Only this principal's searches.")
@click.option("--limit", default=100, show_default=True, type=int)
@as_option
@dsn_option
@handle_errors
def decisions_list(
    since: str,
    until: str | None,
    workspace: str | None,
    project: str | None,
    who: str | None,
    limit: int,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Who searched what scope when, newest first: digests and intent, never query text.
    Admins only (--as ADMIN)."""
    with connect(dsn) as conn, transaction(conn, principal):
        since_at = _timestamp(conn, since)
        until_at = None if until is None else _timestamp(conn, until)
        rows = conn.execute(
            queries.DECISIONS_LIST, (since_at, until_at, workspace, project, who, limit)
        ).fetchall()
    _table(
        [
            "evaluated_at",
            "principal",
            "workspace_id",
            "project_id",
            "purpose",
            "ceiling",
            "semantic_intent",
            "requested_limit",
            "decision_id",
        ],
        list(rows),
    )


def _timestamp(conn: psycopg.Connection[dict[str, Any]], text: str) -> datetime:
    """An absolute timestamp, or one relative to now ('-7 days'), read by the server."""
    relative = text.lstrip().startswith(("-", "+"))
    row = conn.execute(
        queries.DECISIONS_RELATIVE if relative else queries.DECISIONS_TIMESTAMP, (text,)
    ).fetchone()
    assert row is not None
    return cast(datetime, row["t"])


@decisions.command("partitions")
@as_option
@dsn_option
@handle_errors
def decisions_partitions(principal: str | None, dsn: str | None) -> None:
    """The monthly partitions of the log, their ranges (UTC) and how many decisions each holds.
    Admins only (--as ADMIN)."""
    with connect(dsn) as conn, transaction(conn, principal):
        rows = conn.execute(queries.DECISIONS_PARTITIONS).fetchall()
    _table(["partition_name", "range_start", "range_end", "decisions"], list(rows))


@decisions.command("prune")
@click.option(
    "--older-than",
    required=True,
    help="Retention, e.g. 90d, '6 months', 1y: every whole month older than this is dropped.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be dropped.")
@as_option
@dsn_option
@handle_errors
def decisions_prune(older_than: str, dry_run: bool, principal: str | None, dsn: str | None) -> None:
    """Drop the log's monthly partitions older than the retention, then create the months
    ahead. Decisions are never deleted one by one. Admins only (--as ADMIN)."""
    with connect(dsn) as conn, transaction(conn, principal):
        rows = conn.execute(queries.DECISIONS_PRUNE, (older_than, dry_run)).fetchall()
    verb = "would drop" if dry_run else "dropped"
    for row in rows:
        click.echo(
            f"{verb} {row['partition_name']} ({row['range_start']:%Y-%m-%d} to"
            f" {row['range_end']:%Y-%m-%d}, {row['decisions']} decisions)"
        )
    total = sum(int(r["decisions"]) for r in rows)
    click.echo(f"{verb} {len(rows)} partition(s), {total} decision(s)")


@decisions.command("ensure")
@click.option("--months-ahead", default=2, show_default=True, type=int)
@as_option
@dsn_option
@handle_errors
def decisions_ensure(months_ahead: int, principal: str | None, dsn: str | None) -> None:
    """Create the log's partitions from this month to --months-ahead months ahead (a
    maintenance job; the first search of a month without one creates it too). Admins only."""
    with connect(dsn) as conn, transaction(conn, principal):
        created = [r["name"] for r in conn.execute(queries.DECISIONS_ENSURE, (months_ahead,))]
    click.echo("created " + ", ".join(created) if created else "every partition already exists")
