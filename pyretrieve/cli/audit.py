"""``pyretrieve audit``: who can see what, and is the policy layer intact."""

from __future__ import annotations

import sys
from typing import cast

import click
from rich.console import Console

from pyretrieve.audit import (
    Severity,
    read_report,
    render_html,
    render_json,
    render_markdown,
    render_text,
)
from pyretrieve.cli import main
from pyretrieve.cli.common import as_option, connect, dsn_option, handle_errors


@main.command()
@dsn_option
@as_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json", "html"]),
    default="text",
    show_default=True,
    help="text: tables for a terminal; markdown: a document; json: canonical, stable order;"
    " html: one self-contained page (access matrix coloured by ceiling, findings, fixes).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding of this severity or a worse one exists.",
)
@handle_errors
def audit(dsn: str | None, principal: str | None, fmt: str, fail_on: str) -> None:
    """Audit the policy layer: RLS, policies, privileges, functions, roles, access, findings.

    Reads the pyretrieve.audit_* views (run it as a superuser or a member of
    pyretrieve_admin). Exit status: 0 clean, 1 a finding at or above --fail-on, 2 an error.
    """
    with connect(dsn, installer=True) as conn:
        report = read_report(conn, principal)
    if fmt == "json":
        click.echo(render_json(report))
    elif fmt == "markdown":
        click.echo(render_markdown(report), nl=False)
    elif fmt == "html":
        click.echo(render_html(report), nl=False)
    else:
        render_text(report, Console())
    if report.failing(cast(Severity, fail_on)):
        sys.exit(1)
