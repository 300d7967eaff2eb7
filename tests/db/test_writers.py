"""Write-side guarantees: who may write where, what the database computes itself, and that a
write never reveals a row the writer may not see.

Refusals write nothing, so the ``TestRefused`` tests share one seeded database; tests that
write get a freshly seeded database each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, at_second_wall, second_wall
from tests.db.seed import (
    CASES,
    MODEL,
    PROBE,
    Seeded,
    authorize,
    body_for,
    embed,
    error_as,
    error_fields,
    lexical,
    put,
    records,
    seed,
    seeded_database,
    sha,
    vector,
)

Conn = psycopg.Connection[Any]
ZERO_DIGEST = b"\x00" * 32


@pytest.fixture
def s(db: Database, conn: Conn) -> Seeded:
    return seed(db, conn)


@pytest.fixture(scope="module")
def shared(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded]]:
    with seeded_database(server, template_db) as pair:
        yield pair


def wall_rows(conn: Conn, statement: str) -> list[dict[str, Any]]:
    """What the second wall admits under this transaction's binding."""
    with at_second_wall(conn):
        return conn.execute(statement).fetchall()


def bind(conn: Conn, ws: str = "acme", project: str = "docs") -> str:
    row = conn.execute("SELECT pyretrieve.bind_write_scope(%s, %s) AS c", (ws, project)).fetchone()
    assert row is not None
    return str(row["c"])


def failure(conn: Conn, nick: str, statement: str, params: tuple[Any, ...] = ()) -> psycopg.Error:
    """Run one statement as nick in its own transaction (after binding acme/docs when nick is
    a writer) and return the error it must raise."""
    steps = (
        ["SELECT pyretrieve.bind_write_scope('acme', 'docs')"] if nick in ("wally", "walt") else []
    )
    return error_as(conn, nick, *steps, (statement, params))


def all_acme(conn: Conn) -> dict[uuid.UUID, dict[str, Any]]:
    """Every acme/docs fragment, read by walt (ceiling restricted, all states)."""
    with acting_as(conn, "walt"):
        bind(conn)
        second_wall(conn)
        rows = conn.execute("SELECT * FROM pyretrieve.fragments").fetchall()
    return {r["fragment_id"]: r for r in rows}


def all_embeddings(conn: Conn) -> dict[uuid.UUID, tuple[str, bytes, int]]:
    """Every acme/docs embedding, read by walt."""
    with acting_as(conn, "walt"):
        bind(conn)
        second_wall(conn)
        rows = conn.execute(
            "SELECT fragment_id, embedding::text AS v, source_digest, vector_generation"
            " FROM pyretrieve.embeddings"
        ).fetchall()
    return {r["fragment_id"]: (r["v"], r["source_digest"], r["vector_generation"]) for r in rows}


def scope_generations(db: Database) -> dict[str, Any]:
    """acme/docs's generations, read by the superuser (no principal may read them)."""
    with db.admin() as admin:
        row = admin.execute(
            "SELECT lexical_generation, vector_generation, ts_configs::text[] AS configs"
            " FROM pyretrieve.scope_generations WHERE workspace_id = 'acme' AND project_id = 'docs'"
        ).fetchone()
    assert row is not None
    return row


# Statements a reader tries (with its decision bound and the write scope named by hand).
READER_WRITES = [
    "SELECT pyretrieve.put_fragment('acme', 'docs', 'reader wrote this')",
    "SELECT pyretrieve.bind_write_scope('acme', 'docs')",
    "SELECT pyretrieve.retract_fragment('acme', 'docs', gen_random_uuid())",
    "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body)"
    " VALUES ('acme', 'docs', 'reader wrote this')",
    "UPDATE pyretrieve.fragments SET state = 'retracted'",
    "DELETE FROM pyretrieve.fragments",
    "DELETE FROM pyretrieve.embeddings",
    "INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)"
    " VALUES ('acme', 'docs', 'lexical', 1)",
    "INSERT INTO pyretrieve.lexical_blocks (workspace_id, project_id, lexeme, classification,"
    " first_docno, last_docno, postings, max_tf, min_length, min_observed_at, max_observed_at,"
    " entries)"
    " VALUES ('acme', 'docs', 'forged', 'public', 1, 1, 1, 1, 1, now(), now(), '{4294967297}')",
    "DELETE FROM pyretrieve.lexical_blocks",
    "UPDATE pyretrieve.lexical_blocks SET postings = postings",
    "INSERT INTO pyretrieve.lexical_tombstones (workspace_id, project_id, lexeme, classification,"
    " docno) VALUES ('acme', 'docs', 'forged', 'public', 1)",
    "DELETE FROM pyretrieve.lexical_tombstones",
    "INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)"
    " VALUES ('acme', 'docs', 'simple')",
    "INSERT INTO pyretrieve.grants (workspace_id, principal, project_id, purpose, ceiling)"
    " VALUES ('acme', current_user::regrole, 'docs', 'support', 'restricted')",
    "UPDATE pyretrieve.grants SET ceiling = 'restricted'",
    "UPDATE pyretrieve.decisions SET ceiling = 'restricted'",
    "DELETE FROM pyretrieve.decisions",
]


