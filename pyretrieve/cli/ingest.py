"""``pyretrieve ingest`` and ``pyretrieve reembed``: bulk writes into one scope as a writer."""

from __future__ import annotations

import sys
import time
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
from pyretrieve.embedders.registry import DEFAULT_MODEL, MODEL_HELP, get_embedder
from pyretrieve.ingest import CLASSIFICATIONS, DEFAULT_BATCH_SIZE, Ingestor, MalformedInput
from pyretrieve.ingest import ingest as ingest_path

# How many skipped records a run lists before it only counts them.
SHOWN_ERRORS = 20


DEFAULT_PROGRESS_SECONDS = 10.0

progress_option = click.option(
    "--progress-every",
    "progress_every",
    type=click.FloatRange(min=0),
    default=DEFAULT_PROGRESS_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="When stderr is no terminal (a log, a pipe), print a progress line on it at most"
    " this often (0: after every batch). A terminal gets a progress bar.",
)


def _lines(description: str, every: float) -> Callable[[int, int | None], None]:
    """Plain progress lines for logs: one per ``every`` seconds at most, none at the start."""
    started = last = time.monotonic()

    def update(done: int, total: int | None) -> None:
        nonlocal last
        now = time.monotonic()
        if done == 0 or now - last < every:
            return
        last = now
        of = f" of {total:,}" if total else ""
        click.echo(f"{description}: {done:,}{of} records, {now - started:.1f}s", err=True)

    return update


@contextmanager
def _progress(
    description: str, every: float = DEFAULT_PROGRESS_SECONDS
) -> Iterator[Callable[[int, int | None], None] | None]:
    """A rich progress bar on stderr when it is a terminal; else progress lines at most every
    ``every`` seconds (logs, pipes)."""
    if not sys.stderr.isatty():
        yield _lines(description, every)
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


