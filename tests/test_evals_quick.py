"""The evaluation harnesses in --quick mode, so their code cannot rot.

Structure and sanity only (fields present, measures in [0, 1], latencies positive): timings
are never asserted here. Each harness runs in its own fresh database on the test server.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

pytest.importorskip("ir_measures", reason="the evals extra is not installed")

from evals.bench import (
    first_statistics,
    grant_lookups,
    hnsw_sweep,
    lexical_lengths,
    lexical_revisions,
    lexical_storage,
    maxscore,
    passages,
    request_cost,
    scale,
    search_revisions,
    second_wall,
    session_start,
    vector_index,
    vector_plans,
    vector_revisions,
    wall_parts,
)
from evals.bench import tools as tools_bench
from evals.bench.runtime import DATASETS
from evals.quality import cli as quality
from evals.quality import report, weights
from evals.tools import run as tools_run
from pyretrieve.tools import select as sel
from tests.conftest import Server, create_database, drop_database


@pytest.fixture
def fresh_dsn(server: Server, template_db: str) -> Iterator[str]:
    name = create_database(server, template_db)
    try:
        yield server.dsn(name)
    finally:
        drop_database(server, name)


@pytest.mark.skipif(
    not (DATASETS / "cranfield" / "beir_format").is_dir(), reason="Cranfield is not available"
)
def test_quality_quick(fresh_dsn: str, tmp_path: Path) -> None:
    data = quality.main(["--quick", "--dsn", fresh_dsn, "--out", str(tmp_path)])
    assert (tmp_path / "cranfield.json").exists()
    assert (tmp_path / "quality.md").read_text().startswith("# Retrieval quality")
    assert data["collection"]["judged_queries"] == 10
    run = data["runs"]["hash-ngram-v1"]
    assert run["commit"]
    assert run["server"]["schema_version"]
    assert run["ingest"]["inserted"] > 0
    for mode in ("lexical", "vector", "hybrid"):
        m = run["modes"][mode]
        for measure in ("nDCG@10", "R@100", "MRR@10"):
            assert 0.0 <= m[measure] <= 1.0
        assert m["latency_ms"]["n"] == 10
        assert m["latency_ms"]["p50"] > 0
    # The slice keeps every relevant document, so lexical search finds some of them.
    assert run["modes"]["lexical"]["R@100"] > 0
    assert run["modes"]["vector"]["semantic_status"] == {"used": 10}
    bar = data["bars"]["hash-ngram-v1"]
    assert isinstance(bar["hybrid_ge_best_leg_nDCG@10"]["holds"], bool)


def test_scale_quick(fresh_dsn: str) -> None:
    settings = scale.quick_settings(scale.Settings())
    settings.vector_index_above = 300  # the 400-row probe scope gets its own HNSW index
    result = scale.run(settings, fresh_dsn)
    assert result["load"]["table_rows"] == result["settings"]["fragments"]
    assert result["load"]["fragments"]["per_s"] > 0
    assert result["load"]["embeddings"]["rows"] > 0
    assert result["load"]["sizes"]["tables"]["embeddings"]["heap_mb"] > 0
    # The lexical index against GIN as loaded, and once VACUUM FULL has given back the load's
    # free space: never larger.
    gin = result["load"]["lexical_vs_gin"]
    assert gin["gin_mb"] > 0
    assert gin["repacked"]["tables"] == ["lexical_blocks", "lexical_pages", "lexical_tombstones"]
    assert 0 < gin["repacked"]["lexical_mb"] <= gin["lexical_mb"]
    assert "rewritten by VACUUM FULL" in scale.render(result)
    # The fractions' probe scopes and the 200-row one (2,000 fragments leave no room for a
    # 100,000-row scope).
    assert [x["rows"] for x in result["scopes"]] == [10, 20, 100, 400, scale.SMALL_SCOPE_ROWS]
    for scope in result["scopes"]:
        recall = scope["recall_at_100"]
        assert 0.0 <= recall["min"] <= recall["mean"] <= 1.0
        assert set(scope["methods"]) == set(scale.METHODS)
        for per_clients in scope["methods"].values():
            for summary in per_clients.values():
                assert summary["n"] > 0
                assert 0 < summary["p50"] <= summary["p95"] <= summary["p99"]
                assert summary["throughput_qps"] > 0
    stated = {t["target"] for t in result["targets"]}
    assert stated == set(scale.TARGETS.values()) - {scale.TARGETS["vector_100k"]}
    indexed = [x for x in result["scopes"] if x["vector_index"]]
    assert [x["rows"] for x in indexed] == [400]
    assert indexed[0]["vector_index"]["index"].startswith("embeddings_hnsw_s")
    assert indexed[0]["vector_index"]["build_seconds"] > 0
    # The scopes the maintenance chose: every one of at least 300 embeddings, the probe among them.
    chosen = result["load"]["vector_indexes"]["scopes"]
    assert indexed[0]["scope"] in chosen
    assert all(c["rows"] >= 300 for c in chosen.values())
    assert "Scope HNSW indexes" in scale.render(result)
    assert all(isinstance(t["met"], bool) for t in result["targets"])
    assert result["memory"]["python_peak_rss_mb"] > 0
    phases = result["memory"]["python_rss_mb_by_phase"]
    assert {"generate", "load fragments", "load embeddings"} <= set(phases)
    assert any(name.endswith("recall oracle") for name in phases)
    assert all(0 < p["start"] <= p["peak"] for p in phases.values())
    assert scale.render(result).startswith("# Performance at scale")


def test_the_naive_way_ranks_a_scope_read_in_chunks_as_it_ranks_it_whole() -> None:
    rng = np.random.default_rng(5)
    ids = list(range(1_000))
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    bodies = [" ".join(rng.choice(words, 4)) for _ in ids]
    matrix = rng.standard_normal((len(ids), 16)).astype(np.float32)
    vector = rng.standard_normal(16).astype(np.float32)
    whole = scale.naive_rank("beta gamma", vector, ids, bodies, matrix)
    chunks = [
        (ids[i : i + 77], bodies[i : i + 77], matrix[i : i + 77]) for i in range(0, 1_000, 77)
    ]
    assert len(whole) == scale.LIMIT
    assert scale.naive_rank_chunks("beta gamma", vector, chunks) == whole
    assert scale.naive_rank_chunks("beta gamma", vector, []) == []


def test_weight_cross_validation_scores_each_fold_at_a_weight_chosen_elsewhere() -> None:
    queries = [f"q{i}" for i in range(40)]
    folds = {q: weights.fold_of(q, 5) for q in queries}
    assert set(folds.values()) == set(range(5))
    # Weight 2.0 wins on every fold but fold 0, where it scores 0. Every training set holds
    # more winning folds than losing ones, so every fold, fold 0 included, gets 2.0, and
    # fold 0's held-out queries score 0.
    per_query = {
        "1.0": dict.fromkeys(queries, 0.5),
        "2.0": {q: 0.0 if folds[q] == 0 else 0.9 for q in queries},
    }
    result = weights.cross_validate(per_query, folds=5)
    assert result["chosen_lexical_weights"] == [2.0] * 5
    in_fold_0 = sum(1 for q in queries if folds[q] == 0)
    expected = round(0.9 * (len(queries) - in_fold_0) / len(queries), 4)
    assert result["nDCG@10"] == expected
    # A tie on the training folds goes to the weight nearest equal weights.
    tied = {"0.5": dict.fromkeys(queries, 0.3), "1.0": dict.fromkeys(queries, 0.3)}
    assert weights.cross_validate(tied)["chosen_lexical_weights"] == [1.0] * 5


def test_tool_weights_keep_equal_weights_unless_the_other_folds_clearly_beat_them() -> None:
    queries = [f"q{i}" for i in range(60)]
    flat = dict.fromkeys(queries, 0.5)
    # 3.0 is better on average by less than one standard error of the per-query differences
    # (it wins some queries by far, loses others): equal weights stay.
    noisy = {q: (0.9 if i % 3 == 0 else 0.32) for i, q in enumerate(queries)}
    ndcg = {w: flat for w in tools_run.LEXICAL_WEIGHTS} | {3.0: noisy}
    assert tools_run.best_weight(queries, ndcg) == 3.0
    assert tools_run.one_standard_error(queries, ndcg) == 1.0
    # Better on every query: the data say so clearly, and 3.0 is taken.
    ndcg[3.0] = dict.fromkeys(queries, 0.6)
    assert tools_run.one_standard_error(queries, ndcg) == 3.0
    # 2.0 and 0.5 lie equally near equal weights (by the log of the ratio); both are within
    # reach of the best (4.0), 1.0 is not: the better of the two is taken.
    ndcg = {w: dict.fromkeys(queries, 0.1) for w in tools_run.LEXICAL_WEIGHTS}
    ndcg[4.0] = {q: (0.72 if i % 2 else 0.5) for i, q in enumerate(queries)}
    ndcg[2.0] = {q: (0.5 if i % 2 else 0.7) for i, q in enumerate(queries)}
    ndcg[0.5] = {q: (0.49 if i % 2 else 0.7) for i, q in enumerate(queries)}
    assert tools_run.best_weight(queries, ndcg) == 4.0
    assert tools_run.one_standard_error(queries, ndcg) == 2.0
    # Each fold applies the rule to the other folds' queries alone.
    chosen, report = tools_run.choose_weights(queries, ndcg)
    for fold in range(tools_run.FOLDS):
        train = [q for q in queries if tools_run.fold_of(q) != fold]
        assert chosen[fold] == tools_run.one_standard_error(train, ndcg)
        assert report["per_fold"][str(fold)] == chosen[fold]
        assert report["best_per_fold"][str(fold)] == tools_run.best_weight(train, ndcg)
    assert set(chosen.values()) <= {2.0, 4.0}


def test_the_quality_report_compares_cross_validated_fusion_with_the_better_leg() -> None:
    modes = {
        m: {"nDCG@10": v, "R@100": 1.0, "MRR@10": v, "latency_ms": {}}
        for m, v in (("lexical", 0.30), ("vector", 0.20), ("hybrid", 0.25))
    }
    quality_run = {
        "dataset": "toy",
        "collection": {},
        "runs": {
            "m": {
                "modes": modes,
                "commit": "0" * 40,
                "date": "2026-01-01T00:00:00+00:00",
                "server": {"schema_version": "0003", "version": "18", "pgvector": "0.8"},
                "machine": {"cpu_count": 1, "cpu": "cpu"},
            }
        },
        "bars": {},
    }
    sweep = {
        "benchmark": "weighted RRF sweep",
        "dataset": "toy",
        "model": "m",
        "results": {"1.0": {"nDCG@10": 0.25}, "8.0": {"nDCG@10": 0.31}},
        "best_lexical_weight": 8.0,
        "equal_weights_nDCG@10": 0.25,
        "cross_validated": {"nDCG@10": 0.305, "chosen_lexical_weights": [8.0, 8.0, 1.0]},
    }
    text = report.render([quality_run], [sweep])
    row = next(line for line in text.splitlines() if line.startswith("| toy | m | 0.250"))
    assert "0.310 at 8" in row
    assert "0.305 (8, 8, 1)" in row
    assert "| 0.300 |" in row
    assert row.endswith("| holds |")
    sweep["cross_validated"] = {"nDCG@10": 0.29, "chosen_lexical_weights": [1.0]}
    text = report.render([quality_run], [sweep])
    assert "| 0.300 | **missed** |" in text


def test_the_default_fusion_is_the_one_that_never_loses_to_the_better_leg_on_more_collections() -> (
    None
):
    from evals.quality import fusion

    def entry(lexical: float, vector: float, rrf: float, dbsf: float) -> dict[str, object]:
        return {
            "lexical": {"nDCG@10": lexical},
            "vector": {"nDCG@10": vector},
            "better_leg": "lexical" if lexical >= vector else "vector",
            "rrf": {"pooled_cv_nDCG@10": rrf},
            "dbsf": {"pooled_cv_nDCG@10": dbsf},
        }

    collections = {
        "a": {"m": entry(0.5, 0.4, 0.55, 0.56)},
        "b": {"m": entry(0.3, 0.2, 0.28, 0.31)},  # RRF loses to lexical here, DBSF does not
    }
    chosen = fusion.choose("m", collections)
    assert chosen["fusion"] == "dbsf"
    assert chosen["collections_at_or_above_the_better_leg"] == {"rrf": ["a"], "dbsf": ["a", "b"]}
    # A tie keeps canonical RRF.
    collections["b"]["m"] = entry(0.3, 0.2, 0.31, 0.31)
    assert fusion.choose("m", collections)["fusion"] == "rrf"


def test_the_paired_randomization_test() -> None:
    from evals.quality.stats import paired_permutation

    a = [0.1 * (i % 7) for i in range(200)]
    assert paired_permutation(a, a) == 1.0
    better = [x + 0.05 for x in a]
    assert paired_permutation(better, a) < 0.001
    noise = [x + (0.05 if i % 2 else -0.05) for i, x in enumerate(a)]
    assert paired_permutation(noise, a) > 0.5
    # The same inputs give the same p-value (a fixed seed).
    assert paired_permutation(better[:20], a[:20]) == paired_permutation(better[:20], a[:20])


def test_vector_index_quick(fresh_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "vector-index.json"
    args = ["--sizes", "300,600", "--queries", "4", "--foreign-rows", "200"]
    result = vector_index.main([*args, "--dsn", fresh_dsn, "--out", str(out)])
    assert out.exists()
    assert [s["rows"] for s in result["scopes"]] == [300, 600]
    assert result["settings"]["search_settings"]["hnsw.ef_search"]
    for scope in result["scopes"]:
        for leg in ("exact", "hnsw"):
            assert scope[leg]["n"] == 4
            assert 0 < scope[leg]["p50"] <= scope[leg]["p95"]
        recall = scope["recall_at_100"]
        assert 0.0 < recall["min"] <= recall["mean"] <= 1.0
        assert scope["found_distances_identical_to_exact"] is True
        assert scope["index"]["name"].startswith("embeddings_hnsw_s")


def test_vector_index_quick_on_real_passages(fresh_dsn: str, tmp_path: Path) -> None:
    """The same bench over passages of the shared collections embedded by the real model."""
    out = tmp_path / "vector-index-passages.json"
    args = ["--corpus", "passages", "--passages", "500", "--sizes", "300", "--queries", "3"]
    result = vector_index.main(
        [*args, "--foreign-rows", "100", "--dsn", fresh_dsn, "--out", str(out)]
    )
    assert result["settings"]["corpus"] == "passages"
    assert result["settings"]["passages"] == 500
    assert result["settings"]["model"] == passages.MODEL
    (scope,) = result["scopes"]
    assert scope["exact"]["n"] == scope["hnsw"]["n"] == 3
    assert 0.0 < scope["recall_at_100"]["min"] <= 1.0
    assert scope["found_distances_identical_to_exact"] is True


def test_tools_bench_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """Two small sizes: the API load, then the bulk fill, each measured exact and indexed."""
    out = tmp_path / "tools.json"
    args = ["--sizes", "40,90", "--queries", "2", "--bulk-above", "40"]
    assert (
        tools_bench.main(
            [*args, "--vector-index-above", "30", "--dsn", fresh_dsn, "--out", str(out)]
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert result["not_measured"] == []
    assert [result["sizes"][k]["load"]["how"] for k in ("40", "90")] == ["api", "bulk"]
    for figures in result["sizes"].values():
        for method in ("client.discover", "sql.discover_tools", "schema_loading", "naive"):
            assert figures[method]["n"] == 2
            assert figures["with_vector_index"][method]["n"] == 2
        assert figures["with_vector_index"]["build_seconds"] >= 0


@pytest.mark.parametrize("corpus", ["scifact", "bfcl-tools"])
def test_maxscore_quick(corpus: str, fresh_dsn: str, tmp_path: Path) -> None:
    """MaxScore in SQL returns the leg's rows, call for call."""
    out = tmp_path / f"{corpus}.json"
    args = ["--corpus", corpus, "--rows", "300", "--copies", "1", "--queries", "12"]
    result = maxscore.main([*args, "--rounds", "1", "--dsn", fresh_dsn, "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["calls_with_different_rows"] == 0
    assert result["unpruned"]["n"] == result["maxscore"]["n"] == 12
    skippable = result["skippable"]
    assert skippable["queries_with_k_matches"] > 0
    ideal = skippable["essential_postings_share_at_true_kth_score"]["mean"]
    assert 0.0 < ideal <= skippable["essential_postings_share_at_theta"]["mean"] <= 1.0


def test_maxscore_refuses_a_leg_it_cannot_rewrite() -> None:
    with pytest.raises(SystemExit, match="no single"):
        maxscore.pruned_statement("WITH ql AS MATERIALIZED (SELECT 1) SELECT 1")


def test_session_start_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """Both arms measured at every call position, and the functions left as installed."""
    out = tmp_path / "session-start.json"
    args = ["--rows", "200", "--sessions", "4", "--calls", "3", "--dsn", fresh_dsn]
    result = session_start.main([*args, "--out", str(out)])
    assert json.loads(out.read_text()) == result
    for arm in session_start.ARMS:
        for kind in session_start.KINDS:
            assert len(result[arm][kind]["p50_ms_by_call"]) == 3
            assert result[arm][kind]["session_sum_of_p50s_ms"] > 0
    with psycopg.connect(fresh_dsn) as conn:
        configs = conn.execute(
            "SELECT coalesce(proconfig, '{}') FROM pg_proc"
            " WHERE pronamespace = 'pyretrieve'::regnamespace"
            "   AND proname IN ('lexical_candidates', 'search')"
        ).fetchall()
    assert [("plan_cache_mode=force_generic_plan" in c) for (c,) in configs] == [True, True]


def test_second_wall_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """Each read function and its twin without RLS return the same rows, and the twins go."""
    out = tmp_path / "second-wall.json"
    args = ["--rows", "60,150", "--queries", "6", "--dsn", fresh_dsn, "--out", str(out)]
    result = second_wall.main(args)
    assert json.loads(out.read_text()) == result
    assert sorted(result["scopes"]) == ["150", "60"]
    for scope in result["scopes"].values():
        assert sorted(scope) == sorted(second_wall.FUNCTIONS)
        for figures in scope.values():
            for arm in second_wall.ARMS:
                assert figures[f"{arm}_ms"]["n"] == 6
            low, high = figures["installed_over_twin"]["ci95"]
            assert 0 < low <= figures["installed_over_twin"]["median"] <= high
    with psycopg.connect(fresh_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (second_wall.TWINS,)
        ).fetchone()
    assert left == (0,)


def test_second_wall_refuses_a_function_it_cannot_copy(fresh_dsn: str) -> None:
    """A function that is not the schema's is not copied, and the scratch schema goes."""
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        odd = {"x": "pg_catalog.lower(text)"}
        with pytest.raises(SystemExit, match="cannot copy"), second_wall.copies(conn, "x", odd):
            pass
        gone = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (second_wall.TWINS,)
        ).fetchone()
    assert gone == (0,)


def test_vector_plans_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """The vector leg with custom plans returns the installed one's rows, at two sizes, one
    of them past the collection's end (repeated abstracts)."""
    out = tmp_path / "vector-plans.json"
    args = ["--rows", "40,5300", "--queries", "4", "--dsn", fresh_dsn, "--out", str(out)]
    result = vector_plans.main(args)
    assert json.loads(out.read_text()) == result
    assert sorted(result["scopes"]) == ["40", "5300"]
    for figures in result["scopes"].values():
        assert figures["custom_ms"]["n"] == figures["installed_ms"]["n"] == 4
        low, high = figures["installed_over_custom"]["ci95"]
        assert 0 < low <= figures["installed_over_custom"]["median"] <= high


def test_vector_plans_refuse_a_definition_without_the_settings() -> None:
    with pytest.raises(SystemExit, match="does not pin"):
        vector_plans.custom_plans("CREATE FUNCTION x() ... SET plan_cache_mode TO 'auto'\n")
    assert "force_custom_plan" in vector_plans.custom_plans(f"head\n{vector_plans.GENERIC}AS")


def test_search_revisions_quick(server: Server, tmp_path: Path) -> None:
    """Two scopes, each query in both modes against 0030 and 0031: identical results, and the
    databases and the roles gone afterwards."""
    out = tmp_path / "search-revisions.json"
    args = ["--rows", "20,60", "--queries", "3", "--rounds", "1", "--out", str(out)]
    args += ["--target", "pyretrieve_0031"]
    result = search_revisions.main([*args, "--server-dsn", server.dsn("postgres")])
    assert json.loads(out.read_text()) == result
    assert result["settings"]["baseline"] == "pyretrieve_0030"
    assert result["settings"]["target"] == "pyretrieve_0031"
    for modes in result["scopes"].values():
        for figures in modes.values():
            assert figures["identical_results"] == 3
            assert figures["baseline"]["n"] == figures["current"]["n"] == 3
            paired = figures["paired_ratio_current_to_baseline"]
            assert 0 < paired["ci95"][0] <= paired["median"] <= paired["ci95"][1]
    with psycopg.connect(server.dsn("postgres")) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM pg_database WHERE datname LIKE 'search_rev_%%'),"
            " (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pyretrieve_srev_%%')"
        ).fetchone()
    assert left == (0, 0)


