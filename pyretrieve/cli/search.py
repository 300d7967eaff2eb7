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
from pyretrieve.embedders.registry import DEFAULT_MODEL, MODEL_HELP, get_embedder
from pyretrieve.types import (
    DegradationReason,
    Fusion,
    JsonValue,
    Scope,
    SearchResult,
    SemanticStatus,
    canonical_json,
)

PURPOSE_HELP = (
    "Why you search, e.g. support or research: the request is answered under your grant for"
    " exactly this purpose (its ceiling, freshness window and semantic policy) and denied"
    " without one. An admin grants it: pyretrieve grant NAME --purpose X ..."
)


def _snippet(text: str, width: int = 90) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def semantic_note(sem: SemanticStatus) -> str:
    """Why the vector leg did not take part, in words (empty when it did or was not asked)."""
    evidence = dict(sem.evidence)
    model = evidence.get("model")
    if sem.reason is DegradationReason.MISSING_EMBEDDING:
        if evidence.get("embedder_registered") is False:
            named = f"for model {model}" if model else "(no model named)"
            return (
                "the vector leg did not run: no query embedding was given and no embedder is"
                f" registered {named}"
            )
        return "the vector leg did not run: no query embedding (or no model) was given"
    if sem.reason is DegradationReason.DISABLED:
        return "the vector leg did not run: the grant's semantic policy disables it"
    if sem.reason is DegradationReason.STALE:
        return f"the vector leg was dropped: embeddings for {model} are stale (pyretrieve reembed)"
    if sem.reason is DegradationReason.UNAVAILABLE:
        return f"the vector leg was unavailable for model {model} ({evidence.get('cause')})"
    if sem.reason is DegradationReason.CORRUPT:
        return f"the vector leg was dropped: an embedding for {model} is invalid"
    if sem.reason is DegradationReason.ADAPTER_FAILURE:
        return f"the vector leg did not run: the embedder for {model} failed on the query"
    return ""


def empty_vector_note(result: SearchResult) -> str:
    """The vector leg ran yet no result came from it: no fragment the caller may see has an
    embedding for the model (ingested with --no-embed, or with another model). That is known
    when nothing eligible was cut by the limit, or, under RRF with equal weights, because any
    vector candidate then ranks among the first two; otherwise (a model's default weights
    may make the vector leg a tie-breaker) nothing is said."""
    if not result.vector_ran or not result.results:
        return ""
    equal_rrf = (
        result.fusion.method is Fusion.RRF and result.weights.vector == result.weights.lexical
    )
    if result.omissions and not equal_rrf:
        return ""
    if any(r.vector is not None for r in result.results):
        return ""
    model = dict(result.semantic.evidence).get("model")
    return (
        f"the vector leg ran but found nothing: no fragment you may see here has an embedding"
        f" for model {model} (embed them with `pyretrieve reembed --model {model}` as a writer)"
    )


def bounded_json(result: SearchResult, *, omissions: bool) -> str:
    """The canonical JSON; the omissions (up to the candidate limit) only as a count unless
    asked for, so ``--limit N`` bounds the output."""
    plain: dict[str, JsonValue] = result.to_plain()
    plain["omission_count"] = len(result.omissions)
    if not omissions:
        del plain["omissions"]
    return canonical_json(plain)


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
    note = semantic_note(sem) or empty_vector_note(result)
    if note:
        console.print(Text(f"  {note}"))
    if explain and result.results:
        console.print(Text("explanation of the top result:", style="bold"))
        console.print_json(json.dumps(dict(result.results[0].explanation), sort_keys=True))


@main.command()
@click.argument("query")
@click.option("--workspace", required=True)
@click.option("--project", required=True)
@click.option("--purpose", required=True, help=PURPOSE_HELP)
@click.option("--mode", type=click.Choice(["hybrid", "lexical", "vector"]), default="hybrid")
@click.option(
    "--semantic", type=click.Choice(["optional", "required", "disabled"]), default="optional"
)
@click.option("--limit", type=int, default=10, show_default=True, help="Results to return.")
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help=MODEL_HELP + " Embeds the query: the one the fragments were ingested with.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the canonical JSON only: the results, and how many were cut by --limit.",
)
@click.option(
    "--omissions", is_flag=True, help="With --json, also list every fragment cut by --limit."
)
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
    omissions: bool,
    explain: bool,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Search a workspace/project for a purpose, as a principal (--as ROLE)."""
    embedders: list[Any] = []
    if mode != "lexical" and semantic != "disabled":
        # Like ingest: a model without a local embedder is an error, not a quiet lexical run.
        embedders.append(get_embedder(model))
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
        click.echo(bounded_json(result, omissions=omissions))
        return
    render(result, Console(), explain=explain)
