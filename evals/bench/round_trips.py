"""What a search costs on a network: the pipelined client against statements one by one.

Usage: python -m evals.bench.round_trips [--dsn DSN] [--one-way-ms 0,0.5,2] [--rounds 6]
       [--searches 20] [--rows 200] [--out PATH]

``Retriever`` sends a request in psycopg's pipeline mode: statements that need no answer in
between travel together, so a hybrid search makes five round trips instead of eleven (ten
before the request's text settings, 2e7069e). On a local socket a round trip costs little; across a network (a managed service in the
same region: 0.2 to 1 ms) each one adds its full time. This bench puts
``evals.bench.latency_proxy.LatencyProxy`` between the client and the server, holding each
chunk ``--one-way-ms`` in each direction, and times the same searches with ``pipeline=True``
and ``pipeline=False`` (the baseline: the statements one by one, as before), interleaved in
rounds, one client, on a scope of ``--rows`` SciFact abstracts with random 384-d embeddings
(loaded by the superuser with COPY, setup only). It also reports the round trips each search
made, counted on the wire by the proxy, and the round-trip time the proxy actually gave
(``SELECT 1``; the proxy's timers add to the nominal delay).

Writes ``evals/bench/round-trips.json``. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.bench.latency_proxy import LatencyProxy  # noqa: E402
from evals.bench.runtime import (  # noqa: E402
    DATASETS,
    Principals,
    acting_as,
    display_path,
    given_or_throwaway,
    load_average,
    provenance,
    summary_ms,
)
from pyretrieve import Retriever, Scope  # noqa: E402

OUT = ROOT / "evals" / "bench" / "round-trips.json"
MODEL = "bench-384"
DIMENSION = 384
WORKSPACE = "rtt"
PROJECT = "docs"
PURPOSE = "bench"
MODES = ("hybrid", "lexical")


def _abstracts(datasets: Path, n: int) -> list[str]:
    path = datasets / "scifact" / "corpus.jsonl.gz"
    if not path.exists():
        rng = np.random.default_rng(1)
        words = [f"w{i}" for i in range(2000)]
        return [" ".join(rng.choice(words, 120)) for _ in range(n)]
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            out.append(f"{doc.get('title', '')}\n\n{doc['text']}".strip())
            if len(out) == n:
                break
    return out


def claims(datasets: Path) -> list[str]:
    """Every SciFact claim, in the order of ``queries.jsonl``."""
    with (datasets / "scifact" / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def _queries(datasets: Path) -> list[str]:
    if not (datasets / "scifact" / "queries.jsonl").exists():
        return ["w1 w2 w3", "w10 w20", "w5"]
    return claims(datasets)[:50]


def _vector(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIMENSION)
    return [float(x) for x in v / np.linalg.norm(v)]


def vector_text(vector: list[float]) -> str:
    """A vector as pgvector's text input."""
    return "[" + ",".join(map(repr, vector)) + "]"


def copy_scope(
    conn: psycopg.Connection[Any],
    workspace: str,
    project: str,
    bodies: list[str],
    rng: np.random.Generator,
) -> None:
    """``bodies`` as internal, active fragments of a scope, each with a random unit vector of
    ``MODEL`` drawn from ``rng``, by COPY (setup only: the superuser, the triggers run)."""
    ids = [uuid.uuid4() for _ in bodies]
    with conn.cursor() as cur:
        with cur.copy(
            "COPY pyretrieve.fragments (workspace_id, project_id, fragment_id, body,"
            " classification, state) FROM STDIN"
        ) as copy:
            for fid, body in zip(ids, bodies, strict=True):
                copy.write_row((workspace, project, fid, body, "internal", "active"))
        with cur.copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for fid, body in zip(ids, bodies, strict=True):
                digest = hashlib.sha256(body.encode("utf-8")).digest()
                copy.write_row((workspace, project, fid, MODEL, vector_text(_vector(rng)), digest))


def _setup(dsn: str, principals: Principals, bodies: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with acting_as(conn, principals.admin):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (WORKSPACE,))
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WORKSPACE, PROJECT))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
                (principals.reader, WORKSPACE, PROJECT, PURPOSE),
            )
            conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIMENSION))
        with conn.transaction():
            copy_scope(conn, WORKSPACE, PROJECT, bodies, np.random.default_rng(7))
        conn.execute("VACUUM (ANALYZE) pyretrieve.fragments")
        conn.execute("VACUUM (ANALYZE) pyretrieve.embeddings")