class TestRefused:
    """Refused writes: nothing is written, so these share one seeded database."""

    @pytest.fixture
    def s(self, shared: tuple[Database, Seeded]) -> Seeded:
        return shared[1]

    @pytest.fixture
    def conn(self, shared: tuple[Database, Seeded]) -> Iterator[Conn]:
        with shared[0].connect(autocommit=True) as c:
            yield c

    @pytest.mark.parametrize("statement", READER_WRITES)
    def test_reader_cannot_write(self, conn: Conn, s: Seeded, statement: str) -> None:
        before = all_acme(conn)
        err = error_as(
            conn,
            "alice",
            lambda: authorize(conn),
            "SELECT set_config('pyretrieve.write_scope', 'acme/docs', true)",
            statement,
        )
        assert err.sqlstate in ("PR001", "42501"), error_fields(err)
        assert all_acme(conn) == before

    # ---------------------------------------------------------------------------------------------
    # Writers cannot write outside their grants or above their ceiling
    # ---------------------------------------------------------------------------------------------
    def test_writer_outside_its_grants_is_denied_alike(self, conn: Conn, s: Seeded) -> None:
        gx = s.globex[0]
        calls = {
            "put": "SELECT pyretrieve.put_fragment(%s, %s, 'wally wrote this')",
            "retract": "SELECT pyretrieve.retract_fragment(%s, %s, %s)",
            "supersede": "SELECT pyretrieve.supersede_fragment(%s, %s, %s, 'x')",
            "embed": "SELECT pyretrieve.put_embedding(%s, %s, %s, 'test-3d', '[1,0,0]', %s)",
        }
        for name, statement in calls.items():
            seen = []
            for ws, project in [("globex", "docs"), ("nosuch", "docs"), ("acme", "nosuch")]:
                params: tuple[Any, ...] = (ws, project)
                if name != "put":
                    params += (gx,)
                if name == "embed":
                    params += (ZERO_DIGEST,)
                with pytest.raises(psycopg.Error) as exc, acting_as(conn, "wally"):
                    conn.execute(statement, params)
                seen.append(error_fields(exc.value))
            assert seen[0][:2] == ("PR001", "access denied"), name
            assert all(f == seen[0] for f in seen), (name, seen)
        with acting_as(conn, "walt"):
            bind(conn, "globex", "docs")
            second_wall(conn)
            bodies = {r["body"] for r in conn.execute("SELECT body FROM pyretrieve.fragments")}
        assert "wally wrote this" not in bodies

    def test_writer_cannot_exceed_its_ceiling(self, conn: Conn, s: Seeded) -> None:
        with acting_as(conn, "wally"):
            assert bind(conn) == "internal"
        api = []
        for classification in ("confidential", "restricted"):
            with pytest.raises(psycopg.Error) as exc, acting_as(conn, "wally"):
                put(conn, "acme", "docs", f"above ceiling {classification}", classification)
            api.append(error_fields(exc.value))
        assert api[0][:2] == ("PR001", "access denied")
        assert api[0] == api[1]
        err = failure(
            conn, "wally",
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, classification)"
            " VALUES ('acme', 'docs', 'above ceiling direct', 'confidential')",
        )  # fmt: skip
        assert isinstance(err, psycopg.errors.InsufficientPrivilege)
        assert not any(r["body"].startswith("above ceiling") for r in all_acme(conn).values())

    # ---------------------------------------------------------------------------------------------
    # The database computes digests and generations; writers cannot forge them
    # ---------------------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "statement",
        [
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, content_digest)"
            " VALUES ('acme', 'docs', 'forged digest', '\\x00')",
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, content_digest)"
            " VALUES ('acme', 'docs', 'forged digest', sha256('something else'))",
            "UPDATE pyretrieve.fragments SET body = 'rewritten' WHERE classification = 'internal'",
            "UPDATE pyretrieve.fragments SET content_digest = '\\x00'",
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, tsv)"
            " VALUES ('acme', 'docs', 'forged tsv', 'dagger')",
        ],
    )
    def test_writer_cannot_forge_content_digest(
        self, conn: Conn, s: Seeded, statement: str
    ) -> None:
        before = all_acme(conn)
        failure(conn, "wally", statement)
        after = all_acme(conn)
        assert after == before
        for row in after.values():
            assert row["content_digest"] == sha(row["body"])

    @pytest.mark.parametrize(
        "statement",
        [
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, lexical_generation)"
            " VALUES ('acme', 'docs', 'forged generation', 1)",
            "UPDATE pyretrieve.fragments SET lexical_generation = 1",
            "INSERT INTO pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest, vector_generation)"
            " SELECT workspace_id, project_id, fragment_id, 'test-3d', '[1,2,3]', content_digest, 1"
            " FROM pyretrieve.fragments WHERE classification = 'public'",
        ],
    )
    def test_writer_cannot_choose_generations(self, conn: Conn, s: Seeded, statement: str) -> None:
        before = all_acme(conn)
        err = failure(conn, "wally", statement)
        assert isinstance(err, psycopg.errors.InsufficientPrivilege)
        assert all_acme(conn) == before

    def test_writer_cannot_point_superseded_by_at_a_row_it_cannot_see(
        self, conn: Conn, s: Seeded
    ) -> None:
        before = all_acme(conn)
        targets = {
            "above ceiling": s.acme["restricted"],
            "foreign": s.globex[0],
            "absent": uuid.uuid4(),
        }
        direct = {}
        for name, target in targets.items():
            err = failure(
                conn, "wally",
                "UPDATE pyretrieve.fragments SET state = 'superseded', superseded_by = %s"
                " WHERE fragment_id = %s",
                (target, s.acme["internal"]),
            )  # fmt: skip
            direct[name] = error_fields(err)
        assert direct["above ceiling"] == direct["absent"] == direct["foreign"], direct
        assert all_acme(conn) == before
        # Through the API: superseding a row the writer cannot see is "not found", like an absent one.
        api = {}
        for name, target in [("above ceiling", s.acme["restricted"]), ("absent", uuid.uuid4())]:
            err = failure(
                conn,
                "wally",
                "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'x')",
                (target,),
            )
            api[name] = error_fields(err)
        assert api["above ceiling"][:2] == ("PR020", "fragment not found")
        assert api["above ceiling"] == api["absent"]
        assert all_acme(conn) == before

    def test_writer_cannot_embed_a_fragment_it_cannot_see(self, conn: Conn, s: Seeded) -> None:
        targets = {
            "confidential": s.acme["confidential"],
            "restricted": s.acme["restricted"],
            "foreign": s.globex[0],
            "absent": uuid.uuid4(),
        }
        before = all_embeddings(conn)
        api, direct = {}, {}
        for name, target in targets.items():
            err = failure(
                conn, "wally",
                "SELECT pyretrieve.put_embedding('acme', 'docs', %s, %s, '[0,0,1]', %s)",
                (target, MODEL, ZERO_DIGEST),
            )  # fmt: skip
            api[name] = error_fields(err)
            err = failure(
                conn, "wally",
                "INSERT INTO pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
                " embedding, source_digest) VALUES ('acme', 'docs', %s, %s, '[0,0,1]', %s)",
                (target, MODEL, ZERO_DIGEST),
            )  # fmt: skip
            direct[name] = error_fields(err)
        assert api["absent"][:2] == ("PR020", "fragment not found")
        assert all(f == api["absent"] for f in api.values()), api
        # By hand, the writer has no privilege on the table, whatever the target: the same
        # refusal for an invisible fragment and an absent one.
        assert direct["absent"][0] == "42501"
        assert all(f == direct["absent"] for f in direct.values()), direct
        assert all_embeddings(conn) == before

    def test_writer_reads_every_state_in_its_write_scope_up_to_its_ceiling(
        self, conn: Conn, s: Seeded
    ) -> None:
        assert set(all_acme(conn)) == set(s.acme.values())  # walt: ceiling restricted
        with acting_as(conn, "wally"):
            bind(conn)
            second_wall(conn)
            seen = {
                r["fragment_id"]
                for r in conn.execute("SELECT fragment_id FROM pyretrieve.fragments")
            }
        expected = {s.acme[c] for c, (_, cls, _) in CASES.items() if cls in ("public", "internal")}
        assert seen == expected
        with acting_as(conn, "wally"):  # unbound, the second wall admits nothing
            second_wall(conn)
            assert conn.execute("SELECT count(*) AS n FROM pyretrieve.fragments").fetchone() == {
                "n": 0
            }


