"""Ingest a collection into a fresh scope, search every judged query, score the runs.

Everything goes through pyretrieve's public paths: an admin principal creates the workspace,
project, grants and model; a writer principal ingests with ``Ingestor.ingest_path`` (BEIR
folder, batched); a reader principal searches with ``Retriever.search`` (limit 100 and
candidate_limit 100, so Recall@100 is measurable) and the defaults a new user gets: no
``weights=`` (the model's registered defaults) and the default fusion (RRF); ``hybrid-dbsf`` is
the same search with ``fusion="dbsf"``. Runs are scored with ir-measures (trec_eval-compatible):
nDCG@10, R@100 and RR@10 (MRR@10), averaged over every judged query (a query with no results
scores 0); each query's nDCG@10 is kept for paired significance tests. Latency is the wall time
of ``Retriever.search`` per query; the query embedding is computed before the call and timed on
its own. Embeddings come from the evaluation cache when it has them (:mod:`evals.quality.cache`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from evals.bench.runtime import (
    Principals,
    acting_as,
    ensure_installed,
    is_superuser,
    provenance,
    summary_ms,
    throwaway_database,
)
from evals.quality.cache import CachedEmbedder
from evals.quality.datasets import Collection
from evals.quality.references import pg_fulltext_bar, references
from evals.quality.stats import paired_permutation
from pyretrieve import Retriever, Scope, Weights
from pyretrieve.embedders import Embedder
from pyretrieve.embedders.registry import get_embedder, register_model
from pyretrieve.ingest import Ingestor

MEASURES = {"nDCG@10": "nDCG@10", "R@100": "R@100", "MRR@10": "RR@10"}
MODES = ("lexical", "vector", "hybrid", "hybrid-rrf", "hybrid-dbsf")
# mode -> (Retriever.search mode, fusion). "hybrid" gives neither fusion nor weights: the
# model's registered defaults, what a new user gets. "hybrid-rrf" and "hybrid-dbsf" name their
# fusion and give that fusion's cross-validated default weight for the model
# (evals/quality/fusion.json), so both fusions are compared at their own best defaults.
_SEARCH: dict[str, tuple[str, str | None]] = {
    "lexical": ("lexical", None),
    "vector": ("vector", None),
    "hybrid": ("hybrid", None),
    "hybrid-rrf": ("hybrid", "rrf"),
    "hybrid-dbsf": ("hybrid", "dbsf"),
}
FUSION_RESULTS = Path(__file__).resolve().parent / "fusion.json"


def fusion_weights(model: str, fusion: str) -> Weights | None:
    """That fusion's cross-validated default weight for the model, from fusion.json."""
    if not FUSION_RESULTS.exists():
        return None
    entry = json.loads(FUSION_RESULTS.read_text()).get("models", {}).get(model, {}).get(fusion)
    if entry is None:
        return None
    return Weights(lexical=entry["lexical_weight"], vector=entry["vector_weight"])


LEGS = ("lexical", "vector", "hybrid")
LIMIT = 100
CANDIDATE_LIMIT = 100
PURPOSE = "eval"
BATCH_SIZE = 256
WARMUP_QUERIES = 3
_TABLES = (
    "embeddings",
    "postings",
    "fragments",
    "decisions",
    "grants",
    "generation_log",
    "scope_configs",
    "projects",
    "workspaces",
)


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    """The given database (schema installed if missing) or a throwaway embedded server."""
    if dsn:
        ensure_installed(dsn)
        yield dsn
    else:
        with throwaway_database() as url:
            yield url


