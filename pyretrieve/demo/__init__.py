"""The main job: from nothing to explained, policy-filtered results in one command.

Starts (or uses) a database, installs the schema, creates principals and two workspaces with
different classifications, ingests a small bundled corpus (Apache-2.0 API descriptions from
Gorilla APIBench, see data/NOTICE) and runs searches that show what each principal may see.
"""

from __future__ import annotations

import json as _json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve.client import Retriever
from pyretrieve.db import migrate, queries
from pyretrieve.embedded import APP_ROLE
from pyretrieve.embedders import registry
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import PyretrieveError
from pyretrieve.ingest import Ingestor
from pyretrieve.types import Scope, SearchResult

DATA = Path(__file__).resolve().parent / "data"

ADMIN = "demo_admin"
INGEST = "demo_ingest"
RESEARCHER = "demo_researcher"
CONTRACTOR = "demo_contractor"
ROLES = {
    ADMIN: "pyretrieve_admin",
    INGEST: "pyretrieve_writer",
    RESEARCHER: "pyretrieve_reader",
    CONTRACTOR: "pyretrieve_reader",
}
VISION = Scope(workspace="vision-lab", project="models", purpose="research")
PARTNER = Scope(workspace="partner-hub", project="catalog", purpose="research")
QUERY = "semantic segmentation model for drivable area and lane detection"


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoReport:
    seconds: float
    ingested: int
    researcher_results: int
    contractor_results: int
    contractor_denied_partner: bool
    # Of the researcher's results, how many the contractor's ceiling keeps from it.
    above_contractor_ceiling: int = 0


def _setup_roles(conn: psycopg.Connection[dict[str, Any]]) -> None:
    for name, group in ROLES.items():
        exists = conn.execute(queries.ROLE_EXISTS, (name,)).fetchone()
        if not exists:
            conn.execute(queries.create_nologin_role(name))
        conn.execute(queries.grant_role(group, name))
        # The connecting role acts as each principal with SET ROLE, as an application would;
        # so may the embedded server's application login role, for later CLI commands.
        conn.execute(queries.grant_role_to_current_user(name))
        if conn.execute(queries.ROLE_EXISTS, (APP_ROLE,)).fetchone():
            conn.execute(queries.grant_role(name, APP_ROLE))


# grant_access's max_age, semantic policy and expiry: its defaults, and the readers' window.
_DEFAULTS = (None, "optional", None)
_YEARS = "3650 days"


def _setup_scopes(conn: psycopg.Connection[dict[str, Any]], embedder: HashNgramEmbedder) -> None:
    with conn.transaction():
        conn.execute(queries.set_local_role(ADMIN))
        for scope in (VISION, PARTNER):
            conn.execute(queries.CREATE_WORKSPACE, (scope.workspace,))
            conn.execute(queries.CREATE_PROJECT, (scope.workspace, scope.project))
            # The writer's grant: the defaults of grant_access (no max_age, optional
            # semantic, no expiry), spelled out.
            conn.execute(
                queries.GRANT_ACCESS,
                (INGEST, scope.workspace, scope.project, "ingest", "restricted", *_DEFAULTS),
            )
        conn.execute(queries.REGISTER_MODEL, registry.register_params(embedder))
        grants = [
            (RESEARCHER, VISION, "confidential", "optional"),
            (RESEARCHER, PARTNER, "internal", "optional"),
            (CONTRACTOR, VISION, "public", "disabled"),
        ]
        for who, scope, ceiling, semantic in grants:
            conn.execute(
                queries.GRANT_ACCESS,
                (
                    who,
                    scope.workspace,
                    scope.project,
                    scope.purpose,
                    ceiling,
                    _YEARS,
                    semantic,
                    None,
                ),
            )


