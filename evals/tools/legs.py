"""Each leg's own ranking per query, captured once through ``Retriever.search``, and discovery
re-played from it offline.

Choosing an RRF weight or a K policy by cross-validation needs many variants of the same
discovery. Running each variant through the database would take hours, so the evaluation
captures the lexical and the vector leg once per query (their top 100 each, the candidate depth
discovery uses) and re-plays discovery in Python with the ranker's own arithmetic
(``pyretrieve.ranking.rrf_contribution``, ``fuse``, ``ideal_score``; freshness is 1.0 because
the eval grant has no ``max_age``), the ranker's total order (final score, RRF score, content
digest, fragment id) and the pure selector (``pyretrieve.tools.select``). ``run.py`` then runs
the real ``Retriever.discover_tools`` with the chosen weights and checks that every query's
re-played ranking is the system's, tool for tool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from pyretrieve import Retriever, Scope, ranking
from pyretrieve.tools import select as sel
from pyretrieve.types import Weights

DEPTH = 100  # candidates per leg, as discovery asks for


@dataclass(frozen=True, slots=True)
class Hit:
    fragment_id: str
    digest: str  # content digest, hex
    rank: int
    score: float  # BM25 score (lexical) or cosine distance (vector)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fragment_id: str
    schema_version: int
    operation: str
    entities: frozenset[str]  # definitions.tool_entities, as the database stores them


@dataclass(frozen=True, slots=True)
class QueryLegs:
    lexical: tuple[Hit, ...]
    vector: tuple[Hit, ...]


def capture(
    retriever: Retriever,
    scope: Scope,
    text: str,
    *,
    model: str,
    embedding: Sequence[float],
) -> QueryLegs:
    """Both legs' top ``DEPTH`` for one query, each as its own search (the fused order of a
    one-leg search is that leg's order)."""
    lex = retriever.search(text, scope=scope, mode="lexical", limit=DEPTH, candidate_limit=DEPTH)
    vec = retriever.search(
        text,
        scope=scope,
        mode="vector",
        limit=DEPTH,
        candidate_limit=DEPTH,
        model=model,
        embedding=embedding,
    )
    return QueryLegs(
        lexical=tuple(
            Hit(str(r.record.fragment_id), r.record.content_digest.hex(), r.lexical.rank,
                r.lexical.score)
            for r in lex.results
            if r.lexical is not None
        ),
        vector=tuple(
            Hit(str(r.record.fragment_id), r.record.content_digest.hex(), r.vector.rank,
                r.vector.distance)
            for r in vec.results
            if r.vector is not None
        ),
    )  # fmt: skip


def replay(
    query: str,
    legs: QueryLegs,
    tools: Mapping[str, Tool],
    *,
    weights: Weights,
    mode: str = "hybrid",
    protect: bool = True,
    pool: int = sel.POOL,
) -> list[sel.Scored]:
    """Discovery's selector input for one query, from the captured legs."""
    lexical = {h.fragment_id: h for h in legs.lexical} if mode != "vector" else {}
    vector = {h.fragment_id: h for h in legs.vector} if mode != "lexical" else {}
    rows = []
    for fid in lexical.keys() | vector.keys():
        lex, vec = lexical.get(fid), vector.get(fid)
        rrf = ranking.fuse(
            None if lex is None else ranking.rrf_contribution(weights.lexical, lex.rank),
            None if vec is None else ranking.rrf_contribution(weights.vector, vec.rank),
        )
        digest = (lex or vec).digest  # type: ignore[union-attr]
        rows.append((-(rrf * 1.0), -rrf, f"{digest}:{fid}", fid, lex, vec, rrf))
    rows.sort(key=lambda r: r[:3])
    candidates = []
    for position, (_, _, _, fid, lex, vec, rrf) in enumerate(rows[:pool], 1):
        tool = tools[fid]
        candidates.append(
            sel.Candidate(
                fragment_id=UUID(fid),
                name=tool.name,
                operation=tool.operation,
                schema_version=tool.schema_version,
                fused_rank=position,
                score=rrf * 1.0,
                lexical_rank=None if lex is None else lex.rank,
                vector_rank=None if vec is None else vec.rank,
                schema_chars=0,
                entities=tool.entities,
                lexical_score=None if lex is None else lex.score,
                vector_distance=None if vec is None else vec.score,
            )
        )
    ideal = ranking.ideal_score(weights, lexical_ran=mode != "vector", vector_ran=mode != "lexical")
    return sel.score(query, candidates, ideal, protect=protect)
