"""pyretrieve.integrations.sqlalchemy: the SQL API as SQLAlchemy Core constructs.

The constructs are checked against the installed catalog (names, types, defaults, enum
labels), then used through a real ``Engine`` and ``Session`` as the seed's non-owner
principals (``tests/db/seed.py``): the same results as the client, the writers inside the
application's own transaction, the same typed errors, and the attacks a principal holding a
SQLAlchemy session would try.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest
from sqlalchemy import (
    Column,
    MetaData,
    Table,
    create_engine,
    insert,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from pyretrieve import Retriever, ranking
from pyretrieve.client import build_request
from pyretrieve.errors import (
    AccessDenied,
    InvalidDecision,
    InvalidEmbedding,
    InvalidInput,
    NotFound,
    PrivilegedCaller,
    PyretrieveError,
    UnknownPrincipal,
)
from pyretrieve.integrations import sqlalchemy as pyretrieve_sa
from pyretrieve.types import Scope, SemanticStatus, Weights, canonical_json
from pyretrieve.vectors import canonical_embedding, embedding_digest
from tests.conftest import Database, Server, role
from tests.db.seed import CASES, MODEL, PROBE, PURPOSE, SHARED_WORD, Seeded, seeded_database, sha

DIALECT = postgresql.psycopg.dialect()


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seeded(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded]]:
    with seeded_database(server, template_db) as pair:
        yield pair


@pytest.fixture
def engine(seeded: tuple[Database, Seeded]) -> Iterator[Engine]:
    """The application's engine: the authenticator login, one pooled connection, so every
    transaction reuses the same session (what one transaction's role leaves behind shows)."""
    db, _ = seeded
    eng = create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(db.app_dsn),
        pool_size=1,
        max_overflow=0,
    )
    try:
        yield eng
    finally:
        eng.dispose()


def as_(conn: Any, nick: str) -> None:
    pyretrieve_sa.act_as(conn, role(nick))


# ---------------------------------------------------------------------------------------------
# 1. The constructs match the installed catalog
# ---------------------------------------------------------------------------------------------
_CATALOG = """
SELECT p.proname,
       coalesce(p.proargnames, '{}') AS names,
       coalesce(p.proargmodes::text[], array_fill('i'::text, ARRAY[p.pronargs])) AS modes,
       ARRAY(SELECT pg_catalog.format_type(u.t, NULL)
               FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]))
                    WITH ORDINALITY AS u(t, n) ORDER BY u.n) AS types,
       p.pronargdefaults, p.proretset,
       pg_catalog.format_type(p.prorettype, NULL) AS returns,
       pg_catalog.pg_get_function_result(p.oid) AS result
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.proname = %s
"""


def sql_type(t: Any) -> str:
    return str(t.compile(dialect=DIALECT)).lower()