def test_grant_lookups_quick(server: Server, tmp_path: Path) -> None:
    """Against 0043, with no other principal and with 20 granted the project: each call reads
    as many grant rows at the head whatever the crowd, and more at 0043 with the crowd, and
    fewer rows of the cluster's roles than the crowd holds; the databases and roles gone
    afterwards."""
    out = tmp_path / "grant-lookups.json"
    args = ["--crowds", "0,20", "--calls", "4", "--out", str(out)]
    result = grant_lookups.main([*args, "--server-dsn", server.dsn("postgres")])
    assert json.loads(out.read_text()) == result
    crowds = result["crowds"]
    for call in ("authorize", "put_fragment"):
        alone, crowded = crowds["0"][call], crowds["20"][call]
        assert crowded["current"]["grant_rows_read"] == alone["current"]["grant_rows_read"]
        assert min(crowded["baseline"]["grant_rows_read"]) > max(
            alone["baseline"]["grant_rows_read"]
        )
        assert crowded["current"]["n"] == crowded["baseline"]["n"] == 4
        # The baseline scans the cluster's roles, 20 crowd roles among them; the head does not.
        assert max(crowded["current"]["role_rows_read"]) < 20
        assert min(crowded["baseline"]["role_rows_read"]) >= 20
    with psycopg.connect(server.dsn("postgres")) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM pg_database WHERE datname LIKE 'grant_lookups_%%'),"
            " (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pyretrieve_glk_%%')"
        ).fetchone()
    assert left == (0, 0)


