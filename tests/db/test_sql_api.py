"""The SQL API's contract: authorize(), the candidate functions and fragments() — columns,
bounds, SQLSTATEs, decision binding, OR semantics and a total order of ranks.

Tests that only read or fail share one seeded database (plus a scope ``acme/ties`` built for
ties); tests that change grants use a database of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, role, second_wall
from tests.db.seed import (
    CASES,
    INGEST,
    MODEL,
    PROBE,
    PURPOSE,
    SHARED_WORD,
    VISIBLE_CASES,
    Seeded,
    authorize,
    embed,
    error_as,
    error_fields,
    grant,
    lexical,
    put,
    records,
    seed,
    seeded_database,
    sha,
    vector,
)

Conn = psycopg.Connection[Any]


def count_decisions(db: Database, query_digest: bytes) -> dict[str, int]:
    """Decisions with this query digest, read by the superuser: principals, admins included,
    hold no privilege on the audit table."""
    with db.admin() as admin:
        row = admin.execute(
            "SELECT count(*)::int AS n FROM pyretrieve.decisions WHERE query_digest = %s",
            (query_digest,),
        ).fetchone()
    assert row is not None
    return dict(row)


# acme/ties: bodies built so that scores and distances tie.
TIE_BODIES = [
    ("zebra apple", "public"),
    ("zebra apple", "internal"),  # same body and digest: only the fragment id breaks the tie
    ("zebra mango", "public"),
    ("zebra melon", "public"),
    ("zebra zebra zebra", "public"),  # the best lexical match for "zebra"
    ("walrus tusk", "public"),
    ("narwhal horn", "public"),
    ("unrelated text", "public"),
]


@pytest.fixture(scope="module")
def shared(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded, dict[str, Any]]]:
    with seeded_database(server, template_db) as (db, s), db.connect(autocommit=True) as conn:
        with acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.create_project('acme', 'ties')")
            grant(conn, role("alice"), "acme", "ties", PURPOSE, "restricted")
            grant(conn, role("walt"), "acme", "ties", INGEST, "restricted")
        ties: dict[str, Any] = {"ids": []}
        with acting_as(conn, "walt"):
            for body, classification in TIE_BODIES:
                fid = put(conn, "acme", "ties", body, classification)
                # Every embedding identical: vector distances tie across the whole scope.
                embed(conn, "acme", "ties", fid, (0.0, 1.0, 0.0), body)
                ties["ids"].append(fid)
        yield db, s, ties


@pytest.fixture
def s(shared: tuple[Database, Seeded, dict[str, Any]]) -> Seeded:
    return shared[1]


@pytest.fixture
def ties(shared: tuple[Database, Seeded, dict[str, Any]]) -> dict[str, Any]:
    return shared[2]


@pytest.fixture
def conn(shared: tuple[Database, Seeded, dict[str, Any]]) -> Iterator[Conn]:
    """An authenticator connection to the shared database (overrides the harness's)."""
    with shared[0].connect(autocommit=True) as c:
        yield c


@pytest.fixture
def fresh(db: Database) -> Iterator[tuple[Conn, Seeded]]:
    """A freshly seeded database of the test's own, for tests that change grants."""
    with db.connect(autocommit=True) as c:
        yield c, seed(db, c)


# ---------------------------------------------------------------------------------------------
# authorize()
# ---------------------------------------------------------------------------------------------
DECISION_COLUMNS = [
    "decision_id", "principal", "workspace_id", "project_id", "purpose", "evaluated_at",
    "ceiling", "max_age", "semantic_policy", "candidate_limit", "grant_id",
]  # fmt: skip


@pytest.mark.parametrize(
    ("requested", "candidate"), [(1, 100), (10, 100), (500, 500), (1000, 1000)]
)
def test_authorize_returns_the_documented_decision(
    conn: Conn, s: Seeded, requested: int, candidate: int
) -> None:
    with acting_as(conn, "alice"):
        cur = conn.execute(
            "SELECT * FROM pyretrieve.authorize('acme', 'docs', %s, %s, 'optional', NULL, %s)",
            (PURPOSE, sha("q"), requested),
        )
        assert [c.name for c in cur.description or []] == DECISION_COLUMNS
        d = cur.fetchone()
        assert d is not None
        now = conn.execute("SELECT now() AS t").fetchone()
        second_wall(conn)
        bound = conn.execute(
            "SELECT decision_id::text AS v FROM pyretrieve.bound_decision()"
        ).fetchone()
    assert d == {
        "decision_id": d["decision_id"],
        "principal": role("alice"),
        "workspace_id": "acme",
        "project_id": "docs",
        "purpose": PURPOSE,
        "evaluated_at": now and now["t"],
        "ceiling": "confidential",
        "max_age": timedelta(days=30),
        "semantic_policy": "optional",
        "candidate_limit": candidate,
        "grant_id": s.grants["alice"],
    }
    assert isinstance(d["decision_id"], uuid.UUID)
    assert bound == {"v": str(d["decision_id"])}


def test_authorize_records_digests_and_intent_only(conn: Conn, s: Seeded) -> None:
    query = "xyzzy plugh secret question text"
    edigest = sha("[0.25,0.5,0.75]")
    with acting_as(conn, "alice"):
        d = authorize(conn, query=query, intent="required", limit=7, embedding_digest=edigest)
        second_wall(conn)
        row = conn.execute(
            "SELECT *, row_to_json(x)::text AS j FROM pyretrieve.decisions x WHERE decision_id = %s",
            (d["decision_id"],),
        ).fetchone()
        columns = conn.execute(
            "SELECT column_name::text AS c, data_type::text AS t FROM information_schema.columns"
            " WHERE table_schema = 'pyretrieve' AND table_name = 'decisions'"
        ).fetchall()
    assert row is not None
    assert row["query_digest"] == sha(query)
    assert row["embedding_digest"] == edigest
    assert (row["semantic_intent"], row["requested_limit"]) == ("required", 7)
    assert (row["principal"], row["grant_id"]) == (role("alice"), s.grants["alice"])
    for word in query.split():
        assert word not in row["j"]
    # No column could hold query text: the only text-like columns are identifiers and intent.
    textual = {c["c"] for c in columns if c["t"] in ("text", "character varying", "name")}
    assert textual <= {"workspace_id", "principal", "project_id", "purpose", "semantic_intent"}
    assert not {c["c"] for c in columns} & {"query", "query_text", "embedding", "body"}


def test_second_authorize_in_one_transaction_is_refused(conn: Conn, s: Seeded) -> None:
    # One decision per transaction, for another scope and for the same one alike.
    for other in [
        ("acme", "wiki", PURPOSE),
        ("acme", "docs", "audit"),
        ("globex", "docs", PURPOSE),
        ("acme", "docs", PURPOSE),
    ]:
        err = error_as(conn, "alice", lambda: authorize(conn), lambda o=other: authorize(conn, *o))
        assert err.sqlstate == "PR003", other
    # Nor after a write in the same transaction.
    err = error_as(
        conn, "walt", "SELECT pyretrieve.bind_write_scope('acme', 'docs')", lambda: authorize(conn)
    )
    assert err.sqlstate in ("PR003", "PR001")


def test_clearing_or_forging_the_old_decision_setting_changes_nothing(
    conn: Conn, s: Seeded
) -> None:
    """The attack on 0003: clear pyretrieve.decision, authorize again, switch the setting."""
    with acting_as(conn, "alice"):
        docs = authorize(conn)["decision_id"]
        conn.execute("SELECT set_config('pyretrieve.decision', '', true)")
        with pytest.raises(psycopg.Error) as again, conn.transaction():
            authorize(conn, "acme", "wiki")
        conn.execute("SELECT set_config('pyretrieve.decision', %s, true)", (str(uuid.uuid4()),))
        with pytest.raises(psycopg.Error) as direct, conn.transaction():
            conn.execute("SELECT * FROM pyretrieve.fragments")
        found = {r["fragment_id"] for r in lexical(conn, docs, SHARED_WORD)}
        second_wall(conn)
        seen = {r["fragment_id"] for r in conn.execute("SELECT * FROM pyretrieve.fragments")}
    assert again.value.sqlstate == "PR003"
    assert direct.value.sqlstate == "42501"
    assert found <= s.visible
    assert seen == s.visible


ZERO = b"\x00" * 32
INVALID = {
    "workspace upper case": ("Acme", "docs", PURPOSE, ZERO, "optional", None, 10),
    "workspace empty": ("", "docs", PURPOSE, ZERO, "optional", None, 10),
    "workspace null": (None, "docs", PURPOSE, ZERO, "optional", None, 10),
    "workspace too long": ("a" * 64, "docs", PURPOSE, ZERO, "optional", None, 10),
    "workspace with slash": ("acme/docs", "docs", PURPOSE, ZERO, "optional", None, 10),
    "workspace with quote": ("acme'--", "docs", PURPOSE, ZERO, "optional", None, 10),
    "project leading dash": ("acme", "-docs", PURPOSE, ZERO, "optional", None, 10),
    "purpose with space": ("acme", "docs", "sup port", ZERO, "optional", None, 10),
    "query digest 31 bytes": ("acme", "docs", PURPOSE, b"\x00" * 31, "optional", None, 10),
    "query digest 33 bytes": ("acme", "docs", PURPOSE, b"\x00" * 33, "optional", None, 10),
    "query digest null": ("acme", "docs", PURPOSE, None, "optional", None, 10),
    "embedding digest 16 bytes": ("acme", "docs", PURPOSE, ZERO, "optional", b"\x00" * 16, 10),
    "intent unknown": ("acme", "docs", PURPOSE, ZERO, "always", None, 10),
    "intent upper case": ("acme", "docs", PURPOSE, ZERO, "Optional", None, 10),
    "intent null": ("acme", "docs", PURPOSE, ZERO, None, None, 10),
    "limit 0": ("acme", "docs", PURPOSE, ZERO, "optional", None, 0),
    "limit -1": ("acme", "docs", PURPOSE, ZERO, "optional", None, -1),
    "limit 1001": ("acme", "docs", PURPOSE, ZERO, "optional", None, 1001),
    "limit null": ("acme", "docs", PURPOSE, ZERO, "optional", None, None),
    # Validation comes before the grant look-up: a foreign scope gets the same PR010.
    "foreign scope, limit 0": ("globex", "docs", PURPOSE, ZERO, "optional", None, 0),
}


@pytest.mark.parametrize("args", list(INVALID.values()), ids=list(INVALID))
def test_authorize_rejects_invalid_input(
    conn: Conn, shared: tuple[Database, Seeded, dict[str, Any]], args: tuple[Any, ...]
) -> None:
    err = error_as(
        conn, "alice", ("SELECT * FROM pyretrieve.authorize(%s, %s, %s, %s, %s, %s, %s)", args)
    )
    assert err.sqlstate == "PR010", error_fields(err)
    n = count_decisions(shared[0], b"\x00" * 32)
    assert n == {"n": 0}


def test_expired_grant_is_denied(fresh: tuple[Conn, Seeded]) -> None:
    conn, _ = fresh
    with acting_as(conn, "adam"):
        grant(
            conn,
            role("carol"),
            "acme",
            "docs",
            PURPOSE,
            "public",
            expires="now() - interval '1 second'",
        )
        grant(
            conn,
            role("carol"),
            "acme",
            "docs",
            "later",
            "public",
            expires="now() + interval '1 day'",
        )
        grant(
            conn,
            role("wally"),
            "acme",
            "docs",
            INGEST,
            "internal",
            expires="now() - interval '1 second'",
        )
    expired = error_as(conn, "carol", lambda: authorize(conn))
    never = error_as(conn, "carol", lambda: authorize(conn, purpose="never-granted"))
    assert expired.sqlstate == "PR001"
    assert error_fields(expired) == error_fields(never)
    with acting_as(conn, "carol"):  # positive control: the live grant works
        assert authorize(conn, purpose="later")["ceiling"] == "public"
    err = error_as(conn, "wally", lambda: put(conn, "acme", "docs", "after expiry"))
    assert err.sqlstate == "PR001"
    with acting_as(conn, "wally"):  # wally's expired grant no longer binds a write scope
        conn.execute("SELECT set_config('pyretrieve.write_scope', 'acme/docs', true)")
        second_wall(conn)
        assert conn.execute("SELECT count(*) AS n FROM pyretrieve.fragments").fetchone() == {"n": 0}


def test_revoked_grant_is_denied(fresh: tuple[Conn, Seeded]) -> None:
    conn, s = fresh
    with acting_as(conn, "alice"):
        authorize(conn)
    with acting_as(conn, "adam"):
        row = conn.execute(
            "SELECT pyretrieve.revoke_access(%s::regrole, 'acme', 'docs', %s) AS r",
            (role("alice"), PURPOSE),
        ).fetchone()
        assert row == {"r": True}
    err = error_as(conn, "alice", lambda: authorize(conn))
    assert err.sqlstate == "PR001"
    with acting_as(conn, "adam"):  # alice keeps only the group's grant (acme/wiki)
        left = conn.execute(
            "SELECT workspace_id, project_id FROM pyretrieve.list_grants() WHERE principal IN (%s, 'pyretrieve_reader')",
            (role("alice"),),
        ).fetchall()
        assert left == [{"workspace_id": "acme", "project_id": "wiki"}]
    with acting_as(conn, "bob"):  # bob's grant on the same scope is untouched
        assert authorize(conn)["grant_id"] == s.grants["bob"]


def test_group_grant_applies_to_members(conn: Conn, s: Seeded) -> None:
    for nick in ("carol", "alice", "wally"):  # readers, and writers (members through the group)
        with acting_as(conn, nick):
            d = authorize(conn, "acme", "wiki")
            ids = {r["fragment_id"] for r in records(conn, d["decision_id"], s.wiki)}
        assert (d["grant_id"], d["ceiling"]) == (s.grants["group"], "public"), nick
        assert ids == set(s.wiki), nick
    for nick in ("nobody", "adam"):  # not members of pyretrieve_reader
        err = error_as(conn, nick, lambda: authorize(conn, "acme", "wiki"))
        assert err.sqlstate in ("42501", "PR001"), nick


# ---------------------------------------------------------------------------------------------
# Candidate functions: decision binding and bounds
# ---------------------------------------------------------------------------------------------
CALLS: dict[str, Callable[[Conn, Any], object]] = {
    "lexical": lambda conn, d: lexical(conn, d, SHARED_WORD),
    "vector": lambda conn, d: vector(conn, d, PROBE),
    "fragments": lambda conn, d: records(conn, d, [uuid.uuid4()]),
}


@pytest.mark.parametrize("function", list(CALLS))
@pytest.mark.parametrize("variant", ["other principal", "earlier transaction", "random", "null"])
def test_candidates_refuse_a_decision_that_is_not_the_callers_bound_one(
    conn: Conn, s: Seeded, function: str, variant: str
) -> None:
    with acting_as(conn, "alice"):
        alices = authorize(conn)["decision_id"]
    call = CALLS[function]
    if variant == "other principal":
        # bob holds a decision of his own in this transaction and passes alice's id.
        err = error_as(conn, "bob", lambda: authorize(conn), lambda: call(conn, alices))
    elif variant == "earlier transaction":
        err = error_as(conn, "alice", lambda: authorize(conn), lambda: call(conn, alices))
    else:
        d = uuid.uuid4() if variant == "random" else None
        err = error_as(conn, "alice", lambda: authorize(conn), lambda: call(conn, d))
    assert err.sqlstate == "PR002"
    assert error_fields(err)[1] == "decision not valid for this request"


@pytest.mark.parametrize("limit", [0, -1, 101, 1000, None])
@pytest.mark.parametrize("function", ["lexical", "vector"])
def test_candidate_limit_is_bounded_by_the_decision(
    conn: Conn, s: Seeded, function: str, limit: int | None
) -> None:
    def call(d: uuid.UUID, n: int | None) -> list[dict[str, Any]]:
        if function == "lexical":
            return lexical(conn, d, SHARED_WORD, n)  # type: ignore[arg-type]
        return vector(conn, d, PROBE, n)  # type: ignore[arg-type]

    with acting_as(conn, "alice"):
        d = authorize(conn, limit=10)  # candidate_limit 100
        assert len(call(d["decision_id"], 100)) == len(s.visible)
        assert len(call(d["decision_id"], 1)) == 1
    err = error_as(conn, "alice", lambda: call(authorize(conn, limit=10)["decision_id"], limit))
    assert err.sqlstate == "PR010"


def test_fragments_bounds_its_id_list(conn: Conn, s: Seeded) -> None:
    with acting_as(conn, "alice"):
        d = authorize(conn, limit=10)["decision_id"]  # candidate_limit 100: at most 200 ids
        padded = [*s.visible, *(uuid.uuid4() for _ in range(200 - len(s.visible)))]
        assert {r["fragment_id"] for r in records(conn, d, padded)} == s.visible
    for ids in ([*padded, uuid.uuid4()], None):
        err = error_as(
            conn, "alice",
            lambda i=ids: records(conn, authorize(conn, limit=10)["decision_id"], i),
        )  # fmt: skip
        assert err.sqlstate == "PR010"


@pytest.mark.parametrize(
    ("query", "ok"),
    [("", False), (None, False), ("x" * 4097, False), ("ledger" + " x" * 2045, True)],
)
def test_lexical_query_length_is_bounded(
    conn: Conn, s: Seeded, query: str | None, ok: bool
) -> None:
    def run() -> list[dict[str, Any]]:
        return lexical(conn, authorize(conn)["decision_id"], query)  # type: ignore[arg-type]

    if ok:
        assert query is not None
        assert len(query) == 4096
        with acting_as(conn, "alice"):
            assert run()
    else:
        assert error_as(conn, "alice", run).sqlstate == "PR010"


BAD_VECTORS = {
    "too short": ([1.0, 0.0], "PR011"),
    "too long": ([1.0, 0.0, 0.0, 0.0], "PR011"),
    "zero": ([0.0, 0.0, 0.0], "PR011"),
}


@pytest.mark.parametrize("name", list(BAD_VECTORS))
def test_bad_embedding_is_refused_on_read_and_write(conn: Conn, s: Seeded, name: str) -> None:
    values, state = BAD_VECTORS[name]
    read = error_as(conn, "alice", lambda: vector(conn, authorize(conn)["decision_id"], values))
    write = error_as(
        conn, "walt", lambda: embed(conn, "acme", "docs", s.acme["public"], values, "bad")
    )
    assert (read.sqlstate, write.sqlstate) == (state, state)


@pytest.mark.parametrize("literal", ["[NaN,0,0]", "[1,NaN,0]", "[Infinity,0,0]", "[-Infinity,1,0]"])
def test_nan_and_infinity_in_a_vector_literal_are_rejected(
    conn: Conn, s: Seeded, literal: str
) -> None:
    def snapshot() -> list[dict[str, Any]]:
        with acting_as(conn, "walt"):
            conn.execute("SELECT pyretrieve.bind_write_scope('acme', 'docs')")
            second_wall(conn)
            return conn.execute(
                "SELECT fragment_id, embedding::text AS v, vector_generation"
                " FROM pyretrieve.embeddings ORDER BY fragment_id"
            ).fetchall()

    before = snapshot()
    read = error_as(
        conn, "alice", lambda: authorize(conn),
        ("SELECT * FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, 10)",
         (uuid.uuid4(), MODEL, literal)),
    )  # fmt: skip
    write = error_as(
        conn, "walt",
        ("SELECT pyretrieve.put_embedding('acme', 'docs', %s, %s, %s::public.vector, %s)",
         (s.acme["public"], MODEL, literal, sha("x"))),
    )  # fmt: skip
    for err in (read, write):
        assert err.sqlstate is not None
        assert err.sqlstate.startswith("22") or err.sqlstate == "PR011", error_fields(err)
    assert snapshot() == before


def test_unknown_model_is_refused(conn: Conn, s: Seeded) -> None:
    read = error_as(
        conn, "alice", lambda: vector(conn, authorize(conn)["decision_id"], PROBE, model="nope")
    )
    write = error_as(
        conn,
        "walt",
        lambda: embed(conn, "acme", "docs", s.acme["public"], PROBE, "x", model="nope"),
    )
    assert (read.sqlstate, write.sqlstate) == ("PR012", "PR012")
    assert error_fields(read)[1] == error_fields(write)[1] == "unknown embedding model"


# ---------------------------------------------------------------------------------------------
# Lexical OR semantics and a total order of ranks
# ---------------------------------------------------------------------------------------------
def tie_rows(conn: Conn, query: str | None = None, values: Any = None, limit: int = 100) -> Any:
    with acting_as(conn, "alice"):
        d = authorize(conn, "acme", "ties")["decision_id"]
        if query is not None:
            return lexical(conn, d, query, limit)
        return vector(conn, d, values, limit)


def test_lexical_or_semantics(conn: Conn, s: Seeded, ties: dict[str, Any]) -> None:
    ids = dict(zip((b for b, _ in TIE_BODIES), ties["ids"], strict=False))
    # No fragment holds both words; OR semantics still finds both.
    rows = tie_rows(conn, "walrus narwhal")
    assert {r["fragment_id"] for r in rows} == {ids["walrus tusk"], ids["narwhal horn"]}
    # A word no fragment holds does not empty the result.
    rows = tie_rows(conn, "walrus submarine kumquat")
    assert [r["fragment_id"] for r in rows] == [ids["walrus tusk"]]
    # Stop words only: nothing to match, no error.
    assert tie_rows(conn, "the and of") == []
    # In acme/docs, one marker word from each of three fragments.
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        got = {r["fragment_id"] for r in lexical(conn, d, "apricot bramble cobalt")}
    assert got == {s.acme["public"], s.acme["internal"], s.acme["confidential"]}


@pytest.mark.parametrize(
    "query",
    ["!cobalt", "cobalt & !apricot", "cobalt | (apricot", "cobalt:* <-> apricot", "'cobalt' ''"],
)
def test_query_text_cannot_change_the_query_shape(conn: Conn, s: Seeded, query: str) -> None:
    # tsquery operators in the text are plain text: never negation, prefix or a syntax error.
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        got = {r["fragment_id"] for r in lexical(conn, d, query)}
    assert s.acme["confidential"] in got
    assert got <= s.visible


def assert_total_order(rows: list[dict[str, Any]], key: str, descending: bool) -> None:
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    sign = -1.0 if descending else 1.0
    expected = sorted(rows, key=lambda r: (sign * r[key], r["content_digest"], r["fragment_id"]))
    assert [r["fragment_id"] for r in rows] == [r["fragment_id"] for r in expected]
    assert len({r["fragment_id"] for r in rows}) == len(rows)


def test_lexical_ranks_are_a_total_order_with_ties(conn: Conn, ties: dict[str, Any]) -> None:
    rows = tie_rows(conn, "zebra")
    assert len(rows) == 5
    assert_total_order(rows, "score", descending=True)
    assert rows[0]["content_digest"] == sha("zebra zebra zebra")
    tied = rows[1:]
    # Four rows share one score; two of them share one digest too.
    assert len({r["score"] for r in tied}) == 1
    assert len({r["content_digest"] for r in tied}) == 3
    same = [r for r in tied if r["content_digest"] == sha("zebra apple")]
    assert len(same) == 2
    assert same[0]["fragment_id"] < same[1]["fragment_id"]
    # Stable across calls and under a smaller limit (the limit cuts the same order).
    assert tie_rows(conn, "zebra") == rows
    assert tie_rows(conn, "zebra", limit=3) == rows[:3]


def test_vector_ranks_are_a_total_order_with_ties(conn: Conn, ties: dict[str, Any]) -> None:
    rows = tie_rows(conn, values=(0.0, 2.0, 0.0))
    assert len(rows) == len(TIE_BODIES)
    assert len({r["distance"] for r in rows}) == 1
    assert_total_order(rows, "distance", descending=False)
    assert tie_rows(conn, values=(0.0, 2.0, 0.0), limit=4) == rows[:4]
    assert [r["vector_generation"] > 0 for r in rows] == [True] * len(rows)
    assert {r["source_digest"] for r in rows} == {sha(b) for b, _ in TIE_BODIES}


def test_vector_candidates_order_by_cosine_distance(conn: Conn, s: Seeded) -> None:
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        rows = vector(conn, d, (1.0, 0.0, 0.0))
    # The seed puts visible rows at growing angles from the probe, in CASES order.
    order = [s.acme[c] for c in CASES if c in VISIBLE_CASES]
    assert [r["fragment_id"] for r in rows] == order
    distances = [r["distance"] for r in rows]
    assert distances == sorted(distances)
    assert 0 < distances[0] < distances[-1] < 1
