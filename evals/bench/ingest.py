"""Ingestion throughput: the bulk path (COPY into the writer's staging table, one set-based
``ingest_batch`` per batch) against the row-by-row path (one SQL API call per record), on the
same input in the same run, on a throwaway embedded PostgreSQL server with its tuned defaults.

Usage: python evals/bench/ingest.py [--n 10000] [--rows-batch 256] [--bulk-batch 1000]
                                    [--corpus PATH] [--out PATH]

The corpus is SciFact's (``../shared/datasets/scifact/`` beside the repository) unless
``--corpus`` names another BEIR ``corpus.jsonl[.gz]``. SciFact has 5,183 abstracts (about
1,500 characters each), so to reach N the records are replicated; each replica's title carries
its replica number, which makes every body distinct (ingestion is idempotent by content).

Runs, each into its own project, the two paths interleaved so that other load on the machine
falls on both alike:

* ``lexical``: N new fragments without embeddings, then the same N again (``rerun``: nothing to
  write);
* ``384-d``: N new fragments, each with a precomputed 384-d embedding (looked up by body, so no
  model runs), with an HNSW index over the model maintained (``create_model_index``, which
  ``register_model`` built up to migration 0015); then the rerun;
* ``384-d, no HNSW`` (bulk only): the same without it, as shipped since 0016;
* ``floors``: what the database spends per fragment whatever the path: ``to_tsvector`` of the
  bodies alone, and the postings (one row per fragment and lexeme) the lexical index writes.

For every run: wall-clock fragments/s, and the CPU seconds of the server backend and of this
process, which other load on a shared machine disturbs far less than the wall clock. Writes
``evals/bench/ingest.json`` with the git commit, settings, date, machine and load. This is a
measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from evals.bench.runtime import throwaway_database  # noqa: E402
from pyretrieve import embedded  # noqa: E402
from pyretrieve.ingest import Ingestor, IngestReport  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"
WORKSPACE = "bench"
WRITER = "pyretrieve_bench_writer"
MODEL = "bench-precomputed-384"
MODEL_NO_INDEX = "bench-precomputed-384-noindex"
DIMENSION = 384


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open()


def build_corpus(source: Path, n: int, out: Path) -> tuple[dict[str, Any], list[str]]:
    """A JSONL file of n records made from a BEIR corpus, replicated as needed, and the bodies
    ingestion will write (title, blank line, text)."""
    with _open(source) as fh:
        docs = [json.loads(line) for line in fh if line.strip()]
    docs = [d for d in docs if (d.get("title") or "").strip() or (d.get("text") or "").strip()]
    bodies: list[str] = []
    with out.open("w", encoding="utf-8") as fh:
        replica = 0
        while len(bodies) < n:
            for doc in docs:
                if len(bodies) >= n:
                    break
                title = doc.get("title") or ""
                if replica:
                    title = f"[replica {replica}] {title}"
                record = {"id": f"{doc['_id']}-{replica}", "title": title, "text": doc["text"]}
                fh.write(json.dumps(record) + "\n")
                bodies.append(f"{title}\n\n{doc['text']}" if title.strip() else doc["text"])
            replica += 1
    info = {
        "source": str(source.relative_to(ROOT.parent))
        if source.is_relative_to(ROOT.parent)
        else str(source),
        "unique_documents": len(docs),
        "replicas": replica,
        "fragments": len(bodies),
        "mean_chars": round(sum(map(len, bodies)) / max(len(bodies), 1)),
    }
    return info, bodies


class PrecomputedEmbedder:
    """384-d unit vectors looked up by body (made up front, outside every timing)."""

    dimension = DIMENSION

    def __init__(self, model_id: str, table: dict[bytes, NDArray[np.float32]]) -> None:
        self.model_id = model_id
        self.table = table

    def embed_documents(self, texts: Sequence[str]) -> list[Any]:
        return [self.table[hashlib.sha256(t.encode("utf-8")).digest()] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError("the benchmark embeds no queries")


def vectors_for(bodies: Sequence[str]) -> dict[bytes, NDArray[np.float32]]:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((len(bodies), DIMENSION)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return {hashlib.sha256(b.encode("utf-8")).digest(): matrix[i] for i, b in enumerate(bodies)}


def setup(admin_url: str, projects: list[str]) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (WRITER,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(WRITER)))
            conn.execute(sql.SQL("GRANT pyretrieve_writer TO {}").format(sql.Identifier(WRITER)))
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WORKSPACE,))
        for project in projects:
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WORKSPACE, project))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'internal')",
                (WRITER, WORKSPACE, project),
            )
        for model in (MODEL, MODEL_NO_INDEX):
            conn.execute("SELECT pyretrieve.register_model(%s, %s)", (model, DIMENSION))
        # register_model builds no index since 0016; MODEL gets the per-model one it built up
        # to 0015, so the two runs show what maintaining such an index costs.
        conn.execute("SELECT pyretrieve.create_model_index(%s)", (MODEL,))


def _backend_cpu(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _compacts(conn: psycopg.Connection[Any]) -> bool:
    """Whether the schema has the lexical index's compaction (0022 on): a run compacts its
    scope where it can, so a comparison with an earlier schema counts the compaction's cost."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'compact_lexical_index'"
        "   AND pronamespace = 'pyretrieve'::regnamespace)"
    ).fetchone()
    return bool(row and row[0])