def test_first_statistics_quick(server: Server, tmp_path: Path) -> None:
    """Against 0046, 1,200 records with autovacuum off: the head's load analysed the fragments
    and the baseline's did not; the baseline's writers read the scope whole and the head's read
    by key; the databases gone afterwards."""
    out = tmp_path / "first-statistics.json"
    args = ["--n", "1200", "--batch", "600", "--searches", "10", "--out", str(out)]
    result = first_statistics.main([*args, "--dsn", server.dsn("postgres")])
    assert json.loads(out.read_text()) == result
    load, calls = result["load"], result["calls"]
    assert load["current"]["fragments"] == load["baseline"]["fragments"] == 1200
    assert load["current"]["analysed_after_load"]["fragments"] == 1
    assert load["baseline"]["analysed_at_end"]["fragments"] == 0
    for call in ("put_duplicate", "retract"):
        assert calls["current"][call]["fragment_rows_read"]["max"] <= 12
        assert calls["baseline"][call]["fragment_rows_read"]["median"] >= 1200
    assert calls["current"]["search"]["ms"]["n"] == 10
    with psycopg.connect(server.dsn("postgres")) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'pyretrieve_first_%%'"
        ).fetchone()
    assert left == (0,)


def test_request_cost_quick(fresh_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "request-cost.json"
    args = ["--rows", "30", "--searches", "3", "--rounds", "1", "--out", str(out)]
    result = request_cost.main([*args, "--dsn", fresh_dsn])
    assert json.loads(out.read_text()) == result
    assert list(result["statements"]) == list(request_cost.STEPS)
    for figures in (*result["statements"].values(), result["statements_total"], result["client"]):
        assert figures["n"] == 3
        assert 0 < figures["p50"] <= figures["max"]
    assert result["statements_sum_of_p50s"] > 0


def test_lexical_storage_quick(fresh_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "lexical-storage.json"
    args = ["--quick", "--gin-during-load", "--dsn", fresh_dsn, "--out", str(out)]
    result = lexical_storage.main(args)
    assert json.loads(out.read_text()) == result
    assert result["load"]["rows"] == result["load"]["planned"] > 0
    assert result["load"]["vocabulary"]  # which words the text was drawn from
    assert result["rows"]["postings"] > result["rows"]["lexical_blocks"] > 0
    assert result["gin"]["mb"] > 0
    # The GIN index the load maintained was measured, compared with, and dropped.
    maintained = result["maintained_gin"]
    assert maintained["as_loaded_mb"] > 0
    assert maintained["vacuumed_mb"] > 0
    assert result["as_loaded"]["over_maintained_gin"] == round(
        result["as_loaded"]["total_mb"] / maintained["as_loaded_mb"], 2
    )
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute(
            "SELECT to_regclass(%s)", (f"pyretrieve.{lexical_storage.MAINTAINED_GIN}",)
        ).fetchone() == (None,)
    stages = [result[k] for k in ("as_loaded", "vacuumed", "repacked")]
    for stage in stages:
        assert {"lexical_blocks", "lexical_blocks_pkey", "fragments_docno_key"} <= set(
            stage["relations"]
        )
        parts = sum(r["mb"] + r.get("toast_mb", 0) for r in stage["relations"].values())
        assert abs(parts - stage["total_mb"]) < 0.05 * len(stage["relations"])
    # The repacked bytes by scope size account for every posting, in pages and in blocks.
    by_size = result["repacked"]["by_scope_size"]
    assert sum(r["postings"] for r in by_size) == result["rows"]["postings"]
    assert (
        sum(r["rows"] for r in by_size if r["kind"] == "blocks") == result["rows"]["lexical_blocks"]
    )
    assert all(r["bytes_per_posting"] > 0 for r in by_size)
    # VACUUM FULL never leaves more than a load or a plain VACUUM (which may add the free space
    # and visibility maps' forks).
    assert stages[2]["total_mb"] <= min(stages[0]["total_mb"], stages[1]["total_mb"])


def test_hnsw_sweep_quick(fresh_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    args = ["--corpus", "synthetic", "--rows", "600", "--queries", "3", "--options", "8:32,16:64"]
    modes = ["--iterative-scan", "strict_order,relaxed_order", "--fetched", "132,300"]
    result = hnsw_sweep.main(
        [*args, *modes, "--ef-search", "40,200", "--dsn", fresh_dsn, "--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    settings = [
        (r["m"], r["ef_construction"], r["ef_search"], r["iterative_scan"], r["fetched"])
        for r in result["results"]
    ]
    assert settings == [
        (m, c, ef, mode, fetched)
        for m, c in ((8, 32), (16, 64))
        for ef in (40, 200)
        for mode in ("strict_order", "relaxed_order")
        for fetched in (132, 300)
    ]
    for r in result["results"]:
        assert 0.0 < r["recall_at_100"]["min"] <= r["recall_at_100"]["mean"] <= 1.0
        assert r["query"]["n"] == 3
        assert r["build_seconds"] >= 0
        assert r["index_mb"] > 0
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT to_regclass('hnsw_sweep_rows')").fetchone() == (None,)


def test_passages_are_the_body_its_sentences_and_their_pairs() -> None:
    """Sentences shorter than MIN_CHARS ("Short.", "Third?") are dropped, not glued on."""
    first, second = "The first sentence is long enough.", "The second one is long as well!"
    body = f"Short. {first} {second} Third?"
    assert list(passages.chunks(body)) == [body, first, second, f"{first} {second}"]
    one = "One sentence only, long enough to count."
    assert list(passages.chunks(one)) == [one]


def _lexrev_scope(dsn: str) -> None:
    """30 fragments in lexrev/docs, written through the API."""
    import psycopg

    from tests.conftest import role

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pyretrieve.create_workspace('lexrev')")
        conn.execute("SELECT pyretrieve.create_project('lexrev', 'docs')")
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'lexrev', 'docs', 'put', 'restricted')",
            (role("wally"),),
        )
        with conn.transaction():
            conn.execute(f'SET LOCAL ROLE "{role("wally")}"')
            for i in range(30):
                conn.execute(
                    "SELECT pyretrieve.put_fragment('lexrev', 'docs', %s)",
                    (f"document {i} about rotating credentials and keys number {i % 7}",),
                )


def test_lexical_revisions_against_another_database_quick(
    server: Server, template_db: str, tmp_path: Path
) -> None:
    """The comparison across two databases holding the same data: both legs agree row for
    row, the GIN index it measured against is gone, and the reader it made is gone from the
    server and from both databases' grants."""
    import psycopg

    first, second = create_database(server, template_db), None
    try:
        _lexrev_scope(server.dsn(first))
        second = create_database(server, first)  # the same data, as a template copy
        queries = tmp_path / "queries.jsonl"
        queries.write_text('{"_id": "1", "text": "rotating keys"}\n{"_id": "2", "text": "x"}\n')
        result = lexical_revisions.main(
            [
                *("--dsn", server.dsn(second), "--baseline-dsn", server.dsn(first)),
                *("--workspace", "lexrev", "--project", "docs", "--queries", str(queries)),
                *("--out", str(tmp_path / "out.json"), "--gin"),
            ]
        )
        assert result["identical_results"] == 2
        assert result["baseline"]["n"] == result["current"]["n"] == 2
        assert result["gin_index_bytes"] > 0
        assert result["current_lexical_bytes"] == sum(result["postings_bytes"]["current"].values())
        assert result["current_to_gin"] == round(
            result["current_lexical_bytes"] / result["gin_index_bytes"], 2
        )
        assert result["settings"]["baseline"].startswith(
            f"the same data at the schema installed in database {first}"
        )
        for side in ("baseline", "current"):  # the same lexical index in both databases
            assert result["postings_bytes"][side]["lexical_blocks"] > 0
            assert set(result["postings_bytes"][side]) == {
                "lexical_blocks", "lexical_blocks_pkey", "lexical_blocks_partial_idx",
                "lexical_pages", "lexical_pages_pkey",
                "lexical_tombstones", "lexical_tombstones_pkey", "fragments_docno_key",
            }  # fmt: skip
        for name in (first, second):
            with psycopg.connect(server.dsn(name)) as conn:
                grants = conn.execute(
                    "SELECT count(*) FROM pyretrieve.grants WHERE purpose = 'compare'"
                ).fetchone()
                readers = conn.execute(
                    "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pyretrieve_lexrev_%'"
                ).fetchone()
                gin = conn.execute(
                    "SELECT to_regclass('pyretrieve.pyretrieve_bench_gin')"
                ).fetchone()
            assert (grants, readers, gin) == ((0,), (0,), (None,))
    finally:
        for name in (second, first):
            if name is not None:
                drop_database(server, name)


def test_lexical_revisions_by_content_compares_databases_loaded_apart(
    server: Server, template_db: str, tmp_path: Path
) -> None:
    """Two databases each loaded by its own writes hold the same texts under other ids: the
    whole-row comparison stops at the first query, and ``--by-content`` (rank, digest, score,
    terms) finds every query the same and says what it compared."""
    first, second = create_database(server, template_db), None
    try:
        second = create_database(server, template_db)
        for name in (first, second):
            _lexrev_scope(server.dsn(name))
        queries = tmp_path / "queries.jsonl"
        queries.write_text(
            '{"_id": "1", "text": "rotating keys"}\n{"_id": "2", "text": "number"}\n'
        )
        argv = [
            *("--dsn", server.dsn(second), "--baseline-dsn", server.dsn(first)),
            *("--workspace", "lexrev", "--project", "docs", "--queries", str(queries)),
            *("--out", str(tmp_path / "out.json")),
        ]
        with pytest.raises(SystemExit, match="query 0: the revisions return different"):
            lexical_revisions.main(argv)
        result = lexical_revisions.main([*argv, "--by-content"])
        assert result["identical_results"] == 2
        assert result["current"]["n"] == 2
        assert result["settings"]["compared"].startswith("rank, content digest, score and terms")
    finally:
        for name in (second, first):
            if name is not None:
                drop_database(server, name)


def test_lexical_revisions_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """The revision comparison on a small scope: both revisions' rows agree, and it cleans up."""
    import psycopg

    _lexrev_scope(fresh_dsn)
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "1", "text": "rotating keys"}\n{"_id": "2", "text": "number 3"}\n')
    out = tmp_path / "lexical-revisions.json"
    result = lexical_revisions.main(
        [
            "--dsn",
            fresh_dsn,
            "--workspace",
            "lexrev",
            "--project",
            "docs",
            "--queries",
            str(queries),
            "--baseline",
            "HEAD",
            "--out",
            str(out),
        ]
    )
    assert out.exists()
    assert result["identical_results"] == 2
    assert result["baseline"]["n"] == result["current"]["n"] == 2
    with psycopg.connect(fresh_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE proname = %s", (lexical_revisions.BASELINE_NAME,)
        ).fetchone()
    assert left == (0,)


def test_vector_revisions_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """The vector leg's revision comparison on a small scope: both revisions' rows agree at
    every limit, and the baseline function and the reader it made are gone afterwards."""
    from pyretrieve.embedders.hashing import HashNgramEmbedder
    from pyretrieve.vectors import canonical_embedding, to_pgvector_text
    from tests.conftest import role

    _lexrev_scope(fresh_dsn)
    embedder = HashNgramEmbedder()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pyretrieve.register_model(%s, %s)", (embedder.model_id, embedder.dimension)
        )
        rows = conn.execute(
            "SELECT fragment_id, body FROM pyretrieve.fragments WHERE workspace_id = 'lexrev'"
        ).fetchall()
        with conn.transaction():
            conn.execute(f'SET LOCAL ROLE "{role("wally")}"')
            for fid, body in rows:
                vector = canonical_embedding(embedder.embed_documents([body])[0])
                conn.execute(
                    "SELECT pyretrieve.put_embedding('lexrev', 'docs', %s, %s,"
                    " %s::public.vector, %s)",
                    (fid, embedder.model_id, to_pgvector_text(vector),
                     hashlib.sha256(body.encode()).digest()),
                )  # fmt: skip
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "1", "text": "rotating keys"}\n{"_id": "2", "text": "number 3"}\n')
    out = tmp_path / "vector-revisions.json"
    result = vector_revisions.main(
        [
            *("--dsn", fresh_dsn, "--workspace", "lexrev", "--project", "docs"),
            *("--queries", str(queries), "--baseline", "HEAD", "--limits", "10,3"),
            *("--out", str(out)),
        ]
    )
    assert json.loads(out.read_text())["identical_results"] == 2
    assert result["baseline"]["n"] == result["current"]["n"] == 2
    assert result["settings"]["scope_embeddings"] == len(rows) == 30
    with psycopg.connect(fresh_dsn) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM pg_proc WHERE proname = %s),"
            " (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pyretrieve_vecrev_%%'),"
            " (SELECT count(*) FROM pyretrieve.grants WHERE purpose = 'compare')",
            (vector_revisions.BASELINE_NAME,),
        ).fetchone()
    assert left == (0, 0, 0)


