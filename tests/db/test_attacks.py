"""The attacks of the 0003 security review, replayed as a hostile principal would.

Each test is the attack itself, run as an ordinary non-owner, non-superuser principal through
the authenticator, and asserts that nothing of the hidden rows reaches the caller: no row, no
count, no error text. Under 0003 the decision-mixing attacks read other workspaces' restricted
bodies; since 0004 principals hold no table privilege, a transaction holds one decision found
by its transaction id, and the API functions read no setting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pyretrieve import Retriever, Scope
from pyretrieve.db.errors import translate
from pyretrieve.errors import (
    AccessDenied,
    InvalidEmbedding,
    LimitExceeded,
    PrivilegedCaller,
    Timeout,
)
from pyretrieve.vectors import canonical_embedding
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import error_as, error_text, grant, put, sha

Conn = psycopg.Connection[Any]
CLASSES = ("public", "internal", "confidential", "restricted")
MODEL = "atk-3d"


def body(ws: str, project: str, cls: str) -> str:
    return f"ledger {ws} {project} {cls} secret-{ws}-{project}-{cls}"


@pytest.fixture(scope="module")
def world(server: Server, template_db: str) -> Iterator[Database]:
    """aa/docs, aa/wiki and bb/docs each hold one body per classification. alice: restricted on
    aa/docs (her own grant), public with a 1-hour max_age on bb/docs (her own) and, through the
    reader group, public on aa/wiki. walt writes everywhere."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.connect(autocommit=True) as conn:
            with acting_as(conn, "adam"):
                for ws in ("aa", "bb"):
                    conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
                    conn.execute("SELECT pyretrieve.create_project(%s, 'docs')", (ws,))
                conn.execute("SELECT pyretrieve.create_project('aa', 'wiki')")
                conn.execute("SELECT pyretrieve.register_model(%s, 3)", (MODEL,))
                grant(conn, role("alice"), "aa", "docs", "support", "restricted")
                grant(conn, role("alice"), "bb", "docs", "support", "public", max_age="1 hour")
                grant(conn, "pyretrieve_reader", "aa", "wiki", "support", "public")
                for ws, project in (("aa", "docs"), ("aa", "wiki"), ("bb", "docs")):
                    grant(conn, role("walt"), ws, project, "ingest", "restricted")
            for ws, project in (("aa", "docs"), ("aa", "wiki"), ("bb", "docs")):
                with acting_as(conn, "walt"):
                    for cls in CLASSES:
                        put(conn, ws, project, body(ws, project, cls), cls,
                            observed="now() - interval '2 hours'")  # fmt: skip
        yield db
    finally:
        drop_database(server, db.name)


@pytest.fixture
def conn(world: Database) -> Iterator[Conn]:
    with world.connect(autocommit=True) as c:
        yield c


def hidden_from_alice() -> list[str]:
    """Bodies alice may never read: bb/docs above public or older than an hour (all of them
    are two hours old), and aa/wiki above public."""
    return [
        *(body("bb", "docs", c) for c in CLASSES),
        *(body("aa", "wiki", c) for c in CLASSES[1:]),
    ]


def assert_nothing_hidden(*outputs: object) -> None:
    text = "\n".join(repr(o) for o in outputs)
    for secret in hidden_from_alice():
        assert secret.split()[-1] not in text


def authorize(conn: Conn, ws: str, project: str) -> Any:
    row = conn.execute(
        "SELECT decision_id FROM pyretrieve.authorize(%s, %s, 'support', %s, 'disabled', NULL, 10)",
        (ws, project, sha("ledger")),
    ).fetchone()
    assert row is not None
    return row["decision_id"]


def lexical(conn: Conn, decision: Any) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT * FROM pyretrieve.lexical_candidates(%s, 'ledger secret', 100)", (decision,)
    ).fetchall()


# ---------------------------------------------------------------------------------------------
# 1. Two decisions mixed in one scan
# ---------------------------------------------------------------------------------------------
SECOND = {
    "across workspaces": ("bb", "docs"),
    "across projects": ("aa", "wiki"),  # the group's grant beside alice's own
}