# ---------------------------------------------------------------------------------------------
# Writes that succeed: digests and generations are the database's; keys never reveal hidden rows
# ---------------------------------------------------------------------------------------------
def test_writers_write_only_through_the_api_and_the_database_computes_digests(
    conn: Conn, s: Seeded
) -> None:
    err = failure(
        conn, "wally",
        "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body)"
        " VALUES ('acme', 'docs', 'direct insert')",
    )  # fmt: skip
    assert err.sqlstate == "42501"
    with acting_as(conn, "wally"):
        fid = put(conn, "acme", "docs", "through the api")
    assert all_acme(conn)[fid]["content_digest"] == sha("through the api")
    assert "direct insert" not in {r["body"] for r in all_acme(conn).values()}


def test_triggers_stamp_generations_from_the_scopes_own_sequence(
    db: Database, conn: Conn, s: Seeded
) -> None:
    start = scope_generations(db)
    high = max(r["lexical_generation"] for r in all_acme(conn).values())
    with acting_as(conn, "wally"):
        fid = put(conn, "acme", "docs", "stamped by the trigger")
        vgen = embed(conn, "acme", "docs", fid, (0.0, 1.0, 0.0), "stamped by the trigger")
    with acting_as(conn, "walt"):  # another scope's writes do not move acme/docs's numbers
        put(conn, "globex", "docs", "globex moves on")
    row = all_acme(conn)[fid]
    # Lexical and vector generations share the scope's sequence.
    assert row["lexical_generation"] > max(
        high, start["lexical_generation"], start["vector_generation"]
    )
    assert vgen == row["lexical_generation"] + 1
    end = scope_generations(db)
    assert end["lexical_generation"] == row["lexical_generation"]
    assert end["vector_generation"] == vgen


