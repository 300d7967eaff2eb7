"""The ``pyretrieve`` command line: one module per group of commands, registered here."""

from __future__ import annotations

import sys

import click

from pyretrieve import embedded
from pyretrieve.db import migrate
from pyretrieve.db.connect import resolve_dsn

DSN_OPTION = click.option(
    "--dsn",
    envvar="PYRETRIEVE_DSN",
    default=None,
    help="libpq connection string or URL (env PYRETRIEVE_DSN); default: the embedded server.",
)


@click.group()
@click.version_option(package_name="pyretrieve")
def main() -> None:
    """Policy-filtered hybrid retrieval inside Postgres."""


@main.group()
def db() -> None:
    """Run the embedded PostgreSQL 18 + pgvector server ($PYRETRIEVE_HOME/pgdata)."""


@db.command("start")
def db_start() -> None:
    """Start the embedded server (reusing a running one) and print its URL."""
    click.echo(embedded.start())


@db.command("stop")
def db_stop() -> None:
    """Stop the embedded server."""
    stopped = embedded.stop()
    click.echo("stopped" if stopped else "not running")


@db.command("status")
def db_status() -> None:
    """Say whether the embedded server runs, where, and which version."""
    st = embedded.status()
    if not st.running:
        click.echo(f"not running (data directory {st.pgdata})")
        sys.exit(3)
    click.echo(f"running: PostgreSQL {st.version} at {st.url} (data directory {st.pgdata})")


@db.command("url")
def db_url() -> None:
    """Print the URL of the running embedded server."""
    url = embedded.url()
    if url is None:
        click.echo("not running", err=True)
        sys.exit(3)
    click.echo(url)


@main.command()
@DSN_OPTION
def install(dsn: str | None) -> None:
    """Install or upgrade the pyretrieve schema (Alembic to head). Idempotent."""
    target = resolve_dsn(dsn, installer=True)
    before = migrate.current(target)
    migrate.upgrade(target)
    after = migrate.current(target)
    if before == after:
        click.echo(f"pyretrieve schema already at {after}")
    else:
        click.echo(f"pyretrieve schema installed: {before or 'none'} -> {after}")


def _register() -> None:
    # Each module adds its commands to ``main``; importing them here keeps the entry point
    # in one place while the commands live beside the code they drive.
    import importlib

    for name in _COMMAND_MODULES:
        importlib.import_module(f"pyretrieve.cli.{name}")


_COMMAND_MODULES: tuple[str, ...] = ("search", "admin", "demo", "ingest", "audit", "tools")
_register()
