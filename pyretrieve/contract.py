"""The contract's constants, written once.

Every number, rule and label that the SQL schema and the Python side must agree on lives here
and nowhere else in Python; the client, the ingestor, the CLI, the ranker and the types import
it. The SQL schema repeats each one as a literal in its function bodies and checks, and
``tests/db/test_contract.py`` reads the installed functions and fails when a literal there
disagrees with the constant here.

This module imports nothing (the pure ranker depends on it and must stay free of any database
module).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "CANDIDATE_CAP_MAX",
    "CANDIDATE_CAP_MIN",
    "CLASSIFICATION_ORDER",
    "DBSF_DEGENERATE",
    "DBSF_FORMULA",
    "DBSF_SPREAD",
    "DEFAULT_FUSION",
    "DEFAULT_WEIGHT",
    "DEFAULT_WEIGHTS_ERROR",
    "DEFAULT_WEIGHTS_PAIR_ERROR",
    "DEGRADED_CONFIDENCE_FACTOR",
    "FRESHNESS_FLOOR",
    "FRESHNESS_SLOPE",
    "FUSIONS",
    "FUSION_ERROR",
    "FUSION_ERRORS",
    "IDENTIFIER_MAX_CHARS",
    "IDENTIFIER_PATTERN",
    "IDENTIFIER_RE",
    "INVALID_FUSION_SQLSTATE",
    "LEXICAL_BLOCK_POSTINGS",
    "LEXICAL_BUCKETS",
    "LEXICAL_BUCKET_GROUP",
    "LEXICAL_BULK_POSTINGS",
    "LEXICAL_COMPACT_MIN_SHARE",
    "LEXICAL_MAX_PENDING_PAGES",
    "LEXICAL_PAGE_POSTINGS",
    "MAX_BODY_CHARS",
    "MAX_DIMENSION",
    "MAX_LIMIT",
    "MAX_MODEL_ID_CHARS",
    "MAX_PROVENANCE_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SOURCE_URI_CHARS",
    "MAX_WEIGHT",
    "MODEL_ID_PATTERN",
    "RANK_BASE",
    "RRF_FORMULA",
    "RRF_K",
    "TRUST_LABEL",
    "VECTOR_INDEX_EF_SEARCH",
    "VECTOR_INDEX_MIN_ROWS",
    "VECTOR_INDEX_OPTIONS",
    "VECTOR_SEARCHES",
    "WEIGHT_SOURCES",
    "candidate_cap",
    "identifier_error",
    "is_identifier",
    "is_stale",
    "semantic_intent",
]

# ----------------------------------------------------------------------- identifiers

# Workspace, project and purpose names (the SQL domain pyretrieve.identifier and
# pyretrieve.check_identifier): lower-case ASCII letters, digits and _ . -, not starting with
# one of _ . -, at most 63 characters.
IDENTIFIER_MAX_CHARS: Final = 63
IDENTIFIER_PATTERN: Final = "^[a-z0-9][a-z0-9_.-]{0,62}$"
IDENTIFIER_RE: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")

# Embedding model ids (embedding_models.model_id, register_model). The client checks only the
# length before it asks the database; the database applies the whole pattern.
MAX_MODEL_ID_CHARS: Final = 128
MODEL_ID_PATTERN: Final = "^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$"


def is_identifier(value: object) -> bool:
    """True when ``value`` is a valid workspace, project or purpose name."""
    return isinstance(value, str) and IDENTIFIER_RE.fullmatch(value) is not None


def identifier_error(what: str) -> str:
    """The message for an invalid workspace, project or purpose name: the rule it breaks."""
    return (
        f"invalid {what}: a {what} name is 1 to {IDENTIFIER_MAX_CHARS} characters, lower-case"
        " letters, digits, '_', '.' or '-', starting with a letter or a digit"
    )


# ---------------------------------------------------------------------------- limits

MAX_QUERY_CHARS: Final = 4096  # authorize's caller, lexical_candidates, search
MAX_LIMIT: Final = 1000  # the requested limit (authorize)
CANDIDATE_CAP_MIN: Final = 100  # the candidate limit per leg: the requested limit,
CANDIDATE_CAP_MAX: Final = 1000  # raised to 100 and capped at 1000
MAX_BODY_CHARS: Final = 1_000_000  # fragments.body, put_fragment
MAX_SOURCE_URI_CHARS: Final = 2048  # fragments.source_uri
MAX_PROVENANCE_CHARS: Final = 256  # fragments.source_revision and manifest_id
MAX_DIMENSION: Final = 2000  # embedding_models.dimension, register_model
# A leg's fusion weight: finite, 0 to 1000 (Weights, search); a model's registered default
# weights are above 0 (register_model, embedding_models). Bounded so that no sum, ideal or
# ratio of the arithmetic can overflow a double.
MAX_WEIGHT: Final = 1000.0


def candidate_cap(requested_limit: int) -> int:
    """The decision's candidate limit for a requested limit, as authorize() computes it."""
    return min(max(requested_limit, CANDIDATE_CAP_MIN), CANDIDATE_CAP_MAX)


