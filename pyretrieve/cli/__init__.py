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
@click.option(
    "--debug",
    is_flag=True,
    envvar="PYRETRIEVE_DEBUG",
    help="Show the traceback of an error instead of one line with its code.",
)
def main(debug: bool) -> None:
    """Policy-filtered hybrid retrieval inside Postgres.

    From nothing to searching a folder of your own: see `pyretrieve install --help` and the
    README's quickstart. On the embedded default, install, demo, audit and principals create
    run as the server's superuser; every other command acts as a principal: pass --as ROLE.
    """
    from pyretrieve.cli.common import set_debug

    set_debug(debug)


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
    if st.memory:
        settings = ", ".join(f"{name} {value}" for name, value in st.memory.items())
        basis = st.memory_basis or "not chosen by pyretrieve"
        click.echo(f"memory: {settings} ({basis})")


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
    """Install or upgrade the pyretrieve schema (Alembic to head). Idempotent.

    Next: `pyretrieve principals create ops --admin me --writer`, then as ops
    `pyretrieve workspaces create` and `pyretrieve grant`.
    """
    from pyretrieve.cli.common import handle_errors

    handle_errors(_install)(dsn)


def _install(dsn: str | None) -> None:
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


_COMMAND_MODULES: tuple[str, ...] = (
    "search",
    "admin",
    "demo",
    "ingest",
    "audit",
    "tools",
    "decisions",
)
_register()
