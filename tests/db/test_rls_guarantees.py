"""Row-level security guarantees, checked as ordinary principals through SET LOCAL ROLE.

Every test reads as a non-owner principal (except the one that checks the owner itself) and
asserts rows that would appear if a guarantee broke: the seed puts the foreign tenant's rows
and every hidden fragment exactly where a leak would surface first.

The tests only read (and record decisions), so they share one seeded database; a test that
changes grants uses a database of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, at_second_wall, role, second_wall
from tests.db.seed import (
    HIDDEN_CASES,
    PROBE,
    PURPOSE,
    SHARED_WORD,
    Seeded,
    Step,
    authorize,
    error_as,
    error_fields,
    error_text,
    grant,
    lexical,
    records,
    seed,
    seeded_database,
    vector,
)

Conn = psycopg.Connection[Any]
TENANT_TABLES = (
    "workspaces",
    "projects",
    "scope_configs",
    "generation_log",
    "fragments",
    "lexical_blocks",
    "lexical_pages",
    "lexical_tombstones",
    "embeddings",
)
READERS_AND_WRITERS = ("alice", "bob", "carol", "wally", "walt")


@pytest.fixture(scope="module")
def shared(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded]]:
    with seeded_database(server, template_db) as pair:
        with pair[0].admin(autocommit=True) as admin:
            admin.execute("ANALYZE")  # statistics exist, so the pg_stats test means something
        yield pair


@pytest.fixture
def s(shared: tuple[Database, Seeded]) -> Seeded:
    return shared[1]


@pytest.fixture
def conn(shared: tuple[Database, Seeded]) -> Iterator[Conn]:
    """An authenticator connection to the shared seeded database (overrides the harness's)."""
    with shared[0].connect(autocommit=True) as c:
        yield c


def counts(conn: Conn) -> dict[str, int]:
    """Rows of each tenant table that the second wall (pyretrieve_api's RLS) admits under this
    transaction's binding."""
    out = {}
    with at_second_wall(conn):
        for table in TENANT_TABLES:
            row = conn.execute(f"SELECT count(*) AS n FROM pyretrieve.{table}").fetchone()
            assert row is not None
            out[table] = row["n"]
    return out


def fragment_ids(conn: Conn) -> set[uuid.UUID]:
    """Fragments the second wall admits under this transaction's binding."""
    with at_second_wall(conn):
        return {
            r["fragment_id"] for r in conn.execute("SELECT fragment_id FROM pyretrieve.fragments")
        }


def visible_to(s: Seeded, nick: str) -> set[uuid.UUID]:
    """acme/docs fragments under the nick's decision (alice: ceiling confidential, max_age
    30 days; bob: ceiling internal, no max_age)."""
    if nick == "alice":
        return s.visible
    assert nick == "bob"
    return {s.acme[c] for c in ("public", "internal", "successor", "old")}


def surfaces(conn: Conn, s: Seeded, query: str) -> dict[str, set[uuid.UUID]]:
    """Ids reachable on each read surface after authorising acme/docs."""
    d = authorize(conn)["decision_id"]
    return {
        "select": fragment_ids(conn),
        "lexical": {r["fragment_id"] for r in lexical(conn, d, query)},
        "vector": {r["fragment_id"] for r in vector(conn, d, PROBE)},
        "fragments": {
            r["fragment_id"] for r in records(conn, d, [*s.acme.values(), *s.globex, *s.wiki])
        },
    }


# ---------------------------------------------------------------------------------------------
# No scope bound
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("nick", READERS_AND_WRITERS)
def test_unbound_principal_sees_no_tenant_rows(conn: Conn, s: Seeded, nick: str) -> None:
    with acting_as(conn, nick):
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
    # Positive control: the rows exist and a bound reader does see some of them.
    with acting_as(conn, "alice"):
        authorize(conn)
        assert counts(conn)["fragments"] == len(s.visible)


@pytest.mark.parametrize("function", ["lexical", "vector", "fragments"])
@pytest.mark.parametrize("decision", [None, "random"])
def test_candidate_functions_refuse_without_a_decision(
    conn: Conn, s: Seeded, function: str, decision: str | None
) -> None:
    d = uuid.uuid4() if decision else None
    call = {
        "lexical": lambda: lexical(conn, d, SHARED_WORD),  # type: ignore[arg-type]
        "vector": lambda: vector(conn, d, PROBE),  # type: ignore[arg-type]
        "fragments": lambda: records(conn, d, list(s.acme.values())),  # type: ignore[arg-type]
    }[function]
    with pytest.raises(psycopg.Error) as exc, acting_as(conn, "alice"):
        call()
    assert exc.value.sqlstate == "PR002"


def test_principal_outside_every_group_is_refused_outright(conn: Conn, s: Seeded) -> None:
    for statement in [*(f"SELECT count(*) FROM pyretrieve.{t}" for t in TENANT_TABLES)]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, "nobody"):
            conn.execute(statement)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, "nobody"):
        authorize(conn)


