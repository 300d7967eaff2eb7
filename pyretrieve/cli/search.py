"""``pyretrieve search``: policy-filtered hybrid search from the command line."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve.cli import main
from pyretrieve.cli.common import (
    as_option,
    connect,
    dsn_option,
    handle_errors,
    require_principal,
)
from pyretrieve.client import Retriever
from pyretrieve.embedders.registry import DEFAULT_MODEL, get_embedder
from pyretrieve.errors import UnknownModel
from pyretrieve.types import Scope, SearchResult


def _snippet(text: str, width: int = 90) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def render(result: SearchResult, console: Console, *, explain: bool, title: str = "") -> None:
    """A readable table; stored content is shown as plain text (never as markup)."""
    table = Table(title=title or None, show_lines=False, expand=True)
    for name in ("#", "score", "conf", "lex", "vec"):
        table.add_column(name, justify="right", no_wrap=True)
    # One line per result: long sources and texts are cut with an ellipsis, not wrapped.
    table.add_column("source", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("text", no_wrap=True, overflow="ellipsis", ratio=1)
    for r in result.results:
        table.add_row(
            str(r.fused_rank),
            f"{r.final_score:.4f}",
            f"{r.confidence:.2f}",
            "-" if r.lexical is None else str(r.lexical.rank),
            "-" if r.vector is None else str(r.vector.rank),
            Text(r.record.source_uri or ""),
            Text(_snippet(r.record.body)),
        )
    console.print(table)
    sem = result.semantic
    line = f"semantic: {sem.status.value}"
    if sem.reason is not None:
        line += f" ({sem.reason.value}; confidence lowered)"
    line += f"   results: {len(result.results)}   cut by limit: {len(result.omissions)}"
    console.print(Text(line))
    if explain and result.results:
        console.print(Text("explanation of the top result:", style="bold"))
        console.print_json(json.dumps(dict(result.results[0].explanation), sort_keys=True))


@main.command()
@click.argument("query")
@click.option("--workspace", required=True)
@click.option("--project", required=True)
@click.option("--purpose", required=True)
@click.option("--mode", type=click.Choice(["hybrid", "lexical", "vector"]), default="hybrid")
@click.option(
    "--semantic", type=click.Choice(["optional", "required", "disabled"]), default="optional"
)
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Embedder for the query.")
@click.option("--json", "as_json", is_flag=True, help="Print the canonical JSON only.")
@click.option("--explain", is_flag=True, help="Print the explanation of the top result.")
@as_option
@dsn_option
@handle_errors
def search(
    query: str,
    workspace: str,
    project: str,
    purpose: str,
    mode: str,
    semantic: str,
    limit: int,
    model: str,
    as_json: bool,
    explain: bool,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Search a workspace/project for a purpose, as a principal."""
    embedders: list[Any] = []
    try:
        embedders.append(get_embedder(model))
    except UnknownModel:
        # No local embedder for that model: the search degrades (missing_embedding) and says so.
        embedders = []
    with connect(dsn) as conn:
        require_principal(conn, principal)
        retriever = Retriever(conn, principal=principal, embedders=embedders)
        result = retriever.search(
            query,
            scope=Scope(workspace=workspace, project=project, purpose=purpose),
            mode=mode,
            semantic=semantic,
            limit=limit,
            model=model,
        )
    if as_json:
        click.echo(result.to_json())
        return
    render(result, Console(), explain=explain)