def _legacy_lines(legacy: tuple[str, ...], *, retracted: bool) -> None:
    if not legacy:
        return
    if retracted:
        for document in legacy[:SHOWN_ERRORS]:
            click.echo(f"removed: {document} (its name from before source names)")
        if len(legacy) > SHOWN_ERRORS:
            click.echo(f"... and {len(legacy) - SHOWN_ERRORS} more under old names removed")
        return
    few = ", ".join(legacy[:3]) + (", ..." if len(legacy) > 3 else "")
    click.echo(
        f"note: {len(legacy)} file{'s' if len(legacy) != 1 else ''} of this folder"
        f" {'are' if len(legacy) != 1 else 'is'} also in the index under the name ingest gave"
        f" before source names ({few}), searchable beside the new copy: run again with"
        " --retract-legacy to retract them",
        err=True,
    )


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
    help=MODEL_HELP + " Embeds new and changed fragments; must be registered in the database.",
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
@click.option(
    "--source",
    "source",
    default=None,
    metavar="NAME",
    help="The name this input's source uris start with: <NAME>/<relative path>#<position>"
    " for a folder of text, <NAME>#<id> for JSON Lines. Default: the folder's or file's own"
    " name. Give each folder its own name to ingest several into one project.",
)
@click.option(
    "--sync",
    is_flag=True,
    help="Also retract what is no longer in the input under this source (files deleted"
    " from the folder since the last run, ids gone from the file).",
)
@click.option(
    "--retract-legacy",
    is_flag=True,
    help="Also retract this folder's files under the names ingest gave them before --source"
    " existed (<relative path>#<n>, no source in front): otherwise those copies stay"
    " searchable beside the new ones. A run without it names them; `pyretrieve sources`"
    " lists what the scope holds.",
)
@progress_option
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
    source: str | None,
    sync: bool,
    retract_legacy: bool,
    progress_every: float,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Ingest PATH: a .jsonl file, a BEIR folder (corpus.jsonl[.gz]) or a folder of .txt/.md.

    Every fragment has a source uri: for a folder of text, <source>/<relative path>#<n>
    (the n-th fragment of that file; <source> is --source, default the folder's name).
    Unchanged records are left alone, changed ones supersede their previous version, and
    malformed ones are listed (file:line) and skipped, or with --strict fail the run.
    `pyretrieve retract --source-uri <source>/<relative path>` retracts a document.
    """
    embedder = None if no_embed else get_embedder(model)
    with connect(dsn) as conn, _progress("ingesting", progress_every) as progress:
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
                source=source,
                sync=sync,
                retract_legacy=retract_legacy,
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
    for document in report.removed[:SHOWN_ERRORS]:
        click.echo(f"removed: {document} (no longer in the input)")
    if len(report.removed) > SHOWN_ERRORS:
        click.echo(f"... and {len(report.removed) - SHOWN_ERRORS} more removed")
    _legacy_lines(report.legacy, retracted=report.legacy_retracted)
    embedded = f"{report.embedded} ({report.model})" if report.model else "0 (no model)"
    click.echo(
        f"ingested {report.path} as source {report.source} into {workspace}/{project}:"
        f" read {report.read},"
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
@progress_option
@as_option
@dsn_option
@handle_errors
def reembed(
    workspace: str,
    project: str,
    model: str,
    batch_size: int,
    progress_every: float,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Compute the scope's missing or stale embeddings for MODEL."""
    embedder = get_embedder(model)
    with connect(dsn) as conn, _progress("embedding", progress_every) as progress:
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


@main.command()
@click.option("--workspace", "-w", required=True, help="Workspace of the fragments.")
@click.option("--project", "-p", required=True, help="Project of the fragments.")
@click.option(
    "--source-uri",
    "source_uris",
    multiple=True,
    metavar="URI",
    help="A document (notes/a.md, c.jsonl: all its fragments) or one fragment (notes/a.md#2,"
    " c.jsonl#doc1). Repeatable.",
)
@click.option(
    "--source-prefix",
    "source_prefixes",
    multiple=True,
    metavar="PREFIX",
    help="Every fragment whose source uri starts with PREFIX: teamA/ is the whole source"
    " teamA (a source renamed with --source leaves its old name behind). Repeatable.",
)
@as_option
@dsn_option
@handle_errors
def retract(
    workspace: str,
    project: str,
    source_uris: tuple[str, ...],
    source_prefixes: tuple[str, ...],
    principal: str | None,
    dsn: str | None,
) -> None:
    """Retract documents, fragments or prefixes by source uri: they leave every search at once.

    All or nothing: a uri or prefix with no active fragment (that the writer may see)
    retracts nothing and fails with VES_MEMORY_NOT_FOUND. `pyretrieve sources` lists the
    documents. As a writer (--as WRITER)."""
    if not source_uris and not source_prefixes:
        raise click.UsageError("name what to retract: --source-uri URI or --source-prefix PREFIX")
    with connect(dsn) as conn:
        require_principal(conn, principal)
        report = Ingestor(conn, principal=principal).retract(
            workspace=workspace,
            project=project,
            source_uris=source_uris,
            source_prefixes=source_prefixes,
        )
    for uri, n in report.retracted.items():
        click.echo(f"retracted {uri}: {n} fragment{'s' if n != 1 else ''}")


@main.command()
@click.option("--workspace", "-w", required=True, help="Workspace of the fragments.")
@click.option("--project", "-p", required=True, help="Project of the fragments.")
@click.option(
    "--prefix",
    default=None,
    metavar="PREFIX",
    help="Only documents whose source uri starts with PREFIX (docs/: the source docs).",
)
@as_option
@dsn_option
@handle_errors
def sources(
    workspace: str, project: str, prefix: str | None, principal: str | None, dsn: str | None
) -> None:
    """List the documents of a workspace/project and their active fragments, as a writer.

    One line per document, its name (what `pyretrieve retract --source-uri` takes) and its
    fragment count, tab-separated; a summary on stderr. Only what this writer may see:
    fragments above its ceiling are not listed, and a scope without its grant is denied like
    one that does not exist. As a writer (--as WRITER)."""
    with connect(dsn) as conn:
        require_principal(conn, principal)
        listed = Ingestor(conn, principal=principal).sources(
            workspace=workspace, project=project, prefix=prefix
        )
    for document, n in listed.documents.items():
        click.echo(f"{document}\t{n}")
    click.echo(
        f"{len(listed.documents)} documents, {listed.fragments} active fragments in"
        f" {workspace}/{project}" + (f" under {prefix!r}" if prefix else ""),
        err=True,
    )