def test_no_principal_may_read_grants_or_decisions_directly(conn: Conn, s: Seeded) -> None:
    for nick in ("alice", "bob", "carol", "wally", "walt", "adam"):
        for table in ("grants", "decisions", "write_bindings", "read_bindings"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                conn.execute(f"SELECT count(*) FROM pyretrieve.{table}")
    # Only admins list grants, through the API.
    for nick in ("alice", "wally"):
        err = error_as(conn, nick, "SELECT * FROM pyretrieve.list_grants()")
        assert err.sqlstate in ("42501", "PR001"), nick
    with acting_as(conn, "adam"):
        listed = {
            r["grant_id"] for r in conn.execute("SELECT grant_id FROM pyretrieve.list_grants()")
        }
    assert set(s.grants.values()) <= listed


def test_the_second_wall_shows_only_this_transactions_decision(conn: Conn, s: Seeded) -> None:
    made = {}
    for nick in ("alice", "bob"):
        with acting_as(conn, nick):
            made[nick] = authorize(conn)["decision_id"]
    for nick in ("alice", "bob", "carol"):
        with acting_as(conn, nick):
            mine = authorize(conn, "acme", "wiki")["decision_id"]
            with at_second_wall(conn):
                rows = conn.execute(
                    "SELECT decision_id, principal FROM pyretrieve.decisions"
                ).fetchall()
        assert rows == [{"decision_id": mine, "principal": role(nick)}], nick
        assert not {r["decision_id"] for r in rows} & set(made.values())


@pytest.mark.parametrize("where", [("acme", "docs"), ("acme", "wiki"), ("globex", "docs")])
def test_a_forged_write_binding_beside_a_decision_widens_nothing(
    shared: tuple[Database, Seeded], where: tuple[str, str]
) -> None:
    """authorize() and bind_write_scope() refuse a second binding in a transaction. Were one
    forged anyway (here the superuser inserts a write binding at the restricted ceiling, in
    the decision's own scope, in another project, in another workspace), the second wall still
    admits exactly the decision's rows: the write branch of the policies is void under a
    decision, and the scope is the decision's."""
    db, s = shared
    with db.admin(autocommit=True) as admin, admin.transaction():
        admin.execute(f"SET LOCAL ROLE {role('alice')}")
        authorize(admin)
        before = fragment_ids(admin), counts(admin)
        admin.execute("RESET ROLE")
        admin.execute(
            "INSERT INTO pyretrieve.write_bindings (workspace_id, principal, project_id, ceiling,"
            " position) VALUES (%s, %s, %s, 'restricted', 1)",
            (where[0], role("walt"), where[1]),
        )
        admin.execute(f"SET LOCAL ROLE {role('alice')}")
        with at_second_wall(admin):
            forged = admin.execute("SELECT count(*) AS n FROM pyretrieve.bound_write()").fetchone()
        assert forged == {"n": 1}, "the forged binding is in force"
        after = fragment_ids(admin), counts(admin)
    assert before[0] == s.visible
    assert after == before


def test_an_earlier_transactions_read_binding_admits_nothing(conn: Conn, s: Seeded) -> None:
    """A process keeps its read binding's row after the transaction that wrote it; the next
    transaction, bound to nothing, is admitted nothing by it, and the next decision replaces
    it (the row is the process's, the binding the transaction's)."""
    with acting_as(conn, "alice"):
        authorize(conn)
        assert fragment_ids(conn) == s.visible
    with acting_as(conn, "alice"):
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        with at_second_wall(conn):
            kept = conn.execute(
                "SELECT count(*) FILTER (WHERE workspace_id = 'acme') AS n,"
                "       bool_and(session_pid = pg_backend_pid()) AS mine"
                "  FROM pyretrieve.read_bindings"
            ).fetchone()
        assert kept == {"n": 1, "mine": True}, "the earlier row is still there, inert"
    with acting_as(conn, "bob"):
        authorize(conn)
        assert fragment_ids(conn) == visible_to(s, "bob")


def test_another_processs_read_binding_is_neither_seen_nor_used(
    shared: tuple[Database, Seeded], s: Seeded
) -> None:
    """Two processes bound at once, bob to acme/docs and alice to acme/wiki: each second wall
    sees its own process's binding row alone and admits its own decision's rows alone."""
    db, _ = shared
    with (
        db.connect(autocommit=True) as bobs,
        db.connect(autocommit=True) as alices,
        acting_as(bobs, "bob"),
        acting_as(alices, "alice"),
    ):
        authorize(bobs)
        authorize(alices, "acme", "wiki")
        with at_second_wall(alices):
            rows = alices.execute(
                "SELECT workspace_id::text AS w, project_id::text AS p,"
                "       session_pid = pg_backend_pid() AS mine"
                "  FROM pyretrieve.read_bindings WHERE xact_id = pg_current_xact_id()"
            ).fetchall()
            others = alices.execute(
                "SELECT count(*) AS n FROM pyretrieve.read_bindings"
                " WHERE session_pid <> pg_backend_pid()"
            ).fetchone()
        assert rows == [{"w": "acme", "p": "wiki", "mine": True}]
        assert others == {"n": 0}
        assert fragment_ids(bobs) == visible_to(s, "bob")
        theirs = fragment_ids(alices)
    assert theirs
    assert theirs <= set(s.wiki)


def test_the_api_role_cannot_rebind_a_transaction(conn: Conn, s: Seeded) -> None:
    """Within a transaction the read binding cannot change, not even for pyretrieve_api (the
    role the functions run as, were one of them to try): an update matches no row, a replacing
    insert and a key of another process are refused, and the second wall admits what it did."""
    with acting_as(conn, "bob"):
        authorize(conn)
        before = fragment_ids(conn), counts(conn)
        with at_second_wall(conn):
            updated = conn.execute(
                "UPDATE pyretrieve.read_bindings SET ceiling = 'restricted', max_age = NULL"
            )
            assert updated.rowcount == 0
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(
                    "INSERT INTO pyretrieve.read_bindings AS r (xact_id, decision_id,"
                    " workspace_id, project_id, ceiling, evaluated_at, max_age)"
                    " SELECT xact_id, decision_id, workspace_id, project_id, 'restricted',"
                    " evaluated_at, NULL FROM pyretrieve.read_bindings"
                    " ON CONFLICT (workspace_id, session_pid) DO UPDATE"
                    " SET ceiling = excluded.ceiling"
                )
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(
                    "INSERT INTO pyretrieve.read_bindings (session_pid, xact_id, decision_id,"
                    " workspace_id, project_id, ceiling, evaluated_at, max_age)"
                    " SELECT session_pid + 1, xact_id, decision_id, workspace_id, project_id,"
                    " ceiling, evaluated_at, max_age FROM pyretrieve.read_bindings"
                )
        after = fragment_ids(conn), counts(conn)
    assert before[0] == visible_to(s, "bob")
    assert after == before


def test_a_decision_rolled_back_to_a_savepoint_binds_nothing(conn: Conn, s: Seeded) -> None:
    """A decision made in a savepoint and rolled back takes its binding with it: the
    transaction is bound to nothing, and a decision for another project made after it binds
    that project alone (the switch that a second authorize() is refused)."""
    with acting_as(conn, "alice"):
        with conn.transaction():
            authorize(conn)
            assert fragment_ids(conn) == s.visible
            raise psycopg.Rollback
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        d = authorize(conn, "acme", "wiki")["decision_id"]
        seen = fragment_ids(conn)
        found = {r["fragment_id"] for r in records(conn, d, [*s.acme.values(), *s.wiki])}
    assert seen
    assert seen <= set(s.wiki)
    assert found <= set(s.wiki)


# ---------------------------------------------------------------------------------------------
# Foreign workspace or project
# ---------------------------------------------------------------------------------------------
def test_foreign_scope_is_denied_exactly_like_an_absent_one(conn: Conn, s: Seeded) -> None:
    attempts = [
        ("globex", "docs", PURPOSE),  # foreign workspace, existing project name
        ("nosuch", "docs", PURPOSE),  # absent workspace
        ("acme", "nosuch", PURPOSE),  # absent project
        ("acme", "docs", "audit"),  # no grant for this purpose
    ]
    seen = []
    for ws, project, purpose in attempts:
        with pytest.raises(psycopg.Error) as exc, acting_as(conn, "alice"):
            authorize(conn, ws, project, purpose)
        seen.append(error_fields(exc.value))
        assert "globex" not in error_text(exc.value)
    assert seen[0][:2] == ("PR001", "access denied")
    assert all(fields == seen[0] for fields in seen), seen


def test_candidates_never_return_foreign_rows(conn: Conn, s: Seeded) -> None:
    # The globex rows share the query words and sit exactly on the probe vector.
    query = f"globex sentinel {SHARED_WORD} apricot public internal {s.sentinels[0]}"
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        lex = lexical(conn, d, query)
        vec = vector(conn, d, PROBE)
        recs = records(conn, d, [*s.globex, *s.acme.values()])
    foreign = set(s.globex)
    for rows in (lex, vec, recs):
        ids = [r["fragment_id"] for r in rows]
        assert ids, "positive control: acme rows are found"
        assert not foreign & set(ids)
        assert set(ids) <= s.visible
    for rows in (lex, vec):
        assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert len(vec) == len(s.visible)
    assert not any(sentinel in r["body"] for r in recs for sentinel in s.sentinels)
    assert all(r["workspace_id"] == "acme" for r in recs)


@pytest.mark.parametrize("nick", ["alice", "bob", "carol"])
def test_counts_after_binding_show_only_the_bound_scope(conn: Conn, s: Seeded, nick: str) -> None:
    project = "wiki" if nick == "carol" else "docs"
    expected = {
        "alice": s.visible,
        "bob": visible_to(s, "bob"),
        "carol": set(s.wiki),
    }[nick]
    with acting_as(conn, nick):
        authorize(conn, "acme", project)
        n = counts(conn)
        assert n.pop("generation_log") >= 1
        n.pop("lexical_blocks")
        n.pop("lexical_pages")
        n.pop("lexical_tombstones")
        assert n == {
            "workspaces": 1,
            "projects": 1,
            "scope_configs": 1,
            "fragments": len(expected),
            "embeddings": 0 if nick == "carol" else len(expected),
        }
        # The lexical index admits blocks and pages of the scope up to the ceiling whose time
        # range meets the window; of their postings, those of fragments the wall admits are
        # exactly the visible fragments' (every seeded body has lexemes).
        second_wall(conn)
        posted = conn.execute(
            "SELECT DISTINCT f.fragment_id"
            "  FROM (SELECT b.workspace_id, b.project_id, b.entries FROM pyretrieve.lexical_blocks b"
            "        UNION ALL"
            "        SELECT p.workspace_id, p.project_id, p.entries FROM pyretrieve.lexical_pages p) b"
            " CROSS JOIN LATERAL unnest(b.entries) AS p(entry)"
            "  JOIN pyretrieve.fragments f ON f.workspace_id = b.workspace_id"
            "   AND f.project_id = b.project_id AND f.docno = (p.entry >> 32)::integer"
        ).fetchall()
        assert {r["fragment_id"] for r in posted} == expected
        classes = conn.execute(
            "SELECT DISTINCT classification::text AS c FROM pyretrieve.lexical_blocks"
            " UNION SELECT DISTINCT classification::text FROM pyretrieve.lexical_pages"
        ).fetchall()
        ceiling = {"alice": "confidential", "bob": "internal", "carol": "public"}[nick]
        order = ["public", "internal", "confidential", "restricted"]
        assert {r["c"] for r in classes} <= set(order[: order.index(ceiling) + 1])
        for table in TENANT_TABLES:
            scopes = conn.execute(
                f"SELECT DISTINCT workspace_id::text AS w FROM pyretrieve.{table}"
            ).fetchall()
            assert scopes in ([{"w": "acme"}], []), table
        assert fragment_ids(conn) == expected
        rows = conn.execute("SELECT DISTINCT project_id::text AS p FROM pyretrieve.fragments")
        assert rows.fetchall() == [{"p": project}]


def test_errors_never_mention_foreign_content(conn: Conn, s: Seeded) -> None:
    gx = s.globex[0]
    zero = b"\x00" * 32
    bind_acme = "SELECT pyretrieve.bind_write_scope('acme','docs')"
    failures: list[tuple[str, list[Step]]] = [
        ("alice", [("SELECT * FROM pyretrieve.authorize('globex','docs','support',%s,"
                    "'optional',NULL,10)", (zero,))]),
        ("wally", ["SELECT pyretrieve.put_fragment('globex','docs','x')"]),
        ("wally", [("SELECT pyretrieve.put_embedding('acme','docs',%s,'test-3d','[1,0,0]',%s)",
                    (gx, zero))]),
        ("wally", [("SELECT pyretrieve.put_embedding('globex','docs',%s,'test-3d','[1,0,0]',%s)",
                    (gx, zero))]),
        ("wally", [("SELECT pyretrieve.supersede_fragment('acme','docs',%s,'x')", (gx,))]),
        ("wally", [("SELECT pyretrieve.retract_fragment('acme','docs',%s)", (gx,))]),
        ("walt", [bind_acme,
                  ("INSERT INTO pyretrieve.embeddings (workspace_id, project_id, fragment_id,"
                   " model_id, embedding, source_digest)"
                   " VALUES ('acme','docs',%s,'test-3d','[1,0,0]',%s)", (gx, zero))]),
        ("wally", ["SELECT set_config('pyretrieve.write_scope','globex/docs',true)",
                   "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body)"
                   " VALUES ('globex','docs','x')"]),
        ("wally", [bind_acme,
                   ("UPDATE pyretrieve.fragments SET state = 'superseded', superseded_by = %s"
                    " WHERE fragment_id = %s", (gx, s.acme["internal"]))]),
    ]  # fmt: skip
    texts = [error_text(error_as(conn, nick, *steps)) for nick, steps in failures]
    for text in texts:
        for needle in [*s.sentinels, *(str(i) for i in s.globex[1:])]:
            assert needle not in text, text


# ---------------------------------------------------------------------------------------------
# Hidden fragments: above the ceiling, superseded, retracted, expired, future, too old
# ---------------------------------------------------------------------------------------------
HIDDEN = [("alice", c) for c in HIDDEN_CASES] + [("bob", "confidential")]


@pytest.mark.parametrize(("nick", "case"), HIDDEN)
def test_hidden_fragment_is_invisible_on_every_surface(
    conn: Conn, s: Seeded, nick: str, case: str
) -> None:
    from tests.db.seed import CASES

    hidden = s.acme[case]
    marker = CASES[case][0]
    with acting_as(conn, nick):
        seen = surfaces(conn, s, f"{marker} apricot")
    expected = visible_to(s, nick)
    assert hidden not in expected
    for surface, ids in seen.items():
        assert hidden not in ids, surface
    # Positive controls: the same surfaces do return the visible rows.
    assert seen["select"] == expected
    assert seen["vector"] == expected
    assert seen["fragments"] == expected
    assert seen["lexical"] == {s.acme["public"]}


def test_max_age_and_ceiling_come_from_the_callers_own_grant(conn: Conn, s: Seeded) -> None:
    # bob's grant has no max_age: the 60-day-old fragment alice cannot see is his.
    with acting_as(conn, "bob"):
        seen = surfaces(conn, s, "juniper")
    assert s.acme["old"] in seen["select"]
    assert s.acme["old"] in seen["lexical"]
    assert s.acme["confidential"] not in seen["select"]


# ---------------------------------------------------------------------------------------------
# Custom settings set by hand never widen access
# ---------------------------------------------------------------------------------------------
def set_local(conn: Conn, name: str, value: str) -> None:
    conn.execute("SELECT set_config(%s, %s, true)", (name, value))


def test_decision_setting_pointing_at_another_principals_decision(conn: Conn, s: Seeded) -> None:
    with acting_as(conn, "alice"):
        alices = authorize(conn)["decision_id"]
    # Unbound bob points the setting at alice's decision (same scope, higher ceiling).
    with acting_as(conn, "bob"):
        set_local(conn, "pyretrieve.decision", str(alices))
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        with pytest.raises(psycopg.Error) as exc, conn.transaction():
            lexical(conn, alices, SHARED_WORD)
        assert exc.value.sqlstate == "PR002"
    # Bound bob switches the setting to alice's decision: the setting is not read at all, so
    # he keeps exactly his own rows and gains none of hers.
    with acting_as(conn, "bob"):
        authorize(conn)
        set_local(conn, "pyretrieve.decision", str(alices))
        assert fragment_ids(conn) == visible_to(s, "bob")
        assert s.acme["confidential"] not in fragment_ids(conn)


def test_decision_setting_pointing_at_own_decision_of_an_earlier_transaction(
    conn: Conn, s: Seeded
) -> None:
    with acting_as(conn, "alice"):
        earlier = authorize(conn)["decision_id"]
        assert fragment_ids(conn) == s.visible
    with acting_as(conn, "alice"):
        set_local(conn, "pyretrieve.decision", str(earlier))
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        # Even once this transaction has an xid of its own.
        conn.execute("SELECT pg_current_xact_id()")
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        for call in (
            lambda: lexical(conn, earlier, SHARED_WORD),
            lambda: vector(conn, earlier, PROBE),
            lambda: records(conn, earlier, list(s.visible)),
        ):
            with pytest.raises(psycopg.Error) as exc, conn.transaction():
                call()
            assert exc.value.sqlstate == "PR002"


@pytest.mark.parametrize("nick", ["alice", "wally"])
@pytest.mark.parametrize("scope", ["globex/docs", "acme/docs", "acme/wiki", "nosuch/docs"])
def test_write_scope_setting_without_a_grant_shows_nothing(
    conn: Conn, s: Seeded, nick: str, scope: str
) -> None:
    # The setting is not read at all: only bind_write_scope binds a write scope.
    with acting_as(conn, nick):
        set_local(conn, "pyretrieve.write_scope", scope)
        seen = fragment_ids(conn)
        n = counts(conn)
    assert seen == set()
    assert n == dict.fromkeys(TENANT_TABLES, 0)
    if nick == "wally" and scope in ("acme/docs", "acme/wiki"):
        # Positive control: bound, wally sees up to his ceiling there, never above it.
        workspace, project = scope.split("/")
        with acting_as(conn, nick):
            conn.execute("SELECT pyretrieve.bind_write_scope(%s, %s)", (workspace, project))
            bound = fragment_ids(conn)
        assert bound
        assert s.acme["confidential"] not in bound
        assert s.acme["restricted"] not in bound
        assert not set(s.globex) & bound


def test_write_scope_setting_cannot_insert_into_a_foreign_scope(conn: Conn, s: Seeded) -> None:
    err = error_as(
        conn,
        "wally",
        "SELECT set_config('pyretrieve.write_scope', 'globex/docs', true)",
        "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body)"
        " VALUES ('globex', 'docs', 'planted')",
    )
    assert isinstance(err, psycopg.errors.InsufficientPrivilege)
    with acting_as(conn, "walt"):
        conn.execute("SELECT pyretrieve.bind_write_scope('globex', 'docs')")
        second_wall(conn)
        assert "planted" not in {
            r["body"] for r in conn.execute("SELECT body FROM pyretrieve.fragments")
        }


ARBITRARY = {
    "app.workspace": "globex",
    "app.user": "walt",
    "pyretrieve.workspace": "globex",
    "pyretrieve.project": "docs",
    "pyretrieve.ceiling": "restricted",
    "pyretrieve.max_age": "1000 days",
    "pyretrieve.principal": "pyretrieve_owner",
    "pyretrieve.role": "pyretrieve_admin",
    "pyretrieve.bypass": "on",
    "pyretrieve.decision": "00000000-0000-0000-0000-000000000000",
}


def test_arbitrary_settings_never_widen_access(conn: Conn, s: Seeded) -> None:
    with acting_as(conn, "alice"):
        for name, value in ARBITRARY.items():
            set_local(conn, name, value)
        assert counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
    with acting_as(conn, "alice"):
        d = authorize(conn)["decision_id"]
        for name, value in ARBITRARY.items():
            if name != "pyretrieve.decision":
                set_local(conn, name, value)
        assert fragment_ids(conn) == s.visible
        assert {r["fragment_id"] for r in vector(conn, d, PROBE)} == s.visible


def test_row_security_off_is_refused_not_obeyed(conn: Conn, s: Seeded) -> None:
    for steps in (["SELECT count(*) FROM pyretrieve.fragments"],
                  [lambda: authorize(conn), "SELECT count(*) FROM pyretrieve.fragments"]):  # fmt: skip
        err = error_as(conn, "alice", "SET LOCAL row_security = off", *steps)
        assert isinstance(err, psycopg.errors.InsufficientPrivilege)
        assert "row-level security" in str(err)


def test_hand_written_decision_for_a_foreign_scope_is_refused(conn: Conn, s: Seeded) -> None:
    # A decision row copied from walt's globex grant, inserted by alice.
    with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, "alice"):
        conn.execute(
            "INSERT INTO pyretrieve.decisions (workspace_id, project_id, purpose, grant_id,"
            " ceiling, semantic_policy, requested_limit, candidate_limit, query_digest,"
            " semantic_intent) VALUES ('globex', 'docs', 'ingest', %s, 'restricted',"
            " 'optional', 10, 100, %s, 'optional')",
            (s.grants["walt-globex"], b"\x00" * 32),
        )