@pytest.mark.parametrize("second", list(SECOND), ids=list(SECOND))
def test_decision_mixing_with_a_lateral_set_config(conn: Conn, second: str) -> None:
    ws, project = SECOND[second]
    outputs: list[object] = []
    with acting_as(conn, "alice"):
        first = authorize(conn, "aa", "docs")
        # Lift the old "one scope per transaction" check and authorize the second grant.
        conn.execute("SELECT set_config('pyretrieve.decision', '', true)")
        with pytest.raises(psycopg.Error) as again, conn.transaction():
            authorize(conn, ws, project)
        outputs.append(error_text(again.value))
        for knob in ("enable_indexscan", "enable_bitmapscan", "enable_material"):
            conn.execute(f"SET LOCAL {knob} = off")
        # The scan of 0003, switching the setting in the outer side of a LATERAL join.
        with pytest.raises(psycopg.Error) as direct, conn.transaction():
            conn.execute(
                "SELECT f.body FROM generate_series(1, 4) AS g(i),"
                " LATERAL (SELECT set_config('pyretrieve.decision', %s, true)) AS s(v),"
                " LATERAL (SELECT body FROM pyretrieve.fragments WHERE doc_length > g.i) AS f",
                (str(first),),
            )
        outputs.append(error_text(direct.value))
        # The same switch around the API: the function reads no setting.
        rows = conn.execute(
            "SELECT c.* FROM generate_series(1, 4) AS g(i),"
            " LATERAL (SELECT set_config('pyretrieve.decision', %s, true)) AS s(v),"
            " LATERAL pyretrieve.lexical_candidates(%s, 'ledger secret', 100) AS c",
            (str(first), first),
        ).fetchall()
        outputs.append(rows)
        records = conn.execute(
            "SELECT * FROM pyretrieve.fragments(%s, ARRAY(SELECT fragment_id FROM"
            " pyretrieve.lexical_candidates(%s, 'ledger secret', 100)))",
            (first, first),
        ).fetchall()
        outputs.append(records)
    assert again.value.sqlstate == "PR003"
    assert direct.value.sqlstate == "42501"
    assert {r["body"] for r in records} == {body("aa", "docs", c) for c in CLASSES}
    assert_nothing_hidden(*outputs)


def test_decision_mixing_between_fetches_of_a_cursor(conn: Conn) -> None:
    outputs: list[object] = []
    with acting_as(conn, "alice"):
        first = authorize(conn, "aa", "docs")
        with pytest.raises(psycopg.Error) as direct, conn.transaction():
            conn.execute("DECLARE c1 CURSOR FOR SELECT body FROM pyretrieve.fragments")
        outputs.append(error_text(direct.value))
        conn.execute(
            "DECLARE c2 CURSOR FOR SELECT * FROM pyretrieve.lexical_candidates(%s, 'ledger', 100)",
            (first,),
        )
        fetched = []
        for value in ("", "00000000-0000-0000-0000-000000000000", str(first)):
            fetched += conn.execute("FETCH 1 FROM c2").fetchall()
            conn.execute("SELECT set_config('pyretrieve.decision', %s, true)", (value,))
            conn.execute("SELECT set_config('pyretrieve.write_scope', 'bb/docs', true)")
        fetched += conn.execute("FETCH ALL FROM c2").fetchall()
        outputs.append(fetched)
    assert direct.value.sqlstate == "42501"
    assert len(fetched) == len(CLASSES)
    assert_nothing_hidden(*outputs)


def test_a_role_switch_between_two_decisions_gains_nothing(conn: Conn) -> None:
    err = error_as(conn, "bob", lambda: authorize(conn, "aa", "docs"))  # bob holds no grant
    assert err.sqlstate == "PR001"
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("alice"))))
        first = authorize(conn, "aa", "docs")
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("bob"))))
        with pytest.raises(psycopg.Error) as used, conn.transaction():
            lexical(conn, first)
    assert used.value.sqlstate == "PR002"


