"""``pyretrieve ingest`` and ``pyretrieve reembed``: bulk writes into one scope as a writer."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pyretrieve.cli import main
from pyretrieve.cli.common import (
    as_option,
    connect,
    dsn_option,
    handle_errors,
    require_principal,
)
from pyretrieve.embedders.registry import DEFAULT_MODEL, get_embedder
from pyretrieve.ingest import CLASSIFICATIONS, DEFAULT_BATCH_SIZE, Ingestor, MalformedInput
from pyretrieve.ingest import ingest as ingest_path

# How many skipped records a run lists before it only counts them.
SHOWN_ERRORS = 20


@contextmanager
def _progress(description: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise (logs, pipes)."""
    if not sys.stderr.isatty():
        yield None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(description, total=None)

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 and count else "-"


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=True, file_okay=True))
@click.option("--workspace", "-w", required=True, help="Workspace to write into.")
@click.option("--project", "-p", required=True, help="Project to write into.")
@click.option(
    "--classification",
    type=click.Choice(CLASSIFICATIONS),
    default="internal",
    show_default=True,
    help="Classification of records that do not name their own.",
)
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Embedding model for new and changed fragments (registered in the database).",
)
@click.option("--no-embed", is_flag=True, help="Write fragments only; embed later with reembed.")
@click.option(
    "--strict", is_flag=True, help="Validate everything first; any malformed record writes nothing."
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Records per transaction.",
)
@as_option
@dsn_option
@handle_errors
def ingest(
    path: str,
    workspace: str,
    project: str,
    classification: str,
    model: str,
    no_embed: bool,
    strict: bool,
    batch_size: int,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Ingest PATH: a .jsonl file, a BEIR folder (corpus.jsonl[.gz]) or a folder of .txt/.md.

    Unchanged records are left alone, changed ones supersede their previous version, and
    malformed ones are listed (file:line) and skipped, or with --strict fail the run.
    """
    embedder = None if no_embed else get_embedder(model)
    with connect(dsn) as conn, _progress("ingesting") as progress:
        require_principal(conn, principal)
        try:
            report = ingest_path(
                conn,
                path,
                workspace=workspace,
                project=project,
                principal=principal,
                embedder=embedder,
                classification=classification,
                strict=strict,
                batch_size=batch_size,
                progress=progress,
            )
        except MalformedInput as exc:
            for issue in exc.issues[:SHOWN_ERRORS]:
                click.echo(f"malformed: {issue}", err=True)
            if len(exc.issues) > SHOWN_ERRORS:
                click.echo(f"... and {len(exc.issues) - SHOWN_ERRORS} more", err=True)
            raise
    for issue in report.errors[:SHOWN_ERRORS]:
        click.echo(f"skipped: {issue}", err=True)
    if len(report.errors) > SHOWN_ERRORS:
        click.echo(f"... and {len(report.errors) - SHOWN_ERRORS} more skipped", err=True)
    embedded = f"{report.embedded} ({report.model})" if report.model else "0 (no model)"
    click.echo(
        f"ingested {report.path} into {workspace}/{project}: read {report.read},"
        f" inserted {report.inserted}, unchanged {report.unchanged},"
        f" superseded {report.superseded}, retracted {report.retracted},"
        f" skipped {report.skipped}, embedded {embedded}"
    )
    click.echo(
        f"{report.batches} batches in {report.seconds:.1f}s ({_rate(report.read, report.seconds)})"
    )


@main.command()
@click.option("--workspace", "-w", required=True, help="Workspace of the fragments.")
@click.option("--project", "-p", required=True, help="Project of the fragments.")
@click.option("--model", required=True, help="Embedding model to (re)compute.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Fragments per transaction.",
)
@as_option
@dsn_option
@handle_errors
def reembed(
    workspace: str,
    project: str,
    model: str,
    batch_size: int,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Compute the scope's missing or stale embeddings for MODEL."""
    embedder = get_embedder(model)
    with connect(dsn) as conn, _progress("embedding") as progress:
        require_principal(conn, principal)
        report = Ingestor(conn, principal=principal, batch_size=batch_size).reembed(
            workspace=workspace,
            project=project,
            model_or_embedder=embedder,
            progress=progress,
        )
    click.echo(
        f"reembedded {workspace}/{project} for {report.model}: embedded {report.embedded}"
        f" (missing {report.missing}, stale {report.stale}) in {report.batches} batches,"
        f" {report.seconds:.1f}s ({_rate(report.embedded, report.seconds)})"
    )