def test_hand_written_decision_is_never_wider_than_authorize(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        s = seed(db, conn)
        with acting_as(conn, "adam"):
            group = grant(conn, "pyretrieve_reader", "acme", "docs", PURPOSE, "restricted")
        with acting_as(conn, "alice"):
            d = authorize(conn)
            # authorize() picks alice's own grant (confidential, 30 days) over the group's.
            assert (d["grant_id"], d["ceiling"]) == (s.grants["alice"], "confidential")
        seen: set[uuid.UUID] = set()
        try:
            with acting_as(conn, "alice"):
                row = conn.execute(
                    "INSERT INTO pyretrieve.decisions (workspace_id, project_id, purpose,"
                    " grant_id, ceiling, semantic_policy, requested_limit, candidate_limit,"
                    " query_digest, semantic_intent) VALUES ('acme', 'docs', %s, %s,"
                    " 'restricted', 'optional', 10, 100, %s, 'optional') RETURNING decision_id",
                    (PURPOSE, group, b"\x00" * 32),
                ).fetchone()
                assert row is not None
                set_local(conn, "pyretrieve.decision", str(row["decision_id"]))
                seen = fragment_ids(conn)
        except psycopg.errors.InsufficientPrivilege:
            pass  # refusing the hand-written decision outright also keeps the guarantee
    assert seen <= s.visible, "a hand-written decision shows rows authorize() would not"


# ---------------------------------------------------------------------------------------------
# Role switches and statistics
# ---------------------------------------------------------------------------------------------
def test_switching_role_inside_a_transaction_gives_the_new_role_nothing(
    conn: Conn, s: Seeded
) -> None:
    with conn.transaction():
        conn.execute(f"SET LOCAL ROLE {role('alice')}")
        alices = authorize(conn)["decision_id"]
        assert fragment_ids(conn) == s.visible
        conn.execute(f"SET LOCAL ROLE {role('bob')}")
        # Alice's decision belongs to alice: bob can neither use it nor make a second one.
        for call, state in (
            (lambda: lexical(conn, alices, SHARED_WORD), "PR002"),
            (lambda: records(conn, alices, list(s.visible)), "PR002"),
            (lambda: authorize(conn), "PR003"),
            (lambda: conn.execute("SELECT count(*) FROM pyretrieve.fragments"), "42501"),
        ):
            with pytest.raises(psycopg.Error) as exc, conn.transaction():
                call()
            assert exc.value.sqlstate == state


def test_cached_plans_do_not_carry_over_between_principals(conn: Conn, s: Seeded) -> None:
    # One session, alternating principals, enough calls for plpgsql to cache generic plans:
    # bob (ceiling internal) must never get alice's confidential row.
    confidential = s.acme["confidential"]
    for _ in range(7):
        for nick in ("alice", "bob"):
            with acting_as(conn, nick):
                d = authorize(conn)["decision_id"]
                lex = {r["fragment_id"] for r in lexical(conn, d, "cobalt apricot")}
                vec_ids = {r["fragment_id"] for r in vector(conn, d, PROBE)}
                direct = fragment_ids(conn)
            for ids in (lex, vec_ids, direct):
                assert (confidential in ids) == (nick == "alice"), nick


@pytest.mark.parametrize("nick", ["alice", "wally"])
def test_planner_statistics_of_tenant_tables_are_hidden(
    shared: tuple[Database, Seeded], conn: Conn, s: Seeded, nick: str
) -> None:
    with acting_as(conn, nick):
        if nick == "alice":
            authorize(conn)
        else:
            conn.execute("SELECT pyretrieve.bind_write_scope('acme', 'docs')")
        rows = conn.execute(
            "SELECT tablename::text AS t, attname::text AS a FROM pg_stats"
            " WHERE schemaname = 'pyretrieve' AND tablename = ANY(%s)",
            ([*TENANT_TABLES, "grants", "decisions"],),
        ).fetchall()
        dump = conn.execute("SELECT coalesce(string_agg(s::text, ' '), '') AS t FROM pg_stats s")
        text = (dump.fetchone() or {"t": ""})["t"]
    assert rows == []
    for needle in s.sentinels:
        assert needle.lower() not in text.lower()
    with shared[0].admin() as admin:  # positive control: the statistics do exist
        row = admin.execute(
            "SELECT count(*) AS n FROM pg_stats WHERE schemaname = 'pyretrieve'"
            " AND tablename = 'fragments'"
        ).fetchone()
    assert row is not None
    assert row["n"] > 0


# ---------------------------------------------------------------------------------------------
# The owner role
# ---------------------------------------------------------------------------------------------
def test_owner_role_is_bound_by_rls(conn: Conn, s: Seeded) -> None:
    with conn.transaction():
        conn.execute("SET LOCAL ROLE pyretrieve_owner")
        who = conn.execute(
            "SELECT current_user AS u, rolsuper, rolbypassrls FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
        assert who == {"u": "pyretrieve_owner", "rolsuper": False, "rolbypassrls": False}
        for table in (*TENANT_TABLES, "grants", "decisions", "write_bindings"):
            row = conn.execute(f"SELECT count(*) AS n FROM pyretrieve.{table}").fetchone()
            assert row == {"n": 0}, table
        set_local(conn, "pyretrieve.write_scope", "acme/docs")
        row = conn.execute("SELECT count(*) AS n FROM pyretrieve.fragments").fetchone()
        assert row == {"n": 0}
    err = error_as(conn, None, "SET LOCAL ROLE pyretrieve_owner", lambda: authorize(conn))
    assert err.sqlstate in ("42501", "PR001")