# ---------------------------------------------------------------------------------------------
# 2. The key oracle of the lexical index, forged and deleted postings
# ---------------------------------------------------------------------------------------------
def test_the_lexical_index_key_oracle_answers_the_same_for_every_word(
    conn: Conn, world: Database
) -> None:
    """A writer that knew a hidden fragment's document number (the worst case: it is never
    returned) tries the keys of the lexical index's block, page and tombstone tables for words of the
    hidden body and for an absent word: every attempt is refused alike, before any key check."""
    with world.admin() as admin:
        hidden = admin.execute(
            "SELECT docno FROM pyretrieve.fragments WHERE body = %s",
            (body("aa", "docs", "restricted"),),
        ).fetchone()
        held = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_postings"
            " WHERE workspace_id = 'aa' AND project_id = 'docs' AND docno = %s"
            "   AND lexeme IN ('restrict', 'ledger')",
            (hidden["docno"],),
        ).fetchone()
    assert held["n"] == 2  # the two words are in the hidden fragment's postings
    docno = hidden["docno"]
    attempts = {
        "blocks": lambda word: (
            "INSERT INTO pyretrieve.lexical_blocks (workspace_id, project_id, lexeme,"
            " classification, first_docno, last_docno, postings, max_tf, min_length,"
            " min_observed_at, max_observed_at, entries) VALUES ('aa', 'docs', %s,"
            " 'restricted', %s, %s, 1, 1, 1, now(), now(), ARRAY[%s::bigint << 32])",
            (word, docno, docno, docno),
        ),
        "pages": lambda word: (
            "INSERT INTO pyretrieve.lexical_pages (workspace_id, project_id, bucket,"
            " classification, first_lexeme, last_lexeme, postings, first_docno, last_docno,"
            " min_observed_at, max_observed_at, lexemes, starts, entries) VALUES ('aa', 'docs',"
            " pyretrieve.lexeme_bucket(%s), 'restricted', %s, %s, 1, %s, %s, now(), now(),"
            " ARRAY[%s], '{1}', ARRAY[%s::bigint << 32])",
            (word, word, word, docno, docno, word, docno),
        ),
        "tombstones": lambda word: (
            "INSERT INTO pyretrieve.lexical_tombstones (workspace_id, project_id, lexeme,"
            " classification, docno) VALUES ('aa', 'docs', %s, 'restricted', %s)",
            (word, docno),
        ),
    }
    for table, attempt in attempts.items():
        answers = set()
        for word in ("restrict", "ledger", "absentword"):
            err = error_as(conn, "wally", attempt(word))
            answers.add((err.sqlstate, err.diag.message_primary))
        assert {a[0] for a in answers} == {"42501"}, table
        assert len(answers) == 1, table


# ---------------------------------------------------------------------------------------------
# 3. Text-search configurations from pg_temp
# ---------------------------------------------------------------------------------------------
def test_a_temporary_text_search_configuration_is_refused(conn: Conn, world: Database) -> None:
    with acting_as(conn, "walt"):
        conn.execute("CREATE TEXT SEARCH CONFIGURATION pg_temp.mine (COPY = pg_catalog.simple)")
        with pytest.raises(psycopg.Error) as put_err, conn.transaction():
            conn.execute(
                "SELECT pyretrieve.put_fragment('aa', 'docs', 'temp config body',"
                " p_ts_config => 'pg_temp.mine'::regconfig)"
            )
    with acting_as(conn, "adam"):
        conn.execute("CREATE TEXT SEARCH CONFIGURATION pg_temp.mine2 (COPY = pg_catalog.simple)")
        with pytest.raises(psycopg.Error) as project_err, conn.transaction():
            conn.execute(
                "SELECT pyretrieve.create_project('aa', 'tmp', 'pg_temp.mine2'::regconfig)"
            )
    assert put_err.value.sqlstate == "PR015"
    assert project_err.value.sqlstate == "PR015"
    # The session is gone; every search of the scope still works.
    with acting_as(conn, "alice"):
        assert len(lexical(conn, authorize(conn, "aa", "docs"))) == len(CLASSES)


# ---------------------------------------------------------------------------------------------
# 4. Lock waits end with a typed timeout
# ---------------------------------------------------------------------------------------------
def test_a_writer_holding_a_lock_blocks_another_only_until_its_lock_timeout(
    world: Database,
) -> None:
    with world.admin() as admin:
        target = admin.execute(
            "SELECT fragment_id FROM pyretrieve.fragments WHERE body = %s",
            (body("aa", "wiki", "public"),),
        ).fetchone()
    assert target is not None
    fid = target["fragment_id"]
    with world.connect() as holder, world.connect(autocommit=True) as other:
        holder.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("walt"))))
        holder.execute(
            "SELECT pyretrieve.supersede_fragment('aa', 'wiki', %s, 'held and never committed')",
            (fid,),
        )
        started = time.monotonic()
        with acting_as(other, "walt"):
            other.execute("SET LOCAL lock_timeout = '300ms'")
            with pytest.raises(psycopg.Error) as exc, other.transaction():
                other.execute("SELECT pyretrieve.retract_fragment('aa', 'wiki', %s)", (fid,))
        waited = time.monotonic() - started
        holder.rollback()
    assert exc.value.sqlstate == "55P03"
    assert isinstance(translate(exc.value), Timeout)
    assert waited < 5
    # A request that set no timeout of its own gets bounded ones.
    with world.connect(autocommit=True) as c, acting_as(c, "walt"):
        c.execute("SELECT pyretrieve.bind_write_scope('aa', 'wiki')")
        row = c.execute(
            "SELECT current_setting('lock_timeout') AS l, current_setting('statement_timeout') AS s"
        ).fetchone()
    assert row == {"l": "10s", "s": "1min"}