@contextlib.contextmanager
def loaded(
    dsn: str | None, tag: str, bodies: list[str]
) -> Iterator[tuple[str, Principals, dict[str, Any]]]:
    """A database (``dsn``, else a throwaway server) holding one scope of ``bodies`` (``_setup``):
    its URL, the run's principals and the provenance, taken before loading. The principals are
    dropped afterwards."""
    with given_or_throwaway(dsn) as url, psycopg.connect(url, autocommit=True) as conn:
        principals = Principals.create(conn, tag)
        try:
            facts = provenance(conn)
            _setup(url, principals, bodies)
            yield url, principals, facts
        finally:
            with contextlib.suppress(psycopg.Error):
                principals.drop(conn)


def _search(client: Retriever, mode: str, query: str, vector: list[float]) -> None:
    hybrid = mode == "hybrid"
    client.search(
        query,
        scope=Scope(workspace=WORKSPACE, project=PROJECT, purpose=PURPOSE),
        mode=mode,
        limit=10,
        candidate_limit=100,
        embedding=vector if hybrid else None,
        model=MODEL if hybrid else None,
    )


def _rtt_ms(proxy: LatencyProxy, dsn: str) -> float:
    with psycopg.connect(proxy.dsn(dsn), autocommit=True) as conn:
        times = []
        for _ in range(30):
            started = time.perf_counter()
            conn.execute("SELECT 1").fetchall()
            times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


def measure(
    dsn: str, reader: str, one_way: list[float], rounds: int, searches: int, datasets: Path
) -> dict[str, Any]:
    queries = _queries(datasets)
    rng = np.random.default_rng(3)
    vectors = [_vector(rng) for _ in queries]
    out: dict[str, Any] = {}
    for delay in one_way:
        with psycopg.connect(dsn) as probe:
            proxy = LatencyProxy.to_server(probe.info, one_way_ms=delay)
        with proxy:
            conns = {p: psycopg.connect(proxy.dsn(dsn), autocommit=True) for p in (True, False)}
            try:
                clients = {p: Retriever(c, principal=reader, pipeline=p) for p, c in conns.items()}
                times: dict[str, dict[bool, list[float]]] = {
                    m: {True: [], False: []} for m in MODES
                }
                turns: dict[str, dict[bool, int]] = {m: {} for m in MODES}
                for mode in MODES:
                    for p, client in clients.items():
                        _search(client, mode, queries[0], vectors[0])  # warm-up
                        before = proxy.turns
                        _search(client, mode, queries[0], vectors[0])
                        turns[mode][p] = proxy.turns - before
                for r in range(rounds):
                    order = [True, False] if r % 2 == 0 else [False, True]
                    for mode in MODES:
                        for p in order:
                            for i in range(searches):
                                q = (r * searches + i) % len(queries)
                                started = time.perf_counter()
                                _search(clients[p], mode, queries[q], vectors[q])
                                times[mode][p].append(time.perf_counter() - started)
                rtt = _rtt_ms(proxy, dsn)
            finally:
                for c in conns.values():
                    c.close()
        entry: dict[str, Any] = {"one_way_ms": delay, "measured_round_trip_ms": rtt}
        for mode in MODES:
            piped, plain = summary_ms(times[mode][True]), summary_ms(times[mode][False])
            entry[mode] = {
                "round_trips": {"pipeline": turns[mode][True], "one_by_one": turns[mode][False]},
                "pipeline": piped,
                "one_by_one": plain,
                "p50_ratio": round(float(piped["p50"]) / float(plain["p50"]), 3),
                "p50_saved_ms": round(float(plain["p50"]) - float(piped["p50"]), 3),
            }
        out[f"{delay}"] = entry
        print(
            f"one-way {delay} ms (round trip {rtt} ms): "
            + ", ".join(
                f"{m} {entry[m]['pipeline']['p50']} vs {entry[m]['one_by_one']['p50']} ms"
                f" ({entry[m]['round_trips']['pipeline']} vs"
                f" {entry[m]['round_trips']['one_by_one']} round trips)"
                for m in MODES
            ),
            file=sys.stderr,
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--one-way-ms", default="0,0.5,2")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    one_way = [float(x) for x in args.one_way_ms.split(",")]
    load_before = load_average()
    with loaded(args.dsn, "rtt", _abstracts(args.datasets, args.rows)) as (dsn, principals, info):
        results = measure(
            dsn, principals.reader, one_way, args.rounds, args.searches, args.datasets
        )
    result = {
        "benchmark": "round_trips",
        **info,
        "load_average_after": load_average(),
        "load_average_before": load_before,
        "settings": {
            "rows": args.rows,
            "rounds": args.rounds,
            "searches_per_round": args.searches,
            "limit": 10,
            "candidate_limit": 100,
            "modes": list(MODES),
            "proxy": "evals.bench.latency_proxy.LatencyProxy (asyncio, one thread)",
        },
        "results": results,
    }
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {display_path(args.out)}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