def catalog(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    # With only pg_catalog on the path, format_type qualifies every other schema's types
    # (public.vector, pyretrieve.classification), as the constructs spell them.
    conn.execute("SET search_path = pg_catalog")
    rows = conn.execute(_CATALOG, (name,)).fetchall()
    assert len(rows) == 1, f"pyretrieve.{name} is overloaded or missing: {rows}"
    return rows[0]


@pytest.mark.parametrize("name", sorted(pyretrieve_sa.FUNCTIONS))
def test_each_construct_matches_the_installed_function(db: Database, name: str) -> None:
    spec = pyretrieve_sa.FUNCTIONS[name]
    with db.connect() as conn:
        row = catalog(conn, name)
    modes, names, types = row["modes"], row["names"], row["types"]
    inputs = [(n, t) for n, t, m in zip(names, types, modes, strict=True) if m == "i"]
    outputs = [(n, t) for n, t, m in zip(names, types, modes, strict=True) if m == "t"]
    assert set(modes) <= {"i", "t"}

    # Parameters: names, types and order.
    assert [(f"p_{n}", sql_type(t)) for n, t in spec.parameters] == inputs
    # The Python function: the same keyword-only names; exactly the parameters with an SQL
    # default default to DEFAULT (left out of the call, so the SQL default applies).
    signature = inspect.signature(getattr(pyretrieve_sa, name))
    params = list(signature.parameters.values())
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert [p.name for p in params] == [n for n, _ in spec.parameters]
    with_default = [p.name for p in params if p.default is pyretrieve_sa.DEFAULT]
    first_default = len(inputs) - row["pronargdefaults"]
    assert with_default == [n for n, _ in spec.parameters[first_default:]]
    assert all(p.default is inspect.Parameter.empty for p in params[:first_default])

    # Results: the table's columns, or the scalar's type.
    if spec.columns:
        assert row["proretset"]
        assert [(n, sql_type(t)) for n, t in spec.columns] == outputs
        rendered = ", ".join(f"{n} {sql_type(t)}" for n, t in spec.columns)
        assert row["result"] == f"TABLE({rendered})"
    else:
        assert not row["proretset"]
        assert not outputs
        assert spec.returns is not None
        assert sql_type(spec.returns) == row["returns"] == row["result"]


def test_every_read_and_write_function_of_the_api_has_a_construct(db: Database) -> None:
    with db.connect() as conn:
        granted = {
            r["proname"]
            for r in conn.execute(
                """SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p,
                          LATERAL pg_catalog.aclexplode(p.proacl) a
                    WHERE p.pronamespace = 'pyretrieve'::regnamespace
                      AND a.grantee IN ('pyretrieve_reader'::regrole, 'pyretrieve_writer'::regrole)"""
            ).fetchall()
        }
    wanted = {
        "authorize",
        "search",
        "lexical_candidates",
        "vector_candidates",
        "fragments",
        "put_fragment",
        "supersede_fragment",
        "retract_fragment",
        "put_embedding",
    }
    assert wanted <= granted
    assert set(pyretrieve_sa.FUNCTIONS) == wanted


def test_the_enum_types_have_the_schemas_labels(db: Database) -> None:
    with db.admin() as conn:
        for enum in (
            pyretrieve_sa.CLASSIFICATION,
            pyretrieve_sa.FRAGMENT_STATE,
            pyretrieve_sa.SEMANTIC_POLICY,
        ):
            labels = conn.execute(
                "SELECT array_agg(e.enumlabel ORDER BY e.enumsortorder) AS l FROM pg_enum e"
                " WHERE e.enumtypid = %s::regtype",
                (sql_type(enum),),
            ).fetchone()
            assert labels is not None
            assert list(enum.enums) == labels["l"]


def test_a_left_out_argument_is_not_sent_and_every_other_is_named_and_cast() -> None:
    hits = pyretrieve_sa.search(workspace="acme", project="docs", purpose=PURPOSE, query="q")
    sql = str(select(hits.c.rank).select_from(hits).compile(dialect=DIALECT))
    assert "pyretrieve.search(p_workspace => CAST(" in sql
    for name in ("p_project", "p_purpose", "p_query"):
        assert f"{name} => CAST(" in sql
    for name in ("p_embedding", "p_model", "p_limit", "p_mode", "p_ranking", "weight"):
        assert name not in sql
    # The values are bound, never inlined.
    assert "acme" not in sql
    put = pyretrieve_sa.put_fragment(workspace="a", project="b", body="x", source_uri=None)
    sql = str(select(put).compile(dialect=DIALECT))
    assert "p_source_uri => CAST(" in sql
    assert "p_classification" not in sql


# ---------------------------------------------------------------------------------------------
# 2. Reads: the same answers as the client
# ---------------------------------------------------------------------------------------------
def _blank(value: Any) -> Any:
    """An explanation with what differs between two transactions blanked."""
    if isinstance(value, dict):
        return {
            k: "*" if k in ("decision_id", "retrieved_at", "age_us") else _blank(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_blank(v) for v in value]
    return value


def test_search_through_a_session_equals_the_client(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    db, s = seeded
    # bob's grant has no max_age, so the scores do not depend on the transaction's time.
    scope = Scope(workspace="acme", project="docs", purpose=PURPOSE)
    with psycopg.connect(db.app_dsn, autocommit=True) as conn:
        client = Retriever(conn, principal=role("bob")).search(
            SHARED_WORD, scope=scope, embedding=PROBE, model=MODEL, limit=10
        )
    hits = pyretrieve_sa.search(
        workspace="acme", project="docs", purpose=PURPOSE, query=SHARED_WORD,
        embedding=PROBE, model=MODEL, limit=10,
    )  # fmt: skip
    with pyretrieve_sa.translated(), Session(engine) as session, session.begin():
        as_(session, "bob")
        rows = session.execute(select(hits).order_by(hits.c.rank)).mappings().all()
    # Everything bob may see in acme/docs (ceiling internal), and nothing else.
    bobs = {s.acme[c] for c in ("public", "internal", "successor", "old")}
    assert {r["fragment_id"] for r in rows} == bobs
    assert [r["fragment_id"] for r in rows] == [r.fragment_id for r in client.results]
    assert all(isinstance(r["fragment_id"], UUID) for r in rows)
    assert [canonical_json(_blank(r["explanation"])) for r in rows] == [
        canonical_json(_blank(r.to_plain())) for r in client.results
    ]
    assert [(r["final_score"], r["confidence"]) for r in rows] == [
        (r.final_score, r.confidence) for r in client.results
    ]


def test_the_legs_through_a_connection_rank_like_the_client(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    """authorize, lexical, vector and fragments as separate statements in one transaction of
    the application's, fed to the pure ranker: the client's result."""
    db, _ = seeded
    scope = Scope(workspace="acme", project="docs", purpose=PURPOSE)
    # The request's own fusion and weights, so the client reads no model defaults and the
    # hand-fed ranker below gets the same ones.
    request = build_request(
        SHARED_WORD,
        scope=scope,
        embedding=PROBE,
        model=MODEL,
        limit=4,
        weights=Weights(),
        fusion="rrf",
    )
    vector = canonical_embedding(PROBE)
    with psycopg.connect(db.app_dsn, autocommit=True) as conn:
        client = Retriever(conn, principal=role("bob")).execute(request)

    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "bob")
        auth = pyretrieve_sa.authorize(
            workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha(SHARED_WORD),
            semantic_intent="optional", embedding_digest=embedding_digest(vector),
            requested_limit=4,
        )  # fmt: skip
        decision = dict(conn.execute(select(auth)).mappings().one())
        cap = decision["candidate_limit"]
        lex = pyretrieve_sa.lexical_candidates(
            decision=decision["decision_id"], query=SHARED_WORD, limit=cap
        )
        lexical = [dict(r) for r in conn.execute(select(lex).order_by(lex.c.rank)).mappings()]
        vec = pyretrieve_sa.vector_candidates(
            decision=decision["decision_id"], model=MODEL, embedding=PROBE, limit=cap
        )
        vectors = [dict(r) for r in conn.execute(select(vec).order_by(vec.c.rank)).mappings()]
        ids = sorted({r["fragment_id"] for r in lexical + vectors}, key=str)
        rec = pyretrieve_sa.fragments(decision=decision["decision_id"], ids=ids)
        records = [dict(r) for r in conn.execute(select(rec)).mappings()]
    result = ranking.rank(
        decision=decision,
        lexical=lexical,
        vector=vectors,
        records=records,
        limit=4,
        semantic=SemanticStatus.used({"model": MODEL}),
        query_digest=request.query_digest,
        embedding_digest=embedding_digest(vector),
        weights=request.weights,
        fusion=request.fusion,
        weights_source="request",
        fusion_source="request",
    )
    assert lexical
    assert vectors
    assert [canonical_json(_blank(r.to_plain())) for r in result.results] == [
        canonical_json(_blank(r.to_plain())) for r in client.results
    ]


def test_a_decision_must_come_from_an_earlier_statement(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    """The candidate functions are STABLE: they read the decision through the snapshot of the
    statement that calls them, so a decision made by the same statement is not there yet and
    the call is refused, never answered from another decision."""
    _, s = seeded
    auth = pyretrieve_sa.authorize(
        workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha("apricot"),
        semantic_intent="disabled", embedding_digest=None, requested_limit=10,
    )  # fmt: skip
    same = pyretrieve_sa.lexical_candidates(
        decision=select(auth.c.decision_id).scalar_subquery(), query="apricot", limit=10
    )
    assert isinstance(_raised(engine, "alice", select(same)), InvalidDecision)
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "alice")
        decision = conn.execute(select(auth.c.decision_id)).scalar_one()
        lex = pyretrieve_sa.lexical_candidates(decision=decision, query="apricot", limit=10)
        got = conn.execute(select(lex.c.fragment_id, lex.c.score)).all()
    assert [r.fragment_id for r in got] == [s.acme["public"]]
    assert isinstance(got[0].score, float)


# ---------------------------------------------------------------------------------------------
# 3. Writers inside the application's own transaction
# ---------------------------------------------------------------------------------------------
class Base(DeclarativeBase):
    pass


class Note(Base):
    """An application table beside pyretrieve's, written in the same transaction."""

    __tablename__ = "app_notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    fragment_id: Mapped[UUID]
    title: Mapped[str]


def _app_table(db: Database) -> None:
    with db.admin() as admin:
        admin.execute("DROP TABLE IF EXISTS public.app_notes")
        admin.execute(
            "CREATE TABLE public.app_notes (id integer PRIMARY KEY, fragment_id uuid NOT NULL,"
            " title text NOT NULL)"
        )
        admin.execute(f'GRANT SELECT, INSERT, UPDATE ON public.app_notes TO "{role("wally")}"')
        admin.commit()


def _visible(engine: Engine, nick: str, fragment_id: UUID) -> bool:
    auth = pyretrieve_sa.authorize(
        workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha("x"),
        semantic_intent="disabled", embedding_digest=None, requested_limit=1,
    )  # fmt: skip
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, nick)
        decision = conn.execute(select(auth.c.decision_id)).scalar_one()
        rec = pyretrieve_sa.fragments(decision=decision, ids=[fragment_id])
        found = conn.execute(select(rec.c.fragment_id)).scalars().all()
        return found == [fragment_id]


def test_writers_commit_and_roll_back_with_the_applications_rows(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    db, _ = seeded
    _app_table(db)
    body = "acme internal zucchini handbook page"

    # Rolled back: neither the application's row nor the fragment stays.
    written: list[UUID] = []

    def change_of_mind() -> None:
        with Session(engine) as session, session.begin():
            as_(session, "wally")
            fid = session.scalar(
                select(pyretrieve_sa.put_fragment(workspace="acme", project="docs", body=body))
            )
            assert isinstance(fid, UUID)
            written.append(fid)
            session.add(Note(id=1, fragment_id=fid, title="zucchini"))
            session.flush()
            raise RuntimeError("the application changes its mind")

    with pytest.raises(RuntimeError):
        change_of_mind()
    assert not _visible(engine, "alice", written[0])
    with engine.begin() as conn:
        as_(conn, "wally")
        assert conn.execute(select(Note.fragment_id)).scalars().all() == []

    # Committed: both.
    with pyretrieve_sa.translated(), Session(engine) as session, session.begin():
        as_(session, "wally")
        fid = session.scalar(
            select(
                pyretrieve_sa.put_fragment(
                    workspace="acme", project="docs", body=body, classification="internal",
                    source_uri="handbook.md#zucchini",
                )
            )
        )  # fmt: skip
        assert fid is not None
        session.add(Note(id=1, fragment_id=fid, title="zucchini"))
        generation = session.scalar(
            select(
                pyretrieve_sa.put_embedding(
                    workspace="acme", project="docs", fragment_id=fid, model=MODEL,
                    embedding=[0.0, 1.0, 0.0], source_digest=sha(body),
                )
            )
        )  # fmt: skip
        assert isinstance(generation, int)
    assert _visible(engine, "alice", fid)
    with engine.begin() as conn:
        as_(conn, "wally")
        assert conn.execute(select(Note.fragment_id)).scalars().all() == [fid]

    # Supersede, then retract, each in its own transaction.
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "wally")
        new = conn.scalar(
            select(
                pyretrieve_sa.supersede_fragment(
                    workspace="acme", project="docs", fragment_id=fid, body=body + " v2"
                )
            )
        )
        conn.execute(update(Note).where(Note.id == 1).values(fragment_id=new))
    assert new != fid
    assert not _visible(engine, "alice", fid)
    assert new is not None
    assert _visible(engine, "alice", new)
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "wally")
        done = conn.scalar(
            select(
                pyretrieve_sa.retract_fragment(workspace="acme", project="docs", fragment_id=new)
            )
        )
    assert done is None
    assert not _visible(engine, "alice", new)


# ---------------------------------------------------------------------------------------------
# 4. The same typed errors, sanitised and unchained
# ---------------------------------------------------------------------------------------------
def _run(engine: Engine, nick: str | None, *statements: Any) -> None:
    """The statements in one transaction as ``nick`` (None: the login role), translated."""
    with pyretrieve_sa.translated(), engine.begin() as conn:
        if nick is not None:
            as_(conn, nick)
        for statement in statements:
            conn.execute(statement)


def _raised(engine: Engine, nick: str | None, *statements: Any) -> PyretrieveError:
    with pytest.raises(PyretrieveError) as info:
        _run(engine, nick, *statements)
    error = info.value
    # Unchained, and nothing of the statement or its parameters in what a caller sees.
    assert error.__cause__ is None
    assert error.__suppress_context__
    shown = "".join(traceback.format_exception(error))
    for leak in ("SELECT", "pyretrieve.", "p_workspace", "sqlalchemy", "psycopg", "dagger"):
        assert leak not in str(error)
        assert leak not in error.message
    assert "psycopg.errors" not in shown
    assert "[SQL:" not in shown
    return error


def _search(**kw: Any) -> Any:
    args = {"workspace": "acme", "project": "docs", "purpose": PURPOSE, "query": "dagger"}
    hits = pyretrieve_sa.search(**{**args, **kw})
    return select(hits)


def test_errors_are_typed_and_carry_nothing_of_the_statement(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    _, s = seeded
    # Denied alike: a foreign workspace, an absent one, a scope without a grant.
    for workspace in ("globex", "nowhere"):
        error = _raised(engine, "alice", _search(workspace=workspace))
        assert isinstance(error, AccessDenied)
        assert (error.code, error.sqlstate, error.message) == (
            AccessDenied.code,
            "PR001",
            "access denied",
        )
    assert isinstance(_raised(engine, "nobody", _search()), AccessDenied)
    # Bad input, checked by the database.
    assert isinstance(_raised(engine, "alice", _search(limit=0)), InvalidInput)
    assert isinstance(_raised(engine, "alice", _search(mode="fuzzy")), InvalidInput)
    # A bad embedding never leaves Python.
    with pytest.raises(InvalidEmbedding):
        _run(engine, "alice", _search(embedding=[float("nan"), 0.0, 0.0], model=MODEL))
    # A writer above its ceiling, a fragment it may not see, a principal that does not exist.
    put = pyretrieve_sa.put_fragment(
        workspace="acme", project="docs", body="secret", classification="restricted"
    )
    assert isinstance(_raised(engine, "wally", select(put)), AccessDenied)
    retract = pyretrieve_sa.retract_fragment(
        workspace="acme", project="docs", fragment_id=s.acme["restricted"]
    )
    assert isinstance(_raised(engine, "wally", select(retract)), NotFound)
    with pytest.raises(UnknownPrincipal), pyretrieve_sa.translated(), engine.begin() as conn:
        pyretrieve_sa.act_as(conn, "no_such_role")
    # The login role itself is no principal.
    assert isinstance(_raised(engine, None, _search()), AccessDenied)


def test_a_superuser_engine_is_refused(seeded: tuple[Database, Seeded]) -> None:
    db, _ = seeded
    admin = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(db.admin_dsn))
    try:
        assert isinstance(_raised(admin, None, _search()), PrivilegedCaller)
    finally:
        admin.dispose()


def test_one_read_decision_per_transaction_holds_in_a_session(engine: Engine) -> None:
    # A second search, an authorize after one, a search after a write: one binding per
    # transaction.
    write = select(pyretrieve_sa.put_fragment(workspace="acme", project="docs", body="x"))
    auth = pyretrieve_sa.authorize(
        workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha("x"),
        semantic_intent="disabled", embedding_digest=None, requested_limit=10,
    )  # fmt: skip
    for nick, first, second in (
        ("alice", _search(query="apricot"), _search(query="bramble")),
        ("alice", _search(query="apricot"), select(auth)),
        # A writer's scope binds the transaction too; authorize checks that before any grant.
        ("wally", write, _search(query="apricot")),
    ):
        error = _raised(engine, nick, first, second)
        assert isinstance(error, InvalidDecision), (nick, second)
        assert error.sqlstate == "PR003"


def test_a_decision_of_another_transaction_or_principal_is_refused(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    auth = pyretrieve_sa.authorize(
        workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha("x"),
        semantic_intent="disabled", embedding_digest=None, requested_limit=10,
    )  # fmt: skip
    with engine.begin() as conn:
        as_(conn, "alice")
        alices = conn.execute(select(auth.c.decision_id)).scalar_one()
    replay = select(pyretrieve_sa.lexical_candidates(decision=alices, query="dagger", limit=10))
    # The same principal later, and another principal holding a grant of its own.
    assert isinstance(_raised(engine, "alice", replay), InvalidDecision)
    assert isinstance(_raised(engine, "bob", select(auth), replay), InvalidDecision)


# ---------------------------------------------------------------------------------------------
# 5. Attacks: a principal holding a SQLAlchemy session still reaches no table
# ---------------------------------------------------------------------------------------------
def _pyretrieve_tables(db: Database) -> dict[str, tuple[str, str]]:
    """Every table and view of the schema, with its kind and first column."""
    with db.connect() as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relkind::text, a.attname FROM pg_class c"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1"
            " WHERE c.relnamespace = 'pyretrieve'::regnamespace"
            " AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1"
        ).fetchall()
    return {r["relname"]: (r["relkind"], r["attname"]) for r in rows}


@pytest.mark.parametrize("nick", ["alice", "wally", "adam"])
def test_no_principal_reaches_a_table_through_sqlalchemy(
    seeded: tuple[Database, Seeded], engine: Engine, nick: str
) -> None:
    db, _ = seeded
    tables = _pyretrieve_tables(db)
    assert {"fragments", "embeddings", "grants", "decisions", "lexical_blocks"} <= set(tables)
    metadata = MetaData(schema="pyretrieve")
    for name, (kind, first) in tables.items():
        # Core constructs of the table: a select, and for a table an insert and an update (a
        # view of the schema is not updatable, whoever asks).
        t = Table(name, metadata, Column(first))
        writes = [insert(t).values({first: None}), update(t).values({first: None})]
        for statement in [
            select(literal_column("1")).select_from(t),
            *(writes if kind == "r" else []),
        ]:
            assert isinstance(_raised(engine, nick, statement), AccessDenied), (name, statement)
    # Reflection reads the catalog (names are not secret), but rows stay out of reach.
    with engine.connect() as conn:
        reflected = Table("fragments", MetaData(), schema="pyretrieve", autoload_with=conn)
    assert "body" in reflected.c
    assert isinstance(_raised(engine, nick, select(reflected.c.body)), AccessDenied)

    # The ORM, mapped onto pyretrieve's table.
    def orm() -> None:
        with pyretrieve_sa.translated(), Session(engine) as session, session.begin():
            as_(session, nick)
            session.execute(select(reflected.c.body).where(reflected.c.body.contains("dagger")))

    with pytest.raises(AccessDenied):
        orm()
    # Textual SQL, a cursor, and the API's helpers used as a side door.
    for sql in (
        "SELECT body FROM pyretrieve.fragments",
        "DECLARE c CURSOR FOR SELECT * FROM pyretrieve.embeddings",
        "SELECT * FROM pyretrieve.bound_decision()",
        "SELECT pyretrieve.visible_successor('acme', 'docs', gen_random_uuid())",
    ):
        assert isinstance(_raised(engine, nick, text(sql)), AccessDenied), sql


def test_the_role_of_one_transaction_does_not_outlive_it_in_the_pool(engine: Engine) -> None:
    who = text("SELECT current_user::text")
    with engine.begin() as conn:
        as_(conn, "alice")
        assert conn.scalar(who) == role("alice")
    # The pool hands back the same connection: it is the login role again.
    with engine.begin() as conn:
        assert conn.scalar(who) == role("authenticator")
        pid = conn.scalar(text("SELECT pg_backend_pid()"))
    # Rolled back by an error: the role is undone too.
    with pytest.raises(AccessDenied):
        _run(engine, "alice", _search(workspace="globex"))
    with engine.begin() as conn:
        assert conn.scalar(text("SELECT pg_backend_pid()")) == pid
        assert conn.scalar(who) == role("authenticator")


def test_hidden_rows_stay_hidden_through_every_construct(
    seeded: tuple[Database, Seeded], engine: Engine
) -> None:
    """alice asks for what she may not see, by words, by the probe vector and by id."""
    _, s = seeded
    hidden = [s.acme[c] for c, (_, _, visible) in CASES.items() if not visible] + s.globex
    markers = " ".join(CASES[c][0] for c, (_, _, visible) in CASES.items() if not visible)
    auth = pyretrieve_sa.authorize(
        workspace="acme", project="docs", purpose=PURPOSE, query_digest=sha(markers),
        semantic_intent="optional", embedding_digest=None, requested_limit=50,
    )  # fmt: skip
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "alice")
        d = conn.execute(select(auth.c.decision_id)).scalar_one()
        got: set[UUID] = set()
        for construct in (
            pyretrieve_sa.lexical_candidates(decision=d, query=markers, limit=100),
            pyretrieve_sa.vector_candidates(decision=d, model=MODEL, embedding=PROBE, limit=100),
            pyretrieve_sa.fragments(decision=d, ids=hidden),
        ):
            got |= {r.fragment_id for r in conn.execute(select(construct.c.fragment_id))}
    assert got
    assert not got & set(hidden)
    with pyretrieve_sa.translated(), engine.begin() as conn:
        as_(conn, "alice")
        rows = conn.execute(_search(query=markers, embedding=PROBE, model=MODEL, limit=50)).all()
    assert not {r.fragment_id for r in rows} & set(hidden)
    assert not [r for r in rows if any(w in r.body for w in markers.split())]