# ---------------------------------------------------------------------------------------------
# 5. Superusers and BYPASSRLS roles are refused, in the database and in the client
# ---------------------------------------------------------------------------------------------
def test_a_superuser_caller_is_refused(world: Database) -> None:
    with world.admin(autocommit=True) as admin:
        with pytest.raises(psycopg.Error) as exc, admin.transaction():
            authorize(admin, "aa", "docs")
        with pytest.raises(psycopg.Error) as write, admin.transaction():
            admin.execute("SELECT pyretrieve.bind_write_scope('aa', 'docs')")
        with pytest.raises(PrivilegedCaller):
            Retriever(admin).search(
                "ledger", scope=Scope(workspace="aa", project="docs", purpose="support")
            )
    assert exc.value.sqlstate == "PR004"
    assert write.value.sqlstate == "PR004"


@pytest.mark.parametrize("pipeline", [True, False])
def test_the_client_refuses_a_superuser_session_but_not_one_acting_as_a_principal(
    world: Database, pipeline: bool
) -> None:
    """Pipelined, the client learns the session's role only from the server's first reply: a
    superuser session is refused (in the database, PR004, and by the client), while one that
    acts as a principal gets exactly that principal's answer, its denial included. After a
    failed statement the server has undone SET LOCAL ROLE, so the client must not read the
    role then: it would see the superuser and mask the principal's own error."""
    where = Scope(workspace="aa", project="docs", purpose="support")
    nowhere = Scope(workspace="aa", project="nowhere", purpose="support")
    with world.admin(autocommit=True) as admin:
        with pytest.raises(PrivilegedCaller):
            Retriever(admin, pipeline=pipeline).search("ledger", scope=where)
        acting = Retriever(admin, principal=role("alice"), pipeline=pipeline)
        with pytest.raises(AccessDenied):
            acting.search("ledger", scope=nowhere)
        assert acting.search("ledger", scope=where, mode="lexical").decision.principal == role(
            "alice"
        )
        assert admin.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_role_reaching_bypassrls_is_refused(world: Database) -> None:
    name = f"{role('alice')}_bypass"
    with world.admin(autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN BYPASSRLS").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(name), sql.Identifier(role("carol")))
        )
    try:
        with world.connect(autocommit=True) as conn:
            with acting_as(conn, "adam"):
                grant(conn, role("carol"), "aa", "docs", "support", "restricted")
            err = error_as(conn, "carol", lambda: authorize(conn, "aa", "docs"))
        assert err.sqlstate == "PR004"
    finally:
        with world.admin(autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


# ---------------------------------------------------------------------------------------------
# 6. Errors a caller can cause map to typed errors that name the cause
# ---------------------------------------------------------------------------------------------
def test_a_body_with_too_many_distinct_words_is_a_typed_limit_error(conn: Conn) -> None:
    # About 900,000 characters of distinct words: within the documented body limit, beyond
    # the 1 MB a tsvector may hold.
    words = " ".join(f"w{n:06d}x" for n in range(100_000))
    assert len(words) <= 1_000_000
    err = error_as(conn, "walt", ("SELECT pyretrieve.put_fragment('aa', 'docs', %s)", (words,)))
    assert err.sqlstate == "PR014"
    typed = translate(err)
    assert isinstance(typed, LimitExceeded)
    assert "distinct words" in typed.message


def test_vector_limits_and_subnormal_values_are_typed(conn: Conn) -> None:
    huge = "[" + ",".join("1" for _ in range(16_001)) + "]"
    with pytest.raises(psycopg.Error) as exc, acting_as(conn, "alice"):
        conn.execute("SELECT %s::public.vector", (huge,))
    assert isinstance(translate(exc.value), LimitExceeded)
    with pytest.raises(InvalidEmbedding):
        canonical_embedding([1e-45, 1.0, 0.0])
    with acting_as(conn, "alice"):
        decision = authorize(conn, "aa", "docs")
        with pytest.raises(psycopg.Error) as query, conn.transaction():
            conn.execute(
                "SELECT * FROM pyretrieve.vector_candidates(%s, %s, '[1e-45,1,0]', 10)",
                (decision, MODEL),
            )
    assert query.value.sqlstate == "PR011"
    err = error_as(
        conn, "walt",
        ("SELECT pyretrieve.put_embedding('aa', 'docs', gen_random_uuid(), %s, '[1e-45,1,0]', %s)",
         (MODEL, sha("x"))),
    )  # fmt: skip
    assert err.sqlstate == "PR011"


# ---------------------------------------------------------------------------------------------
# 7. The catalog: principal groups hold no privilege on any table, view or sequence
# ---------------------------------------------------------------------------------------------
def test_principal_groups_hold_no_table_view_or_sequence_privilege(world: Database) -> None:
    with world.admin() as admin:
        held = admin.execute(
            """SELECT g.g AS grp, c.relname::text AS rel, p.p AS privilege
                 FROM unnest(ARRAY['pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin']) g(g)
                CROSS JOIN pg_class c
                CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                        'REFERENCES', 'TRIGGER']) p(p)
                WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
                  AND has_table_privilege(g.g, c.oid, p.p)
               UNION ALL
               SELECT g.g, c.relname::text, 'USAGE'
                 FROM unnest(ARRAY['pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin']) g(g)
                CROSS JOIN pg_class c
                WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'S'
                  AND (has_sequence_privilege(g.g, c.oid, 'USAGE')
                       OR has_sequence_privilege(g.g, c.oid, 'SELECT'))
               UNION ALL
               SELECT g.g, c.relname::text || '.' || a.attname, 'column'
                 FROM unnest(ARRAY['pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin']) g(g)
                CROSS JOIN pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
                WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind IN ('r', 'v')
                  AND has_column_privilege(g.g, c.oid, a.attnum, 'SELECT, INSERT, UPDATE, REFERENCES')"""
        ).fetchall()
        relations = admin.execute(
            "SELECT count(*) AS n FROM pg_class WHERE relnamespace = 'pyretrieve'::regnamespace"
            " AND relkind IN ('r', 'v', 'S')"
        ).fetchone()
    assert held == []
    assert relations is not None
    assert relations["n"] >= 20  # the check looked at something


def test_concurrent_waits_are_bounded(world: Database) -> None:
    """Two writers on one fragment: the second either waits for the first's commit or times
    out with a typed error; it never hangs."""
    with world.admin() as admin:
        target = admin.execute(
            "SELECT fragment_id FROM pyretrieve.fragments WHERE body = %s",
            (body("aa", "wiki", "internal"),),
        ).fetchone()
    assert target is not None
    done: list[str] = []

    def second() -> None:
        with world.connect(autocommit=True) as c, acting_as(c, "walt"):
            c.execute("SET LOCAL lock_timeout = '2s'")
            c.execute(
                "SELECT pyretrieve.retract_fragment('aa', 'wiki', %s)", (target["fragment_id"],)
            )
            done.append("retracted")

    with world.connect() as holder:
        holder.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("walt"))))
        holder.execute(
            "SELECT pyretrieve.supersede_fragment('aa', 'wiki', %s, 'first writer wins')",
            (target["fragment_id"],),
        )
        t = threading.Thread(target=lambda: _swallow(second, done))
        t.start()
        time.sleep(0.3)
        holder.commit()
        t.join(10)
    assert not t.is_alive()
    # The first writer superseded it; the second then finds no active fragment (PR020).
    assert done == ["PR020"]


def _swallow(fn: Any, done: list[str]) -> None:
    try:
        fn()
    except psycopg.Error as exc:
        done.append(exc.sqlstate or "?")


def test_a_writers_look_up_binds_its_own_scope_first_in_a_transaction(conn: Conn) -> None:
    """The look-up functions bind the write scope themselves and see the binding at once, as
    the first statement of a transaction (a STABLE function would not see its own binding)."""
    with acting_as(conn, "walt"):
        first = conn.execute(
            "SELECT fragment_id, missing FROM pyretrieve.stale_embeddings('aa', 'docs', %s)",
            (MODEL,),
        ).fetchall()
    with acting_as(conn, "walt"):
        ids = [r["fragment_id"] for r in first]
        created = conn.execute(
            "SELECT fragment_id FROM pyretrieve.embeddings_needed('aa', 'docs', %s, %s::uuid[])",
            (MODEL, ids),
        ).fetchall()
    assert len(first) == len(CLASSES)
    assert all(r["missing"] for r in first)
    assert {r["fragment_id"] for r in created} == set(ids)
