"""The default fusion and weights stored with each model, the fusion parameter, and who may
set them.

A search that gives no fusion or no weights uses the registered defaults of the model it names,
from SQL (``pyretrieve.search``) and from Python (``Retriever.search``) alike, and every
explanation says which fusion and weights were used and where each came from. Only admins set a
model's defaults: they steer the ranking of every workspace that searches with that model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pyretrieve import Retriever, Scope, Weights, contract
from pyretrieve.client import AsyncRetriever, build_request
from pyretrieve.db.errors import translate
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.embedders.registry import DEFAULTS, register_model
from pyretrieve.errors import AccessDenied, InvalidFusion, InvalidInput
from pyretrieve.types import SearchResult, canonical_json
from tests.conftest import Database, Server, acting_as, role
from tests.db.seed import MODEL, PROBE, PURPOSE, Seeded, error_as, seeded_database, vec

Conn = psycopg.Connection[dict[str, Any]]


@pytest.fixture(scope="module")
def seeded(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded]]:
    with seeded_database(server, template_db) as pair:
        yield pair


@pytest.fixture
def sconn(seeded: tuple[Database, Seeded]) -> Iterator[Conn]:
    with seeded[0].connect(autocommit=True) as c:
        yield c


def _weights(conn: Conn, model: str) -> tuple[float, float] | None:
    with acting_as(conn, "alice"):
        row = conn.execute(
            "SELECT lexical_weight, vector_weight FROM pyretrieve.model_defaults(%s)", (model,)
        ).fetchone()
    return None if row is None else (row["lexical_weight"], row["vector_weight"])


def _fusion(conn: Conn, model: str) -> str | None:
    with acting_as(conn, "alice"):
        row = conn.execute("SELECT fusion FROM pyretrieve.model_defaults(%s)", (model,)).fetchone()
    return None if row is None else str(row["fusion"])


def _register(conn: Conn, model: str, *weights: float | None, fusion: str | None = None) -> None:
    with acting_as(conn, "adam"):
        conn.execute(
            "SELECT pyretrieve.register_model(%s, 3, %s, %s, %s)",
            (model, *(weights or (None, None)), fusion),
        )


def _sql_search(conn: Conn, nick: str = "alice", **kw: Any) -> list[dict[str, Any]]:
    args = {
        "p_workspace": "acme",
        "p_project": "docs",
        "p_purpose": PURPOSE,
        "p_query": "ledger",
        "p_embedding": vec(PROBE),
        "p_model": MODEL,
        "p_limit": 5,
        **kw,
    }
    names = ", ".join(f"{k} => %({k})s" for k in args).replace(
        "%(p_embedding)s", "%(p_embedding)s::public.vector"
    )
    with acting_as(conn, nick):
        return conn.execute(f"SELECT * FROM pyretrieve.search({names})", args).fetchall()


# ------------------------------------------------------------------------ registering


def test_register_model_sets_the_defaults_and_keeps_them_when_none_are_given(
    sconn: Conn,
) -> None:
    _register(sconn, "w-new")
    assert _weights(sconn, "w-new") == (1.0, 1.0)
    _register(sconn, "w-new", 0.25, 1.0)
    assert _weights(sconn, "w-new") == (0.25, 1.0)
    _register(sconn, "w-new")  # registering again without weights keeps them
    assert _weights(sconn, "w-new") == (0.25, 1.0)
    _register(sconn, "w-new", 3.0, 0.5)
    assert _weights(sconn, "w-new") == (3.0, 0.5)
    assert _fusion(sconn, "w-new") == "rrf"
    _register(sconn, "w-new", fusion="dbsf")  # the fusion alone; the weights stay
    assert (_fusion(sconn, "w-new"), _weights(sconn, "w-new")) == ("dbsf", (3.0, 0.5))
    with acting_as(sconn, "adam"):
        listed = sconn.execute(
            "SELECT fusion, lexical_weight, vector_weight FROM pyretrieve.list_models()"
            " WHERE model_id = 'w-new'"
        ).fetchone()
    assert listed == {"fusion": "dbsf", "lexical_weight": 3.0, "vector_weight": 0.5}
    assert _weights(sconn, "never-registered") is None


@pytest.mark.parametrize(
    "weights",
    [
        (1.0, None),
        (None, 1.0),
        (0.0, 1.0),
        (1.0, -1.0),
        (1000.5, 1.0),
        ("NaN", 1.0),
        ("Infinity", 1.0),
    ],
)
def test_register_model_refuses_bad_default_weights(sconn: Conn, weights: tuple[Any, Any]) -> None:
    _register(sconn, "w-bad", 0.5, 2.0)
    exc = error_as(
        sconn,
        "adam",
        ("SELECT pyretrieve.register_model('w-bad', 3, %s::float8, %s::float8)", weights),
    )
    # Its own SQLSTATE, defined once in the contract; the row keeps its defaults.
    assert exc.sqlstate == contract.INVALID_FUSION_SQLSTATE
    assert exc.diag.message_primary in contract.FUSION_ERRORS
    assert _weights(sconn, "w-bad") == (0.5, 2.0)


@pytest.mark.parametrize("fusion", ["linear", "RRF", ""])
def test_register_model_refuses_an_unknown_fusion(sconn: Conn, fusion: str) -> None:
    _register(sconn, "w-fusion", fusion="dbsf")
    exc = error_as(
        sconn,
        "adam",
        ("SELECT pyretrieve.register_model('w-fusion', 3, p_fusion => %s)", (fusion,)),
    )
    assert exc.sqlstate == contract.INVALID_FUSION_SQLSTATE
    assert exc.diag.message_primary == contract.FUSION_ERROR
    assert _fusion(sconn, "w-fusion") == "dbsf"


def test_python_registration_ships_the_known_models_defaults(
    seeded: tuple[Database, Seeded],
) -> None:
    embedder = HashNgramEmbedder()
    with seeded[0].connect(autocommit=True) as conn:
        register_model(
            conn, embedder, principal=role("adam"), weights=Weights(lexical=2.0, vector=1.0)
        )
        assert _weights(conn, embedder.model_id) == (2.0, 1.0)
        # Registering again without weights restores the shipped defaults.
        register_model(conn, embedder, principal=role("adam"))
        shipped = DEFAULTS[embedder.model_id]
        assert _weights(conn, embedder.model_id) == (
            shipped.weights.lexical,
            shipped.weights.vector,
        )
        assert _fusion(conn, embedder.model_id) == shipped.fusion.value
        register_model(conn, embedder, principal=role("adam"), fusion="dbsf")
        assert _fusion(conn, embedder.model_id) == "dbsf"
        register_model(conn, embedder, principal=role("adam"))
        assert _fusion(conn, embedder.model_id) == shipped.fusion.value


# --------------------------------------------------------------------- the attack side


@pytest.mark.parametrize("nick", ["alice", "wally", "nobody"])
def test_only_admins_set_a_models_default_weights(sconn: Conn, nick: str) -> None:
    """A reader or writer that could move a model's defaults would reorder every workspace's
    results for that model; none of the doors lets it."""
    _register(sconn, "w-guarded", 1.0, 1.0)
    attempts = [
        ("SELECT pyretrieve.register_model('w-guarded', 3, 50.0, 0.01)", ()),
        ("UPDATE pyretrieve.embedding_models SET lexical_weight = 50 WHERE model_id = 'w-guarded'", ()),
        ("INSERT INTO pyretrieve.embedding_models (model_id, dimension, lexical_weight, vector_weight)"
         " VALUES ('w-planted', 3, 50, 0.01)", ()),
        ("SELECT lexical_weight FROM pyretrieve.embedding_models", ()),
    ]  # fmt: skip
    for statement in attempts:
        exc = error_as(sconn, nick, statement)
        assert exc.sqlstate in ("PR001", "42501"), (statement, exc.sqlstate)
    assert _weights(sconn, "w-guarded") == (1.0, 1.0)
    assert _weights(sconn, "w-planted") is None


def test_a_principal_outside_the_groups_cannot_read_model_weights(sconn: Conn) -> None:
    exc = error_as(sconn, "nobody", f"SELECT * FROM pyretrieve.model_defaults('{MODEL}')")
    assert exc.sqlstate in ("PR001", "42501")


# -------------------------------------------------------------------------- searching

_PER_TRANSACTION = ("decision_id", "retrieved_at", "age_us")


def blank(value: Any) -> Any:
    """An explanation with what differs between two transactions blanked."""
    if isinstance(value, dict):
        return {k: "*" if k in _PER_TRANSACTION else blank(v) for k, v in value.items()}
    if isinstance(value, list):
        return [blank(v) for v in value]
    return value


def test_a_search_without_weights_uses_the_models_defaults_and_says_so(sconn: Conn) -> None:
    _register(sconn, MODEL, 0.3, 1.0)
    try:
        cases = [
            ({}, {"lexical": 0.3, "vector": 1.0, "source": "model", "model": MODEL}),
            (
                {"p_lexical_weight": 2.0, "p_vector_weight": 1.0},
                {"lexical": 2.0, "vector": 1.0, "source": "request", "model": None},
            ),
            (
                {"p_model": "not-registered"},
                {"lexical": 1.0, "vector": 1.0, "source": "default", "model": None},
            ),
            (
                {"p_mode": "lexical", "p_model": None, "p_embedding": None},
                {"lexical": 1.0, "vector": 1.0, "source": "default", "model": None},
            ),
        ]
        for kw, expected in cases:
            rows = _sql_search(sconn, **kw)
            assert rows, kw
            for row in rows:
                assert row["explanation"]["fusion"]["weights"] == expected
                lexical = row["explanation"]["modalities"]["lexical"]
                if lexical is not None:
                    assert lexical["weight"] == expected["lexical"]
    finally:
        _register(sconn, MODEL, 1.0, 1.0)


def test_a_search_without_a_fusion_uses_the_models_and_says_so(sconn: Conn) -> None:
    _register(sconn, MODEL, 0.5, 1.0, fusion="dbsf")
    try:
        by_model = _sql_search(sconn)
        asked = _sql_search(sconn, p_fusion="rrf")
        unknown = _sql_search(sconn, p_model="not-registered")
    finally:
        _register(sconn, MODEL, 1.0, 1.0, fusion="rrf")
    for row in by_model:
        fusion = row["explanation"]["fusion"]
        assert (fusion["method"], fusion["source"], fusion["model"]) == ("dbsf", "model", MODEL)
        assert fusion["weights"]["source"] == "model"
        assert "normalization" in (
            row["explanation"]["modalities"]["lexical"] or {"normalization": 0}
        )
    for row in asked:
        fusion = row["explanation"]["fusion"]
        # The request's fusion wins; the weights it did not give are still the model's.
        assert (fusion["method"], fusion["source"], fusion["model"]) == ("rrf", "request", None)
        assert fusion["weights"] == {
            "lexical": 0.5,
            "vector": 1.0,
            "source": "model",
            "model": MODEL,
        }
    for row in unknown:
        fusion = row["explanation"]["fusion"]
        assert (fusion["method"], fusion["source"], fusion["model"]) == ("rrf", "default", None)


def test_sql_and_python_resolve_the_same_default(seeded: tuple[Database, Seeded]) -> None:
    db, _ = seeded
    with db.connect(autocommit=True) as conn:
        _register(conn, MODEL, 0.4, 1.7, fusion="dbsf")
        try:
            # bob's grant has no max_age: freshness does not move between the two transactions.
            retriever = Retriever(conn, principal=role("bob"))
            for fusion in (None, "rrf", "dbsf"):
                result = retriever.search(
                    "ledger",
                    scope=Scope(workspace="acme", project="docs", purpose=PURPOSE),
                    embedding=list(PROBE),
                    model=MODEL,
                    limit=5,
                    fusion=fusion,
                )
                rows = _sql_search(conn, "bob", p_fusion=fusion)
                assert result.weights == Weights(lexical=0.4, vector=1.7)
                assert result.fusion.source.value == "model"
                assert result.fusion.method.value == (fusion or "dbsf")
                assert [canonical_json(blank(r["explanation"])) for r in rows] == [
                    canonical_json(blank(r.to_plain())) for r in result.results
                ]
        finally:
            _register(conn, MODEL, 1.0, 1.0, fusion="rrf")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"p_lexical_weight": 1.0}, "give both weights or neither"),
        ({"p_vector_weight": 1.0}, "give both weights or neither"),
        ({"p_fusion": "linear"}, "fusion must be rrf or dbsf"),
        ({"p_fusion": "RRF"}, "fusion must be rrf or dbsf"),
        (
            {"p_lexical_weight": 1.0, "p_vector_weight": 1001.0},
            "weights must be between 0 and 1000",
        ),
    ],
)
def test_search_refuses_half_given_weights_and_unknown_fusions(
    sconn: Conn, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(psycopg.Error) as info:
        _sql_search(sconn, **kw)
    # An unknown fusion has the fusion setting's own code; bad weights are invalid input.
    fusion = message == contract.FUSION_ERROR
    assert info.value.sqlstate == (contract.INVALID_FUSION_SQLSTATE if fusion else "PR010")
    assert info.value.diag.message_primary == message
    typed = translate(info.value)
    assert isinstance(typed, InvalidInput)
    assert isinstance(typed, InvalidFusion) is fusion


def test_the_client_refuses_an_unknown_fusion_before_the_database() -> None:
    scope = Scope(workspace="acme", project="docs", purpose=PURPOSE)
    with pytest.raises(InvalidFusion, match="fusion"):
        build_request("ledger", scope=scope, fusion="linear")
    assert build_request("ledger", scope=scope).weights is None
    assert build_request("ledger", scope=scope, fusion="dbsf").fusion.value == "dbsf"


def test_a_denied_search_reveals_no_model_weights(sconn: Conn) -> None:
    """Weights are resolved after the decision: a principal without a grant learns nothing,
    not even whether the model it names is registered."""
    retriever = Retriever(sconn, principal=role("carol"))
    answers = set()
    for model in (MODEL, "not-registered"):
        with pytest.raises(AccessDenied) as info:
            retriever.search(
                "ledger",
                scope=Scope(workspace="acme", project="docs", purpose=PURPOSE),
                embedding=list(PROBE),
                model=model,
            )
        answers.add((info.value.code, str(info.value)))
    assert len(answers) == 1


# ----------------------------------------------------- forged fusion settings, refused


# Each one breaks the fusion rule or the default-weight rule (nothing here may be stored).
_FORGED = [
    (None, None, "rrf'; UPDATE pyretrieve.embedding_models SET fusion = 'dbsf'; --"),
    (None, None, " rrf"),
    (None, None, "dbsf\n"),
    (None, None, "rrf\u200b"),
    (None, None, "DBSF"),
    (None, None, "rrf,dbsf"),
    (None, None, ""),
    (1.5, 1.0, "linear"),
    (1.0, 1000.001, None),
    (0.0, 1.0, None),
    ("-0", 1.0, None),
    (1.0, -1.0, None),
    ("NaN", "NaN", None),
    ("-Infinity", 1.0, None),
    (1.0, "Infinity", None),
    (0.5, None, "dbsf"),
]


def _index_count(db: Database) -> int:
    with db.admin() as admin:
        row = admin.execute(
            "SELECT count(*) AS n FROM pg_indexes WHERE schemaname = 'pyretrieve'"
        ).fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.parametrize("nick", ["adam", "wally", "alice"])
def test_a_forged_fusion_or_default_weights_cannot_be_registered(
    seeded: tuple[Database, Seeded], sconn: Conn, nick: str
) -> None:
    """An admin calling register_model directly (the SQL API, not the client's checks) with a
    forged fusion name or default weights outside (0, 1000], for a registered model and for a
    new one: refused with the fusion setting's own code and a fixed text that does not echo
    what was sent, before anything is written (the registered model keeps its defaults, the
    new one gets no row and no index). A writer or a reader is refused as not an admin,
    whatever it sends; direct DML on the table is refused to all three."""
    db, _ = seeded
    _register(sconn, "w-target", 0.5, 2.0, fusion="dbsf")
    indexes = _index_count(db)
    for lexical, vector, fusion in _FORGED:
        for model in ("w-target", "w-forged-new"):
            exc = error_as(
                sconn,
                nick,
                (
                    "SELECT pyretrieve.register_model(p_model => %s, p_dimension => 3,"
                    " p_lexical_weight => %s::float8, p_vector_weight => %s::float8,"
                    " p_fusion => %s)",
                    (model, lexical, vector, fusion),
                ),
            )
            if nick != "adam":
                assert exc.sqlstate in ("PR001", "42501"), (lexical, vector, fusion)
                continue
            assert exc.sqlstate == contract.INVALID_FUSION_SQLSTATE, (lexical, vector, fusion)
            typed = translate(exc)
            assert isinstance(typed, InvalidFusion)
            assert typed.code == "VES_MEMORY_INVALID_FUSION"
            # One of the schema's fixed texts: nothing of what was sent comes back.
            assert str(typed) in contract.FUSION_ERRORS
            assert str(typed) == exc.diag.message_primary
    for statement in (
        "UPDATE pyretrieve.embedding_models SET fusion = 'dbsf', lexical_weight = 1e6",
        "INSERT INTO pyretrieve.embedding_models (model_id, dimension, fusion)"
        " VALUES ('w-forged-new', 3, 'linear')",
    ):
        assert error_as(sconn, nick, statement).sqlstate == "42501"
    assert (_fusion(sconn, "w-target"), _weights(sconn, "w-target")) == ("dbsf", (0.5, 2.0))
    assert _weights(sconn, "w-forged-new") is None
    assert _index_count(db) == indexes


def test_the_client_refuses_a_bad_fusion_setting_before_the_database(
    seeded: tuple[Database, Seeded],
) -> None:
    """Python registration checks the same rules first: a closed connection proves nothing
    was sent (sending would have failed as an unavailable database instead)."""
    conn = seeded[0].connect(autocommit=True)
    conn.close()
    embedder = HashNgramEmbedder()
    bad: list[dict[str, Any]] = [
        {"fusion": "linear"},
        {"fusion": "RRF"},
        {"fusion": 1},
        {"weights": Weights(lexical=0.0, vector=1.0)},
        {"weights": (1.0, 1.0)},
    ]
    for kw in bad:
        with pytest.raises(InvalidFusion) as info:
            register_model(conn, embedder, principal=role("adam"), **kw)
        assert str(info.value) in (*contract.FUSION_ERRORS, "default weights must be Weights")
        assert info.value.code == "VES_MEMORY_INVALID_FUSION"


def test_the_async_client_takes_the_defaults_as_sql_and_the_sync_client_do(
    seeded: tuple[Database, Seeded],
) -> None:
    """The three doors resolve the same fusion and weights and explain them alike: SQL
    search(), Retriever and AsyncRetriever, with the model's defaults and with a request's
    own fusion and weights (each in its own transaction, so decision ids and times differ)."""
    db, _ = seeded
    scope = Scope(workspace="acme", project="docs", purpose=PURPOSE)
    asks: list[dict[str, Any]] = [
        {},
        {"fusion": "rrf"},
        {"weights": Weights(lexical=2.0, vector=0.5)},
        {"fusion": "rrf", "weights": Weights(lexical=2.0, vector=0.5)},
    ]

    def sql_kw(ask: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "fusion" in ask:
            out["p_fusion"] = ask["fusion"]
        if "weights" in ask:
            out["p_lexical_weight"] = ask["weights"].lexical
            out["p_vector_weight"] = ask["weights"].vector
        return out

    async def run_async() -> list[SearchResult]:
        aconn = await psycopg.AsyncConnection.connect(db.app_dsn, autocommit=True)
        try:
            client = AsyncRetriever(aconn, principal=role("bob"))
            return [
                await client.search(
                    "ledger", scope=scope, embedding=list(PROBE), model=MODEL, limit=5, **ask
                )
                for ask in asks
            ]
        finally:
            await aconn.close()

    with db.connect(autocommit=True) as conn:
        _register(conn, MODEL, 0.4, 1.7, fusion="dbsf")
        try:
            awaited = asyncio.run(run_async())
            sync = Retriever(conn, principal=role("bob"))
            for ask, got in zip(asks, awaited, strict=True):
                want = sync.search(
                    "ledger", scope=scope, embedding=list(PROBE), model=MODEL, limit=5, **ask
                )
                rows = _sql_search(conn, "bob", **sql_kw(ask))
                assert got.fusion == want.fusion
                assert got.fusion.method.value == ask.get("fusion", "dbsf")
                assert got.weights == ask.get("weights", Weights(lexical=0.4, vector=1.7))
                documents = [canonical_json(blank(r.to_plain())) for r in want.results]
                assert documents
                assert [canonical_json(blank(r.to_plain())) for r in got.results] == documents
                assert [canonical_json(blank(r["explanation"])) for r in rows] == documents
        finally:
            _register(conn, MODEL, 1.0, 1.0, fusion="rrf")