def test_ingest_revisions_quick(server: Server, template_db: str, tmp_path: Path) -> None:
    """The schema comparison on a few records: both databases write every record each round,
    the figures are per 1,000 fragments, and the two databases it made are gone."""
    import psycopg

    from evals.bench import ingest_revisions

    out = tmp_path / "ingest-revisions.json"
    args = ["--dsn", server.admin_dsn, "--n", "20", "--rounds", "2", "--out", str(out)]
    result = ingest_revisions.main([*args, "--baseline", "pyretrieve_0016"])
    assert out.exists()
    for side in ("baseline", "current"):
        assert [r["fragments"] for r in result["runs"][side]] == [20, 20]
        assert result["median"][side]["wall_s_per_1000"] > 0
        runs = result["runs"][side]
        if all(r["server_cpu_s"] is not None for r in runs):
            expected = sum(r["server_cpu_s"] for r in runs) / sum(r["fragments"] for r in runs)
            assert result["total"][side] == round(expected * 1000, 4)
    assert result["settings"]["baseline"] == "pyretrieve_0016"
    with psycopg.connect(server.admin_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'pyretrieve_ingrev_%'"
        ).fetchone()
    assert left == (0,)


def test_lexical_lengths_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """Each query cut to 1, 2 and 4+ lexemes: every length is timed, and the share of postings
    read grows with the query (the leg reads every posting of each of its terms)."""
    _lexrev_scope(fresh_dsn)
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"_id": "1", "text": "the rotating keys of every document about credentials"}\n'
        '{"_id": "2", "text": "keys"}\n'
    )
    result = lexical_lengths.main(
        [
            *("--dsn", fresh_dsn, "--workspace", "lexrev", "--project", "docs"),
            *("--queries", str(queries), "--lengths", "1,2,4", "--rounds", "1"),
            *("--out", str(tmp_path / "out.json")),
        ]
    )
    by = result["by_length"]
    assert [by[k]["queries"] for k in ("1", "2", "4+")] == [2, 1, 1]
    assert all(by[k]["n"] == by[k]["queries"] and by[k]["p50"] > 0 for k in by)
    shares = [by[k]["postings_read_share_mean"] for k in ("1", "2", "4+")]
    assert 0 < shares[0] < shares[1] < shares[2] <= 1
    assert result["settings"]["scope_postings"] > 0