def test_the_row_trigger_analyses_the_text_whatever_a_statement_sets(
    db: Database, conn: Conn, s: Seeded
) -> None:
    """tsv and doc_length are not generated columns (0025): the row trigger sets both from the
    body on every write. Principals hold no privilege on the table; even a statement that may
    write them (here the superuser's, past RLS) cannot make them differ from the body."""
    truth = (
        "SELECT to_tsvector(%s::regconfig, %s) AS tsv,"
        " pyretrieve.tsvector_length(to_tsvector(%s::regconfig, %s)) AS n"
    )

    body = "Daggers drawn at dawn, daggers sheathed"
    with db.admin(autocommit=True) as su:

        def analysed(config: str, body: str) -> tuple[Any, int]:
            row = su.execute(truth, (config, body, config, body)).fetchone()
            assert row is not None
            return row["tsv"], row["n"]

        row = su.execute(
            "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, tsv, doc_length)"
            " VALUES ('acme', 'docs', %s, 'forged:1', 999) RETURNING fragment_id, tsv, doc_length",
            (body,),
        ).fetchone()
        assert row is not None
        assert (row["tsv"], row["doc_length"]) == analysed("english", body)
        assert row["doc_length"] == 5  # daggers twice, drawn, dawn, sheathed
        fid = row["fragment_id"]
        # Setting them alone changes nothing, in any row.
        before = {k: (r["tsv"], r["doc_length"]) for k, r in all_acme(conn).items()}
        su.execute("UPDATE pyretrieve.fragments SET tsv = 'forged:1', doc_length = 0")
        assert {k: (r["tsv"], r["doc_length"]) for k, r in all_acme(conn).items()} == before
        # A new body, or a new configuration, is analysed again.
        su.execute(
            "UPDATE pyretrieve.fragments SET body = 'a quiet harbour', doc_length = 0"
            " WHERE fragment_id = %s",
            (fid,),
        )
        after = all_acme(conn)[fid]
        assert (after["tsv"], after["doc_length"]) == analysed("english", "a quiet harbour")
        assert after["doc_length"] == 2
        su.execute(
            "UPDATE pyretrieve.fragments SET ts_config = 'simple' WHERE fragment_id = %s", (fid,)
        )
        after = all_acme(conn)[fid]
        assert (after["tsv"], after["doc_length"]) == analysed("simple", "a quiet harbour")
        assert after["doc_length"] == 3


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE pyretrieve.scope_generations"
        " SET lexical_generation = 0, vector_generation = 0, ts_configs = '{}'",
        "DELETE FROM pyretrieve.generation_log",
        "UPDATE pyretrieve.generation_log SET generation = 0",
        "DELETE FROM pyretrieve.scope_configs",
        # Forward is refused too: a writer can log no generation the sequence has not issued.
        "INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)"
        " VALUES ('acme', 'docs', 'lexical', 9000000000000000000)",
    ],
)
def test_writer_cannot_move_scope_generations_by_hand(
    db: Database, conn: Conn, s: Seeded, statement: str
) -> None:
    start = scope_generations(db)
    assert start["lexical_generation"] > 0
    failure(conn, "wally", statement)
    assert scope_generations(db) == start


