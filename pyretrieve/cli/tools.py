"""``pyretrieve tools``: register tool definitions and set the adaptive-K rollout stage."""

from __future__ import annotations

import json

import click

from pyretrieve.cli import main
from pyretrieve.cli.common import (
    as_option,
    connect,
    dsn_option,
    handle_errors,
    require_principal,
    transaction,
)
from pyretrieve.embedders.registry import TEST_MODEL, get_embedder
from pyretrieve.ingest import CLASSIFICATIONS
from pyretrieve.tools import read_definitions, register_tools, set_rollout
from pyretrieve.tools.select import STAGES


@main.group()
def tools() -> None:
    """Tools for LLM agents: register definitions, set the rollout stage."""


@tools.command("register")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--workspace", "-w", required=True, help="Workspace to write into.")
@click.option("--project", "-p", required=True, help="Project to write into.")
@click.option(
    "--classification",
    type=click.Choice(CLASSIFICATIONS),
    default="internal",
    show_default=True,
    help="Classification of the tools.",
)
@click.option("--server", default=None, help="Server (e.g. MCP server name) the tools belong to.")
@click.option(
    "--model",
    # Tool selection's confidence levels were calibrated with this model (docs/tools.md).
    default=TEST_MODEL,
    show_default=True,
    help="Embedding model for new and changed tools; 'none' to skip embeddings.",
)
@dsn_option
@as_option
@handle_errors
def tools_register(
    path: str,
    workspace: str,
    project: str,
    classification: str,
    server: str | None,
    model: str,
    dsn: str | None,
    principal: str | None,
) -> None:
    """Register OpenAI-style, flat or MCP tools/list definitions (JSON or JSONL) as a writer.

    Unchanged tools write nothing; a changed schema supersedes the tool and bumps its
    schema_version.
    """
    defs = read_definitions(path, server=server)
    embedders = [] if model == "none" else [get_embedder(model)]
    with connect(dsn) as conn:
        require_principal(conn, principal)
        report = register_tools(
            conn,
            defs,
            workspace=workspace,
            project=project,
            classification=classification,
            principal=principal,
            embedders=embedders,
        )
    click.echo(json.dumps(report.to_plain(), sort_keys=True))


@tools.command("rollout")
@click.argument("workspace")
@click.argument("project")
@click.argument("stage", type=click.Choice(STAGES))
@dsn_option
@as_option
@handle_errors
def tools_rollout(
    workspace: str, project: str, stage: str, dsn: str | None, principal: str | None
) -> None:
    """Set a project's rollout stage of adaptive tool selection (admins)."""
    with connect(dsn) as conn, transaction(conn, principal):
        click.echo(set_rollout(conn, workspace, project, stage))