def test_ranker_quick(tmp_path: Path) -> None:
    """This tree's ranker against HEAD's, one round each: both children ran on the same
    synthetic input, ranked it the same, and cut it at the limit."""
    from evals.bench import ranker

    out = tmp_path / "ranker.json"
    result = ranker.main(
        ["--rounds", "2", "--iterations", "3", "--candidates", "20", "--out", str(out)]
    )
    assert out.exists()
    assert result["settings"]["input"] == {"lexical": 20, "vector": 20, "records": 31}
    assert result["same_result"] is True
    assert result["results_and_omissions"] == [ranker.LIMIT, 31 - ranker.LIMIT]
    for side in ("current", "baseline"):
        assert len(result["results"][side]["per_round_rank_ms"]) == 2
        assert result["results"][side]["rank_p50_ms"] > 0
        assert result["results"][side]["rank_cpu_p50_ms"] > 0
    assert result["current_over_baseline"]["of_cpu_p50s"] > 0
    assert len(result["baseline"]["commit"]) == 40


def test_the_ranker_bench_input_passes_every_check_of_the_ranker() -> None:
    """The synthetic rows are what the database would return: the strict ranker accepts them
    (a row it refused would raise) and every record is either a result or an omission."""
    from evals.bench import ranker
    from pyretrieve import ranking
    from pyretrieve.types import SemanticStatus

    data = ranker.make_input(candidates=30, overlap=0.5, seed=3)
    result = ranking.rank(**data["rank"], semantic=SemanticStatus.used({"model": "bench"}))
    assert len(result.results) + len(result.omissions) == data["shape"]["records"] == 45


