"""The main job: from nothing to explained, policy-filtered results in one command.

Starts (or uses) a database, installs the schema, creates principals and two workspaces with
different classifications, ingests a small bundled corpus (Apache-2.0 API descriptions from
Gorilla APIBench, see data/NOTICE) and runs searches that show what each principal may see.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from rich.console import Console
from rich.text import Text

from pyretrieve.client import Retriever
from pyretrieve.db import migrate
from pyretrieve.embedded import APP_ROLE
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
QUERY = "pretrained video classification model for Kinetics action recognition"


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoReport:
    seconds: float
    ingested: int
    researcher_results: int
    contractor_results: int
    contractor_denied_partner: bool


def _setup_roles(conn: psycopg.Connection[dict[str, Any]]) -> None:
    for name, group in ROLES.items():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(name)))
        # The connecting role acts as each principal with SET ROLE, as an application would;
        # so may the embedded server's application login role, for later CLI commands.
        conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(name)))
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone():
            conn.execute(
                sql.SQL("GRANT {} TO {}").format(sql.Identifier(name), sql.Identifier(APP_ROLE))
            )


def _setup_scopes(conn: psycopg.Connection[dict[str, Any]], embedder: HashNgramEmbedder) -> None:
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(ADMIN)))
        for scope in (VISION, PARTNER):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (scope.workspace,))
            conn.execute(
                "SELECT pyretrieve.create_project(%s, %s)", (scope.workspace, scope.project)
            )
            conn.execute(
                "SELECT pyretrieve.grant_access(p_principal => %s::regrole, p_workspace => %s,"
                " p_project => %s, p_purpose => 'ingest', p_ceiling => 'restricted')",
                (INGEST, scope.workspace, scope.project),
            )
        conn.execute(
            "SELECT pyretrieve.register_model(p_model => %s, p_dimension => %s)",
            (embedder.model_id, embedder.dimension),
        )
        grants = [
            (RESEARCHER, VISION, "confidential", "optional"),
            (RESEARCHER, PARTNER, "internal", "optional"),
            (CONTRACTOR, VISION, "public", "disabled"),
        ]
        for who, scope, ceiling, semantic in grants:
            conn.execute(
                "SELECT pyretrieve.grant_access(p_principal => %s::regrole, p_workspace => %s,"
                " p_project => %s, p_purpose => %s, p_ceiling => %s::pyretrieve.classification,"
                " p_max_age => interval '3650 days',"
                " p_semantic_policy => %s::pyretrieve.semantic_policy)",
                (who, scope.workspace, scope.project, scope.purpose, ceiling, semantic),
            )


def _show(console: Console, title: str, result: SearchResult, *, explain: bool) -> None:
    from pyretrieve.cli.search import render

    console.rule(Text(title))
    render(result, console, explain=explain)


def run(dsn: str, console: Console | None = None) -> DemoReport:
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
        _show(
            console,
            f"{RESEARCHER} (ceiling confidential) searches {VISION.workspace}: {QUERY!r}",
            r1,
            explain=True,
        )

        r2 = contractor.search(QUERY, scope=VISION, **kw)
        _show(
            console,
            f"{CONTRACTOR} (ceiling public, semantic disabled by policy) runs the same search",
            r2,
            explain=False,
        )
        hidden = {r.fragment_id for r in r1.results} - {r.fragment_id for r in r2.results}
        console.print(
            Text(
                f"{len(hidden)} of the researcher's top results are above the contractor's ceiling: "
                "the contractor's answer carries no trace of them (no row, count or omission). "
                "Its vector leg is degraded (disabled by policy), so confidence is lowered."
            )
        )

        denied = False
        try:
            contractor.search("image feature vector", scope=PARTNER, **kw)
        except PyretrieveError as exc:
            denied = True
            console.rule(Text(f"{CONTRACTOR} searches {PARTNER.workspace}"))
            console.print(
                Text(
                    f"error [{exc.code}]: {exc.message}  (same answer as for a workspace that does not exist)"
                )
            )

        r3 = researcher.search("image feature vector mobilenet", scope=PARTNER, **kw)
        _show(
            console,
            f"{RESEARCHER} searches {PARTNER.workspace}: 'image feature vector mobilenet'",
            r3,
            explain=False,
        )

    seconds = time.perf_counter() - started
    console.print(
        Text(
            f"demo finished in {seconds:.1f} s. Try: pyretrieve search '...' --workspace "
            f"{VISION.workspace} --project {VISION.project} --purpose research --as {RESEARCHER} --explain"
        )
    )
    return DemoReport(
        seconds=seconds,
        ingested=ingested,
        researcher_results=len(r1.results),
        contractor_results=len(r2.results),
        contractor_denied_partner=denied,
    )