# ------------------------------------------------------------------- classification

# Sensitivity, least sensitive first (the order of the SQL enum pyretrieve.classification).
CLASSIFICATION_ORDER: Final = ("public", "internal", "confidential", "restricted")

# --------------------------------------------------------------------- vector leg

# How a vector leg searched, as vector_candidates reports it on every row and the explanation
# repeats: the exact scan of the scope, or the scope's own HNSW index.
VECTOR_SEARCHES: Final = ("exact", "hnsw")
# maintain_vector_indexes' default: a scope gets its own HNSW index of a model from this many
# embeddings of it (of every classification and state, as the index holds them), and loses it
# below half as many (so a scope near the line does not flap). Measured in evals/bench/vector-index.json: the exact scan is 1.6 times slower than
# the index at 10,000 rows, 3.6 times at 30,000 and 14 times at 100,000, with recall 1.
VECTOR_INDEX_MIN_ROWS: Final = 20_000
# Every scope's own HNSW index is built with these options, in this order (as pg_class.reloptions
# spells them; maintain_vector_indexes rebuilds an index built with others) and searched with
# this ef_search (pgvector's maximum), in strict distance order. Measured on 100,000
# low-contrast clustered vectors: recall@100 0.990 (evals/bench/hnsw-sweep-synthetic-100k.json),
# 0.997 through the leg (evals/bench/vector-index-0049.json), where m 16 / ef_construction 128
# at ef_search 600, the setting until migration 0049, reached 0.918.
VECTOR_INDEX_OPTIONS: Final = (("m", 32), ("ef_construction", 256))
VECTOR_INDEX_EF_SEARCH: Final = 1000

# ----------------------------------------------------------------- the lexical index

# A block of a lexeme holds at most this many postings; a lexeme with fewer in a scope and
# classification is a small list, which compaction moves into the pages of its bucket.
LEXICAL_BLOCK_POSTINGS: Final = 128
# A page closes once this many postings precede the next lexeme of its bucket.
LEXICAL_PAGE_POSTINGS: Final = 1024
# Buckets of a scope's pages per classification: the first byte of the lexeme's SHA-256.
LEXICAL_BUCKETS: Final = 256
# Buckets per group: a group whose small lists of a classification hold fewer than
# LEXICAL_PAGE_POSTINGS postings keeps them in one page of its own (key LEXICAL_BUCKETS + group)
# rather than in a page per bucket, a few postings each.
LEXICAL_BUCKET_GROUP: Final = 16
# The Ingestor compacts a scope after a run once the postings in blocks not full are at least
# this share of those in pages (compact_lexical_index's p_min_share): a run rewrites every page
# of the buckets it touches, and with 1 the pages at least double between runs.
LEXICAL_COMPACT_MIN_SHARE: Final = 1.0
# A writing statement with at least this many postings is a bulk write: its lists of fewer than
# LEXICAL_BLOCK_POSTINGS go into pending pages (one per bucket and classification, or per group
# where the group's lists are few) instead of a block each, and compaction merges them.
LEXICAL_BULK_POSTINGS: Final = 4096
# compact_lexical_index's share rule also compacts once a term would read this many pending
# pages (the leg reads each of its bucket's and of its group's for every term of the bucket),
# and the Ingestor runs the rule after every this many batches of a run as well as at its end.
LEXICAL_MAX_PENDING_PAGES: Final = 16

# ----------------------------------------------------------------- fusion and scores