def timed(
    url: str,
    corpus: Path,
    project: str,
    *,
    path: str,
    batch_size: int,
    embedder: PrecomputedEmbedder | None = None,
) -> tuple[IngestReport, float | None, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        pid = conn.info.backend_pid
        server_before = _backend_cpu(pid)
        client_before = time.process_time()
        report = Ingestor(
            conn,
            principal=WRITER,
            embedder=embedder,
            batch_size=batch_size,
            write_path=path,  # type: ignore[arg-type]
            compact=_compacts(conn),
        ).ingest_path(corpus, workspace=WORKSPACE, project=project)
        client = time.process_time() - client_before
        server_after = _backend_cpu(pid)
    server = None if server_before is None or server_after is None else server_after - server_before
    return report, server, client


def result(
    name: str, path: str, batch: int, report: IngestReport, server: float | None, client: float
) -> dict[str, Any]:
    out = {
        "name": name,
        "path": path,
        "batch_size": batch,
        "fragments": report.read,
        "inserted": report.inserted,
        "unchanged": report.unchanged,
        "embedded": report.embedded,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "fragments_per_s": round(report.read / report.seconds, 1),
        "client_cpu_s": round(client, 3),
    }
    if server is not None:
        out["server_cpu_s"] = round(server, 3)
        out["fragments_per_server_cpu_s"] = round(report.read / server, 1) if server else None
    print(out, file=sys.stderr, flush=True)
    return out


def floors(url: str, bodies: Sequence[str]) -> dict[str, Any]:
    """The cost every path pays: text analysis, and the postings the lexical index writes."""
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TEMPORARY TABLE bodies (body text)")
        with conn.cursor().copy("COPY bodies (body) FROM STDIN") as copy:
            for body in bodies:
                copy.write_row((body,))
        pid = conn.info.backend_pid
        before, started = _backend_cpu(pid), time.perf_counter()
        row = conn.execute(
            "SELECT count(*), sum(length(to_tsvector('english', body))) FROM bodies"
        ).fetchone()
        seconds = time.perf_counter() - started
        after = _backend_cpu(pid)
        conn.rollback()
        postings = conn.execute(
            "SELECT count(*) FROM pyretrieve.lexical_postings WHERE project_id = 'bulk-lexical'"
        ).fetchone()
    assert row is not None
    assert postings is not None
    cpu = None if before is None or after is None else after - before
    return {
        "to_tsvector_seconds": round(seconds, 3),
        "to_tsvector_per_s": round(len(bodies) / seconds, 1),
        "to_tsvector_per_cpu_s": round(len(bodies) / cpu, 1) if cpu else None,
        "lexemes_per_fragment": round(int(row[1]) / int(row[0]), 1),
        "postings_written": int(postings[0]),
        "note": "to_tsvector alone over the same bodies, in one statement: an upper bound on"
        " any ingestion path here, since each fragment's tsvector is computed by the database"
        " (once since migration 0025; before it twice, the tsv column and doc_length both"
        " being generated)",
    }


def git_state() -> dict[str, Any]:
    """The commit, and any uncommitted changes to the code the benchmark runs."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout

    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--", "pyretrieve", "sql", "alembic"
    )
    return {
        "commit": git("rev-parse", "HEAD").strip(),
        "uncommitted_changes": [line[3:] for line in changed.splitlines()],
    }


def ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by = {(r["name"], r["path"]): r for r in runs}
    out: dict[str, Any] = {}
    for name in ("lexical", "lexical rerun", "384-d", "384-d rerun"):
        rows, bulk = by.get((name, "rows")), by.get((name, "bulk"))
        if rows and bulk:
            entry = {"wall": round(bulk["fragments_per_s"] / rows["fragments_per_s"], 2)}
            if rows.get("server_cpu_s") and bulk.get("server_cpu_s"):
                entry["server_cpu"] = round(rows["server_cpu_s"] / bulk["server_cpu_s"], 2)
            out[name] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="fragments per run")
    parser.add_argument("--rows-batch", type=int, default=256)
    parser.add_argument("--bulk-batch", type=int, default=1000)
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="BEIR corpus.jsonl[.gz]"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "evals" / "bench" / "ingest.json")
    args = parser.parse_args()
    corpus_path: Path = args.corpus
    if corpus_path.is_dir():
        corpus_path = next(
            p for p in (corpus_path / "corpus.jsonl", corpus_path / "corpus.jsonl.gz") if p.exists()
        )

    load_before = os.getloadavg()
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="pyretrieve-bench-") as tmp,
        throwaway_database() as url,
    ):
        corpus = Path(tmp) / "bench.jsonl"
        corpus_info, bodies = build_corpus(corpus_path, args.n, corpus)
        table = vectors_for(bodies)
        projects = [
            f"{p}-{k}" for k in ("lexical", "384", "384-noindex") for p in ("rows", "bulk")
        ] + ["bulk-lexical-small"]
        setup(url, projects)
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            vec = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            memory = {
                name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
                for name in embedded.MEMORY_SETTINGS
            }
        server = f"embedded PostgreSQL {version[0] if version else '?'}, pgvector {vec[0] if vec else '?'}"
        print(f"corpus: {corpus_info}; server: {server}; {memory}", file=sys.stderr)
        batch = {"rows": args.rows_batch, "bulk": args.bulk_batch}

        plan: list[tuple[str, str, str, PrecomputedEmbedder | None]] = []
        indexed = PrecomputedEmbedder(MODEL, table)
        unindexed = PrecomputedEmbedder(MODEL_NO_INDEX, table)
        for path in ("rows", "bulk"):
            plan.append(("lexical", path, f"{path}-lexical", None))
        for path in ("rows", "bulk"):
            plan.append(("lexical rerun", path, f"{path}-lexical", None))
        # The bulk path at the row path's batch size (the Ingestor's default for both).
        plan.append(("lexical, small batches", "bulk", "bulk-lexical-small", None))
        for path in ("rows", "bulk"):
            plan.append(("384-d", path, f"{path}-384", indexed))
        for path in ("rows", "bulk"):
            plan.append(("384-d rerun", path, f"{path}-384", indexed))
        plan.append(("384-d, no HNSW", "bulk", "bulk-384-noindex", unindexed))
        for name, path, project, embedder in plan:
            size = args.rows_batch if project.endswith("-small") else batch[path]
            report, server_cpu, client_cpu = timed(
                url, corpus, project, path=path, batch_size=size, embedder=embedder
            )
            runs.append(result(name, path, size, report, server_cpu, client_cpu))
        floor = floors(url, bodies)
        print(floor, file=sys.stderr)

    out = {
        "benchmark": "ingest",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **git_state(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.machine(),
            "python": platform.python_version(),
            "load_average_1m_before": round(load_before[0], 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
        },
        "settings": {
            "n": args.n,
            "rows_batch_size": args.rows_batch,
            "bulk_batch_size": args.bulk_batch,
            "corpus": corpus_info,
            "server": server,
            "server_memory": memory,
            "input": "JSONL through Ingestor.ingest_path, as a writer role (RLS on)",
            "embeddings": f"precomputed {DIMENSION}-d unit vectors looked up by body",
        },
        "results": runs,
        "bulk_over_rows": ratios(runs),
        "floors": floor,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