@pytest.mark.parametrize("hidden", ["confidential", "restricted"])
def test_unique_key_collision_never_reveals_a_hidden_fragment(
    conn: Conn, s: Seeded, hidden: str
) -> None:
    body = body_for(hidden)
    with acting_as(conn, "wally"):
        via_api = put(conn, "acme", "docs", body, "internal")
        public = put(conn, "acme", "docs", body, "public")
        # The key oracle of 0003 (a hand-written INSERT colliding with a hidden row's key)
        # needs a table privilege no principal holds.
        with pytest.raises(psycopg.Error) as exc, conn.transaction():
            conn.execute(
                "INSERT INTO pyretrieve.lexical_tombstones (workspace_id, project_id, lexeme,"
                " classification, docno)"
                " SELECT 'acme', 'docs', 'dagger', %s, docno FROM pyretrieve.fragments"
                "  WHERE fragment_id = %s",
                (hidden, s.acme[hidden]),
            )
    assert exc.value.sqlstate == "42501"
    assert s.acme[hidden] not in (via_api, public)
    assert via_api != public
    rows = [r for r in all_acme(conn).values() if r["body"] == body]
    assert len(rows) == 3
    assert all(r["state"] == "active" for r in rows)


# ---------------------------------------------------------------------------------------------
# Idempotency, supersession, retraction, generations
# ---------------------------------------------------------------------------------------------
def test_put_fragment_is_idempotent_by_content(db: Database, conn: Conn, s: Seeded) -> None:
    with acting_as(conn, "wally"):
        first = put(conn, "acme", "docs", "same body twice")
        again = put(conn, "acme", "docs", "same body twice")
    gen = scope_generations(db)["lexical_generation"]
    with acting_as(conn, "wally"):
        later = put(conn, "acme", "docs", "same body twice")
        other = put(conn, "acme", "docs", "same body twice", "public")
        existing = put(conn, "acme", "docs", body_for("internal"), "internal")
    assert first == again == later
    assert other != first
    assert existing == s.acme["internal"]
    rows = [r for r in all_acme(conn).values() if r["body"] == "same body twice"]
    assert len(rows) == 2
    # The idempotent put wrote nothing, so only the public insert moved the counter.
    assert scope_generations(db)["lexical_generation"] == max(r["lexical_generation"] for r in rows)
    assert scope_generations(db)["lexical_generation"] > gen


def test_supersede_hides_the_old_fragment_and_shows_the_new(conn: Conn, s: Seeded) -> None:
    old = s.acme["internal"]
    with acting_as(conn, "wally"):
        row = conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'bramble revised') AS id",
            (old,),
        ).fetchone()
    assert row is not None
    new = row["id"]
    assert new != old
    rows = all_acme(conn)
    assert (rows[old]["state"], rows[old]["superseded_by"]) == ("superseded", new)
    assert (rows[new]["state"], rows[new]["classification"]) == ("active", "internal")
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        ids = {
            r["fragment_id"]
            for r in wall_rows(conn, "SELECT fragment_id FROM pyretrieve.fragments")
        }
        lex = {r["fragment_id"] for r in lexical(conn, d, "bramble")}
        got = {r["fragment_id"] for r in records(conn, d, [old, new])}
    assert new in ids
    assert old not in ids
    assert lex == {new}
    assert got == {new}