def test_round_trips_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """The pipelined client against statements one by one behind a proxy that delays each
    chunk: both timed, and the round trips counted on the wire."""
    from evals.bench import round_trips

    out = tmp_path / "round-trips.json"
    result = round_trips.main(
        [
            *("--dsn", fresh_dsn, "--one-way-ms", "0.5", "--rounds", "1", "--searches", "2"),
            *("--rows", "30", "--out", str(out)),
        ]
    )
    assert out.exists()
    entry = result["results"]["0.5"]
    assert entry["hybrid"]["round_trips"] == {"pipeline": 5, "one_by_one": 11}
    assert entry["lexical"]["round_trips"] == {"pipeline": 4, "one_by_one": 7}
    assert entry["measured_round_trip_ms"] >= 1.0
    for mode in ("hybrid", "lexical"):
        assert entry[mode]["pipeline"]["n"] == entry[mode]["one_by_one"]["n"] == 2


def test_similar_tool_false_positives_count_each_rule_and_not_a_gold_tools_variant() -> None:
    """A contradicting write tool counts for operation_contradiction; a write tool of the asked
    family that is another tool (by title) counts for no_shared_entity; a same-titled variant
    of the gold tool (BFCL holds many) is neither."""

    def scored(name: str, family: str, rank: int) -> sel.Scored:
        c = sel.Candidate(uuid.uuid4(), name, family, 1, rank, 1.0, rank, rank, 0, frozenset())
        return sel.Scored(c, rank, 1.0, 1.0, ())

    coll = {
        "titles": {"d1": "delete_user", "d2": "delete_user", "d3": "delete_file",
                   "d4": "create_user", "d5": "get_user"},
        "strict": {"q": {"d1": 1}},
        "queries": {"q": "delete the user bob"},
    }  # fmt: skip
    before = {"q": [scored(d, f, i) for i, (d, f) in enumerate(
        [("d2", "delete"), ("d3", "delete"), ("d4", "create"), ("d5", "get"), ("d1", "delete")], 1
    )]}  # fmt: skip
    after = {"q": [scored("d1", "delete", 1), scored("d2", "delete", 2), scored("d5", "get", 3)]}
    got = tools_run.similar(after, before, coll)
    assert got["queries"] == 1
    assert got["before"] == {
        "contradicting_in_top5_per_query": 1.0,
        "contradicting_at_rank1": 0.0,
        "same_family_other_tool_in_top5_per_query": 1.0,
        "recall@5": 1.0,
    }
    assert got["after"]["contradicting_in_top5_per_query"] == 0.0
    assert got["after"]["same_family_other_tool_in_top5_per_query"] == 0.0