def score(
    qrels: dict[str, dict[str, int]], run: dict[str, list[str]]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean of each measure over every judged query, and the per-query values."""
    scored = {
        q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)}
        for q, docs in run.items()
        if docs
    }
    per_query: dict[str, dict[str, float]] = {q: dict.fromkeys(MEASURES, 0.0) for q in qrels}
    names = {ir_measures.parse_measure(m): label for label, m in MEASURES.items()}
    if scored:
        for metric in ir_measures.iter_calc(list(names), qrels, scored):
            if metric.query_id in per_query:
                per_query[metric.query_id][names[metric.measure]] = float(metric.value)
    means = {
        label: round(float(np.mean([v[label] for v in per_query.values()])), 4)
        for label in MEASURES
    }
    return means, per_query


class _Run:
    """One collection in one scope of one database."""

    def __init__(self, conn: psycopg.Connection[Any], collection: Collection, tag: str) -> None:
        self.conn = conn
        self.collection = collection
        self.principals = Principals.create(conn, "quality")
        self.workspace = f"eval-{tag}-{secrets.token_hex(3)}"[-63:].lstrip("-_.")
        self.project = "corpus"
        self.scope = Scope(workspace=self.workspace, project=self.project, purpose=PURPOSE)
        with acting_as(conn, self.principals.admin):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (self.workspace,))
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (self.workspace, self.project))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'internal')",
                (self.principals.writer, self.workspace, self.project),
            )
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
                (self.principals.reader, self.workspace, self.project, PURPOSE),
            )
        self.duplicates = collection.duplicate_groups()

    def cleanup(self, keep: bool) -> None:
        """Remove the run's workspace (superuser only) and its roles; never fails the run."""
        try:
            if not keep and is_superuser(self.conn):
                with self.conn.transaction():
                    # Every table of the schema that holds tenant rows, whatever the revision;
                    # with foreign keys and triggers off, the order does not matter.
                    self.conn.execute("SET LOCAL session_replication_role = replica")
                    tables = self.conn.execute(
                        "SELECT c.table_name FROM information_schema.columns c"
                        " JOIN information_schema.tables t USING (table_schema, table_name)"
                        " WHERE c.table_schema = 'pyretrieve' AND c.column_name = 'workspace_id'"
                        " AND t.table_type = 'BASE TABLE'"
                    ).fetchall()
                    for (table,) in tables:
                        self.conn.execute(
                            sql.SQL("DELETE FROM pyretrieve.{} WHERE workspace_id = %s").format(
                                sql.Identifier(table)
                            ),
                            (self.workspace,),
                        )
            elif not keep:
                print(
                    f"workspace {self.workspace} left in place (not a superuser)", file=sys.stderr
                )
        except psycopg.Error as exc:
            print(f"could not remove workspace {self.workspace}: {exc}", file=sys.stderr)
        self.principals.drop(self.conn)

    def ingest(self, folder: Path, embedder: Embedder) -> dict[str, Any]:
        register_model(self.conn, embedder, principal=self.principals.admin)
        # Embedded before ingestion, outside any transaction (from the cache when it has
        # them): the ingestor embeds inside its write transaction, and a slow model on a busy
        # machine can keep a batch there past the server's idle-in-transaction timeout.
        bodies = sorted({self.collection.body(d) for d in self.collection.docs})
        for start in range(0, len(bodies), 64):
            embedder.embed_documents(bodies[start : start + 64])
        report = Ingestor(
            self.conn, principal=self.principals.writer, embedder=embedder, batch_size=BATCH_SIZE
        ).ingest_path(folder, workspace=self.workspace, project=self.project)
        # Fresh tables have no statistics until autovacuum gets to them, and the planner then
        # picks plans that cost a leg 4x to 100x (measured on Cranfield: vector 250 ms vs 2 ms,
        # BM25 lexical 117 ms vs 30 ms). Search runs measure the steady state, so every table
        # of the schema is analyzed now when allowed.
        analyzed = is_superuser(self.conn)
        if analyzed:
            tables = self.conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'pyretrieve' AND c.relkind = 'r'"
            ).fetchall()
            for (table,) in tables:
                self.conn.execute(sql.SQL("ANALYZE pyretrieve.{}").format(sql.Identifier(table)))
        return {
            "model": embedder.model_id,
            "read": report.read,
            "inserted": report.inserted,
            "unchanged": report.unchanged,
            "embedded": report.embedded,
            "skipped": report.skipped,
            "skipped_reasons": sorted({issue.message for issue in report.errors}),
            "batches": report.batches,
            "batch_size": BATCH_SIZE,
            "seconds": round(report.seconds, 3),
            "analyzed_after_ingest": analyzed,
        }

    def _doc_ids(self, source_uri: str | None, prefix: str) -> list[str]:
        if not source_uri or not source_uri.startswith(prefix):
            return []
        doc = source_uri[len(prefix) :]
        return self.duplicates.get(doc, [doc])

    def search_all(
        self, folder: Path, embedder: Embedder, modes: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        prefix = folder.name + "#"
        retriever = Retriever(self.conn, principal=self.principals.reader)
        queries = list(self.collection.queries.items())
        runs: dict[str, dict[str, list[str]]] = {m: {} for m in modes}
        latencies: dict[str, list[float]] = {m: [] for m in modes}
        semantic: dict[str, dict[str, int]] = {m: {} for m in modes}
        fusion: dict[str, dict[str, Any]] = {}
        embed_seconds: list[float] = []
        needs_vector = any(m != "lexical" for m in modes)
        tuned = {f: fusion_weights(embedder.model_id, f) for f in ("rrf", "dbsf")}

        for position, (qid, text) in enumerate([*queries[:WARMUP_QUERIES], *queries]):
            warmup = position < min(WARMUP_QUERIES, len(queries))
            text = text[:4096]
            vector: NDArray[np.float32] | None = None
            if needs_vector:
                started = time.perf_counter()
                vector = np.asarray(embedder.embed_query(text), dtype=np.float32)
                if not warmup:
                    embed_seconds.append(time.perf_counter() - started)
            # Modes take turns going first, so none always meets the coldest cache.
            turn = position % len(modes)
            for mode in [*modes[turn:], *modes[:turn]]:
                lexical = mode == "lexical"
                search_mode, fused_by = _SEARCH[mode]
                started = time.perf_counter()
                weights = None if fused_by is None else tuned[fused_by]
                result = retriever.search(
                    text,
                    scope=self.scope,
                    mode=search_mode,
                    limit=LIMIT,
                    candidate_limit=CANDIDATE_LIMIT,
                    embedding=None if lexical else vector,
                    model=None if lexical else embedder.model_id,
                    fusion=fused_by,
                    weights=weights,
                )
                elapsed = time.perf_counter() - started
                if warmup:
                    continue
                fusion.setdefault(
                    mode,
                    {**result.fusion.fusion_plain(), "weights": result.fusion.weights_plain()},
                )
                latencies[mode].append(elapsed)
                status = result.semantic.status.value
                semantic[mode][status] = semantic[mode].get(status, 0) + 1
                ranked: list[str] = []
                seen: set[str] = set()
                for item in result.results:
                    for doc in self._doc_ids(item.record.source_uri, prefix):
                        if doc not in seen:
                            seen.add(doc)
                            ranked.append(doc)
                runs[mode][qid] = ranked

        out: dict[str, dict[str, Any]] = {}
        for mode in modes:
            means, per_query = score(self.collection.qrels, runs[mode])
            empty = sum(1 for q in self.collection.queries if not runs[mode].get(q))
            out[mode] = {
                **means,
                "queries": len(runs[mode]),
                "queries_without_results": empty,
                "latency_ms": summary_ms(latencies[mode]),
                "semantic_status": semantic[mode],
                "fusion": fusion.get(mode),
                "per_query_nDCG@10": {
                    q: round(v["nDCG@10"], 4) for q, v in sorted(per_query.items())
                },
            }
            if mode != "lexical":
                out[mode]["query_embedding_ms"] = summary_ms(embed_seconds)
        return out


def evaluate(
    dsn: str,
    collection: Collection,
    models: Sequence[str],
    modes: Sequence[str],
    *,
    folder: Path | None = None,
    keep: bool = False,
    cache: bool = True,
) -> dict[str, dict[str, Any]]:
    """One run per model: ingest (the same scope; each model adds its embeddings), search,
    score. ``folder``: a BEIR folder holding exactly this collection's corpus, ingested as it
    is; otherwise the corpus is written to a temporary BEIR folder first. ``cache``: read and
    keep embeddings in the evaluation cache."""
    results: dict[str, dict[str, Any]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        if folder is None:
            folder = collection.write_beir(Path(tmp) / collection.name)
        facts = provenance(conn)
        run = _Run(conn, collection, collection.name)
        try:
            for model in models:
                embedder: Embedder = get_embedder(model)
                if cache:
                    embedder = CachedEmbedder(embedder)
                ingest = run.ingest(folder, embedder)
                started = time.perf_counter()
                modes_out = run.search_all(folder, embedder, modes)
                results[model] = {
                    **facts,
                    "model": model,
                    "settings": {
                        "limit": LIMIT,
                        "candidate_limit": CANDIDATE_LIMIT,
                        "weights": "hybrid: none given, the model's registered defaults;"
                        " hybrid-rrf / hybrid-dbsf: that fusion's cross-validated default"
                        " weight (evals/quality/fusion.json); each mode's fusion entry says"
                        " which were used and from where",
                        "fusion": {
                            m: _SEARCH[m][1] or "the model's default"
                            for m in modes
                            if m not in ("lexical", "vector")
                        },
                        "rrf_k": 60,
                        "embedding_cache": cache,
                        "ts_config": "project default (pg_catalog.english)",
                        "classification": "internal",
                        "principals": "admin, writer and reader roles made for the run;"
                        " searches as the reader (SET LOCAL ROLE, RLS on)",
                        "warmup_queries": WARMUP_QUERIES,
                        "mode_order": "rotated per query",
                    },
                    "ingest": ingest,
                    "search_seconds": round(time.perf_counter() - started, 2),
                    "modes": modes_out,
                }
        finally:
            run.cleanup(keep)
    return results


def bars(dataset: str, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Our bars per model: hybrid (the defaults) >= the better leg, and hybrid above published
    PG full-text; with the paired significance of hybrid against the better leg, and of DBSF
    against RRF, where per-query figures were kept."""
    thresholds = pg_fulltext_bar(dataset)
    out: dict[str, Any] = {}
    for model, run in runs.items():
        modes = run.get("modes", {})
        if not all(m in modes for m in LEGS):
            out[model] = {"note": "needs lexical, vector and hybrid runs"}
            continue
        entry: dict[str, Any] = {}
        better = (
            "lexical" if modes["lexical"]["nDCG@10"] >= modes["vector"]["nDCG@10"] else "vector"
        )
        for measure in MEASURES:
            best_leg = max(modes["lexical"][measure], modes["vector"][measure])
            entry[f"hybrid_ge_best_leg_{measure}"] = {
                "holds": modes["hybrid"][measure] >= best_leg,
                "hybrid": modes["hybrid"][measure],
                "best_leg": best_leg,
                "margin": round(modes["hybrid"][measure] - best_leg, 4),
            }
        best_leg = max(modes["lexical"]["nDCG@10"], modes["vector"]["nDCG@10"])
        for mode in ("hybrid", "hybrid-rrf", "hybrid-dbsf"):
            if mode not in modes:
                continue
            if mode != "hybrid":
                entry[f"{mode}_ge_best_leg_nDCG@10"] = {
                    "holds": modes[mode]["nDCG@10"] >= best_leg,
                    "hybrid": modes[mode]["nDCG@10"],
                    "best_leg": best_leg,
                    "margin": round(modes[mode]["nDCG@10"] - best_leg, 4),
                }
            if "per_query_nDCG@10" in modes[mode]:
                entry[f"{mode}_vs_{better}_nDCG@10"] = _paired(modes[mode], modes[better])
        if all("per_query_nDCG@10" in modes.get(m, {}) for m in ("hybrid-rrf", "hybrid-dbsf")):
            entry["dbsf_vs_rrf_nDCG@10"] = _paired(modes["hybrid-dbsf"], modes["hybrid-rrf"])
        hybrid = modes["hybrid"]["nDCG@10"]
        for kind in ("published", "lab"):
            ref = thresholds[kind]
            key = f"hybrid_above_{kind}_pg_fulltext"
            if ref is None:
                entry[key] = {
                    "holds": None,
                    "note": f"no {kind} PostgreSQL full-text figure for this collection",
                }
            else:
                entry[key] = {
                    "holds": hybrid > ref["nDCG@10"],
                    "hybrid": hybrid,
                    "reference": ref["nDCG@10"],
                    "reference_system": ref["system"],
                    "margin": round(hybrid - ref["nDCG@10"], 4),
                }
        out[model] = entry
    return out


def _paired(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Mean difference of per-query nDCG@10 and its paired randomization p-value."""
    queries = sorted(a["per_query_nDCG@10"])
    x = [a["per_query_nDCG@10"][q] for q in queries]
    y = [b["per_query_nDCG@10"][q] for q in queries]
    return {
        "difference": round(float(np.mean(x) - np.mean(y)), 4),
        "p": round(paired_permutation(x, y), 4),
        "test": "paired randomization (sign flip), 10,000 permutations, two-sided",
    }


def merge(
    path: Path, dataset: str, collection: dict[str, Any], runs: dict[str, Any]
) -> dict[str, Any]:
    """Add (or replace) the runs of these models in ``<dataset>.json``; recompute the bars."""
    data: dict[str, Any] = {}
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
    merged_runs = {**data.get("runs", {}), **runs}
    data = {
        "dataset": dataset,
        "collection": collection,
        "measures": {
            "nDCG@10": "ir-measures nDCG@10 (trec_eval ndcg_cut_10, graded gains)",
            "R@100": "ir-measures R@100 (recall of relevant docs in the top 100)",
            "MRR@10": "ir-measures RR@10 (reciprocal rank of the first relevant doc, cut at 10)",
            "averaging": "mean over every judged query; a query without results scores 0",
        },
        "references": references(dataset),
        "runs": dict(sorted(merged_runs.items())),
        "bars": bars(dataset, merged_runs),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data