def test_retract_hides_the_fragment_everywhere(conn: Conn, s: Seeded) -> None:
    target = s.acme["public"]
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (target,))
    assert all_acme(conn)[target]["state"] == "retracted"
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        ids = {
            r["fragment_id"]
            for r in wall_rows(conn, "SELECT fragment_id FROM pyretrieve.fragments")
        }
        lex = {r["fragment_id"] for r in lexical(conn, d, "apricot")}
        vec_ids = {r["fragment_id"] for r in vector(conn, d, PROBE)}
        got = records(conn, d, [target])
    assert target not in ids | lex | vec_ids
    assert got == []
    assert ids == s.visible - {target}


def test_writer_cannot_supersede_or_revive_by_hand(conn: Conn, s: Seeded) -> None:
    before = all_acme(conn)
    for statement, params in (
        ("UPDATE pyretrieve.fragments SET state = 'superseded', superseded_by = %s"
         " WHERE fragment_id = %s", (s.acme["public"], s.acme["internal"])),
        ("UPDATE pyretrieve.fragments SET state = 'active', superseded_by = NULL"
         " WHERE fragment_id = %s", (s.acme["retracted"],)),
        ("UPDATE pyretrieve.fragments SET state = state", ()),
        ("UPDATE pyretrieve.embeddings SET embedding = '[0,0,0]'", ()),
        ("DELETE FROM pyretrieve.lexical_blocks", ()),
        ("DELETE FROM pyretrieve.lexical_tombstones", ()),
        ("UPDATE pyretrieve.lexical_blocks SET postings = 1", ()),
    ):  # fmt: skip
        err = failure(conn, "walt", statement, params)
        assert err.sqlstate == "42501", statement
    assert all_acme(conn) == before


def test_put_embedding_upsert_bumps_the_vector_generation(
    db: Database, conn: Conn, s: Seeded
) -> None:
    target = s.acme["internal"]
    start = scope_generations(db)
    with acting_as(conn, "wally"):
        first = embed(conn, "acme", "docs", target, (0.0, 1.0, 0.0), "first text")
    with acting_as(conn, "wally"):
        second = embed(conn, "acme", "docs", target, (0.0, 0.0, 1.0), "second text")
    assert start["vector_generation"] < first < second
    with acting_as(conn, "walt"):
        bind(conn)
        second_wall(conn)
        rows = conn.execute(
            "SELECT embedding::text AS v, source_digest, vector_generation"
            " FROM pyretrieve.embeddings WHERE fragment_id = %s AND model_id = %s",
            (target, MODEL),
        ).fetchall()
    assert rows == [
        {"v": "[0,0,1]", "source_digest": sha("second text"), "vector_generation": second}
    ]
    assert scope_generations(db)["vector_generation"] == second
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        hits = {r["fragment_id"]: r for r in vector(conn, d, (0.0, 0.0, 1.0))}
    assert hits[target]["rank"] == 1
    assert hits[target]["vector_generation"] == second
    assert hits[target]["source_digest"] == sha("second text")


def test_scope_generation_counters_move_with_writes(db: Database, conn: Conn, s: Seeded) -> None:
    g0 = scope_generations(db)
    with acting_as(conn, "wally"):
        fid = put(conn, "acme", "docs", "counter one")
    g1 = scope_generations(db)
    assert g1["lexical_generation"] > g0["lexical_generation"]
    assert g1["vector_generation"] == g0["vector_generation"]
    with acting_as(conn, "wally"):
        embed(conn, "acme", "docs", fid, (0.0, 1.0, 1.0), "counter one")
    g2 = scope_generations(db)
    assert g2["vector_generation"] > max(g1["vector_generation"], g1["lexical_generation"])
    assert g2["lexical_generation"] == g1["lexical_generation"]
    with acting_as(conn, "wally"):
        conn.execute(
            "SELECT pyretrieve.put_fragment('acme', 'docs', 'counter two',"
            " p_ts_config := 'pg_catalog.simple')"
        )
    g3 = scope_generations(db)
    assert g3["lexical_generation"] > g2["lexical_generation"]
    assert set(g3["configs"]) == {"english", "simple"}
    # Generations are counted per scope: acme/wiki's sequence never moved with acme/docs.
    with db.admin() as admin:
        wiki = admin.execute(
            "SELECT lexical_generation FROM pyretrieve.scope_generations"
            " WHERE workspace_id = 'acme' AND project_id = 'wiki'"
        ).fetchone()
    assert wiki is not None
    assert wiki["lexical_generation"] < g1["lexical_generation"]
    # No principal can read or advance a generation sequence.
    err = failure(conn, "wally", "SELECT nextval(pyretrieve.scope_sequence('acme', 'docs'))")
    assert err.sqlstate == "42501"