def _read_policy_texts(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT polname, pg_get_expr(polqual, polrelid) FROM pg_policy"
            " WHERE polcmd = 'r' ORDER BY polname"
        ).fetchall()
    return [(name, text) for name, text in rows]


def test_wall_parts_quick(fresh_dsn: str, tmp_path: Path) -> None:
    """Every form of the read policies returns the installed functions' rows, and each form's
    policies are put back as installed."""
    before = _read_policy_texts(fresh_dsn)
    out = tmp_path / "wall-parts.json"
    args = ["--rows", "60", "--queries", "4", "--dsn", fresh_dsn, "--out", str(out)]
    result = wall_parts.main(args)
    assert json.loads(out.read_text()) == result
    assert list(result["forms"]) == ["installed", "scope", "constant", "none"]
    for form in result["forms"].values():
        assert sorted(form["60"]) == sorted(second_wall.FUNCTIONS)
        for figures in form["60"].values():
            assert figures["installed_ms"]["n"] == figures["twin_ms"]["n"] == 4
    assert _read_policy_texts(fresh_dsn) == before


def test_wall_parts_puts_the_policies_back_after_a_failure(fresh_dsn: str) -> None:
    """A form that fails part-way leaves the installed policies, not its own."""
    before = _read_policy_texts(fresh_dsn)
    inside: list[tuple[str, str]] = []

    def fail_part_way() -> None:
        with wall_parts.policies(fresh_dsn, "true"):
            inside.extend(_read_policy_texts(fresh_dsn))
            raise RuntimeError("part-way")

    with pytest.raises(RuntimeError):
        fail_part_way()
    changed = {name: text for name, text in inside if text != dict(before)[name]}
    assert sorted(changed) == sorted(f"{table}_read" for table in wall_parts.TABLES)
    assert set(changed.values()) == {"true"}
    assert _read_policy_texts(fresh_dsn) == before