def _side_by_side(
    console: Console, left: tuple[str, SearchResult], right: tuple[str, SearchResult]
) -> None:
    """The same query for two principals, rank by rank, with each fragment's classification."""
    table = Table(title=Text(f"the same search: {QUERY!r}"), expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    for who, _ in (left, right):
        table.add_column(f"{who} sees", overflow="ellipsis", no_wrap=True, ratio=1)
        table.add_column("classification", no_wrap=True)
    rows = max(len(left[1].results), len(right[1].results))
    for i in range(rows):
        cells: list[Text | str] = [str(i + 1)]
        for _, result in (left, right):
            if i < len(result.results):
                record = result.results[i].record
                cells += [Text(record.source_uri or ""), Text(record.classification.value)]
            else:
                cells += ["", ""]
        table.add_row(*cells)
    console.print(table)
    for who, result in (left, right):
        console.print(Text(f"{who}: semantic {result.semantic.status.value}", style="bold"), end="")
        sem = result.semantic
        reason = f" ({sem.reason.value}; confidence lowered)" if sem.reason is not None else ""
        console.print(Text(reason))


def _show(console: Console, title: str, result: SearchResult, *, explain: bool) -> None:
    from pyretrieve.cli.search import render

    console.rule(Text(title))
    render(result, console, explain=explain)


def run(
    dsn: str, console: Console | None = None, *, json: bool = False, embedded: bool = False
) -> DemoReport:
    """Run the demo on ``dsn`` (an installer's connection). ``json``: also print the
    explanation of the top result; ``embedded``: the server is the embedded default."""
    console = console or Console()
    started = time.perf_counter()
    console.print(Text("installing the pyretrieve schema (Alembic to head)"))
    migrate.upgrade(dsn)
    embedder = HashNgramEmbedder()
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        _setup_roles(conn)
        _setup_scopes(conn, embedder)
        ingested = 0
        for scope, name in ((VISION, "torchhub.jsonl"), (PARTNER, "tfhub.jsonl")):
            report = Ingestor(conn, principal=INGEST, embedder=embedder).ingest_path(
                DATA / name, workspace=scope.workspace, project=scope.project
            )
            ingested += report.read
            console.print(
                Text(
                    f"ingested {name} into {scope.workspace}/{scope.project}: {report.read} records"
                )
            )

        researcher = Retriever(conn, principal=RESEARCHER, embedders=[embedder])
        contractor = Retriever(conn, principal=CONTRACTOR, embedders=[embedder])
        kw: dict[str, Any] = {"model": embedder.model_id, "limit": 5}

        r1 = researcher.search(QUERY, scope=VISION, **kw)
        r2 = contractor.search(QUERY, scope=VISION, **kw)
        console.rule(Text(f"{VISION.workspace}/{VISION.project}, purpose {VISION.purpose}"))
        _side_by_side(
            console,
            (f"{RESEARCHER} (ceiling confidential)", r1),
            (f"{CONTRACTOR} (ceiling public)", r2),
        )
        seen_by_contractor = {r.fragment_id for r in r2.results}
        above = [r for r in r1.results if r.fragment_id not in seen_by_contractor]
        classes = sorted({r.record.classification.value for r in above})
        console.print(
            Text(
                f"{len(above)} of {RESEARCHER}'s {len(r1.results)} results"
                f" ({', '.join(classes) or 'none'}) are above {CONTRACTOR}'s ceiling (public):"
                f" {CONTRACTOR}'s answer has no row, count, omission or error for them; the"
                " number comes from comparing both answers, which only this demo can do."
                f" {CONTRACTOR}'s grant also disables the vector leg, so its confidence is lower."
            )
        )
        if json:
            console.print(Text(f"explanation of {RESEARCHER}'s top result:", style="bold"))
            console.print_json(_json.dumps(dict(r1.results[0].explanation), sort_keys=True))

        denied = False
        try:
            contractor.search("image feature vector", scope=PARTNER, **kw)
        except PyretrieveError as exc:
            denied = True
            console.rule(Text(f"{CONTRACTOR} searches {PARTNER.workspace} (no grant there)"))
            console.print(
                Text(
                    f"error [{exc.code}]: {exc.message}  (the same answer as for a workspace that"
                    " does not exist)"
                )
            )

    seconds = time.perf_counter() - started
    console.print(
        Text(
            f"demo finished in {seconds:.1f} s. Try: pyretrieve search '...' --workspace "
            f"{VISION.workspace} --project {VISION.project} --purpose research --as {RESEARCHER}"
            " --explain"
        )
    )
    if embedded:
        console.print(
            Text(
                "The embedded server keeps running (pyretrieve db status); stop it with"
                " `pyretrieve db stop`."
            )
        )
    return DemoReport(
        seconds=seconds,
        ingested=ingested,
        researcher_results=len(r1.results),
        contractor_results=len(r2.results),
        contractor_denied_partner=denied,
        above_contractor_ceiling=len(above),
    )