RRF_K: Final = 60
RANK_BASE: Final = 1
RRF_FORMULA: Final = (
    "sum of w/(60+rank) over modalities, 1-based ranks, missing modality contributes 0"
)
# The fusions a request may ask for; canonical RRF unless it asks for another.
FUSIONS: Final = ("rrf", "dbsf")
DEFAULT_FUSION: Final = "rrf"
# Distribution-based score fusion: each leg's candidate scores (BM25, or 1 - cosine distance)
# are mapped affinely from mean - SPREAD * std and mean + SPREAD * std (sample std of that leg's
# candidates for this query) to 0 and 1, and floored at 0 (a candidate never counts less than
# one the leg did not return). They are not capped at 1: a cap tied the best BM25 matches,
# which often lie beyond 3 std, and left their order to the tie-break. On the same collected
# legs at the all-MiniLM-L6-v2-int8 default (evals/quality/fusion.py) the cap cost 0.016
# nDCG@10 on SciFact (0.722 against 0.738) and 0.022 on BFCL (0.597 against 0.619). A leg
# whose range is empty (one candidate, or all equal) maps every candidate to DBSF_DEGENERATE,
# the value of the mean.
DBSF_SPREAD: Final = 3.0
DBSF_DEGENERATE: Final = 0.5
DBSF_FORMULA: Final = (
    "sum of w*max(0,(x-lower)/(upper-lower)) over modalities, x = lexical score or"
    " 1 - cosine distance, lower/upper = mean -/+ 3 sample std of that modality's candidates"
    " for this query (0.5 when upper <= lower), missing modality contributes 0"
)
# Per-leg weights: a request's, else the model's registered defaults, else this for both.
DEFAULT_WEIGHT: Final = 1.0
# Where the weights a search used came from (the explanation says which).
WEIGHT_SOURCES: Final = ("request", "model", "default")
# A fusion setting refused: an unknown fusion (register_model's p_fusion, search's p_fusion,
# a request's fusion=) or a model's default weights not both given, not finite, or outside
# (0, MAX_WEIGHT]. Its own SQLSTATE, so a caller can tell a forged fusion setting from other
# bad input; the typed error is pyretrieve.errors.InvalidFusion (an InvalidInput), and the
# schema raises it with one of these fixed texts, which the client shows as they are.
INVALID_FUSION_SQLSTATE: Final = "PR016"
FUSION_ERROR: Final = "fusion must be rrf or dbsf"
DEFAULT_WEIGHTS_PAIR_ERROR: Final = "give both default weights or neither"
DEFAULT_WEIGHTS_ERROR: Final = "default weights must be above 0 and at most 1000"
FUSION_ERRORS: Final = (FUSION_ERROR, DEFAULT_WEIGHTS_PAIR_ERROR, DEFAULT_WEIGHTS_ERROR)
# freshness = clamp(1 - FRESHNESS_SLOPE * age / max_age, FRESHNESS_FLOOR, 1)
FRESHNESS_FLOOR: Final = 0.5
FRESHNESS_SLOPE: Final = 0.5
# Confidence is multiplied by this when the semantic leg was wanted but degraded.
DEGRADED_CONFIDENCE_FACTOR: Final = 0.75

# A constant label, never derived from the content: retrieved text is data, whatever it claims
# about itself.
TRUST_LABEL: Final = "untrusted-data"

# ------------------------------------------------------------------------ staleness


def is_stale(
    *, source_digest: bytes, content_digest: bytes, vector_generation: int, lexical_generation: int
) -> bool:
    """An embedding is stale when it was computed from other text (its source digest is not
    the fragment's content digest) or stamped before the fragment's current lexical
    generation. Stale embeddings are never ranked (the same rule in SQL: ``search``)."""
    return source_digest != content_digest or vector_generation < lexical_generation


# ------------------------------------------------------------------- semantic intent


def semantic_intent(mode: str, semantic: str) -> str:
    """The semantic intent a decision records for a request: ``disabled`` when the request
    wants no semantic leg (lexical mode, or ``semantic='disabled'``), ``required`` when it
    cannot do without one (vector mode, or ``semantic='required'``), else ``optional``.
    ``pyretrieve.search()`` in SQL records the same for its ``p_mode`` and ``p_semantic``."""
    if mode == "lexical" or semantic == "disabled":
        return "disabled"
    if mode == "vector" or semantic == "required":
        return "required"
    return "optional"
