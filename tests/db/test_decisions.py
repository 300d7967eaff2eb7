"""The decisions log partitioned by month: one decision per transaction as before, partitions
created ahead (and by the first search of a month without one), retention by whole months for
admins only, and "who searched what scope when" answered through an index of the months asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.test_plans import captured_plans, nodes

WS, PJ = "acme", "docs"


def sha(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection[Any]]:
    with db.connect(autocommit=True) as c:
        with acting_as(c, "adam"):
            c.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
            c.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
            for nick in ("alice", "bob"):
                c.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'support', 'internal')",
                    (role(nick), WS, PJ),
                )
        yield c


def authorize(conn: psycopg.Connection[Any], query: str = "q") -> dict[str, Any]:
    row = conn.execute(
        "SELECT * FROM pyretrieve.authorize(%s, %s, 'support', %s, 'optional', NULL, 10)",
        (WS, PJ, sha(query)),
    ).fetchone()
    assert row is not None
    return dict(row)


def partitions(db: Database) -> list[dict[str, Any]]:
    with db.admin() as admin:
        return admin.execute(
            "SELECT partition_name, range_start, range_end FROM pyretrieve.decision_partition_ranges()"
        ).fetchall()


def month_start(offset: int = 0) -> datetime:
    now = datetime.now(UTC)
    index = now.year * 12 + now.month - 1 + offset
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def test_the_current_month_and_two_ahead_exist_and_a_decision_lands_in_its_month(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    got = partitions(db)
    assert [(p["range_start"], p["range_end"]) for p in got[-3:]] == [
        (month_start(i), month_start(i + 1)) for i in range(3)
    ]
    assert [p["partition_name"] for p in got[-3:]] == [
        f"decisions_{month_start(i):%Y_%m}" for i in range(3)
    ]
    with acting_as(conn, "alice"):
        d = authorize(conn)
        # Still one decision per transaction, found by the transaction and now().
        with pytest.raises(psycopg.Error) as caught, conn.transaction():
            authorize(conn, "again")
        assert caught.value.sqlstate == "PR003"
    with db.admin() as admin:
        row = admin.execute(
            "SELECT tableoid::regclass::text AS part, count(*) OVER () AS n FROM pyretrieve.decisions"
            " WHERE decision_id = %s",
            (d["decision_id"],),
        ).fetchone()
    assert row == {"part": f"pyretrieve.decisions_{month_start():%Y_%m}", "n": 1}


def test_a_search_in_a_month_without_a_partition_creates_it(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    current = f"decisions_{month_start():%Y_%m}"
    with db.admin(autocommit=True) as admin:
        admin.execute(sql.SQL("DROP TABLE pyretrieve.{}").format(sql.Identifier(current)))
    assert current not in [p["partition_name"] for p in partitions(db)]
    with acting_as(conn, "alice"):
        d = authorize(conn)
        bound = conn.execute(
            "SELECT count(*) AS n FROM pyretrieve.fragments(%s, ARRAY[]::uuid[])",
            (d["decision_id"],),
        ).fetchone()
    assert bound == {"n": 0}
    assert current in [p["partition_name"] for p in partitions(db)]
    with db.admin() as admin:
        part = admin.execute(
            "SELECT c.relrowsecurity AND c.relforcerowsecurity AS forced,"
            " pg_get_userbyid(c.relowner)::text AS owner, c.relacl IS NULL AS no_acl"
            " FROM pg_class c WHERE c.oid = %s::regclass",
            (f"pyretrieve.{current}",),
        ).fetchone()
        n = admin.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone()
    assert part == {"forced": True, "owner": "pyretrieve_owner", "no_acl": True}
    assert n == {"n": 1}


def test_no_principal_reads_or_changes_a_partition_directly(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    with acting_as(conn, "alice"):
        authorize(conn)
    current = f"pyretrieve.decisions_{month_start():%Y_%m}"
    for nick in ("alice", "wally", "adam"):
        for statement in (
            f"SELECT * FROM {current}",
            f"UPDATE {current} SET ceiling = 'restricted'",
            f"DELETE FROM {current}",
            f"TRUNCATE {current}",
            f"ALTER TABLE {current} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE pyretrieve.decisions DETACH PARTITION {current}",
            f"DROP TABLE {current}",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                conn.execute(statement)
    # The second wall: the role the API runs as holds no privilege on a partition either, and
    # the partition's own RLS (forced, no policy) would show it nothing.
    with acting_as(conn, "alice"):
        conn.execute("SET LOCAL ROLE pyretrieve_api")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM {current}")
    with db.admin() as admin:
        assert admin.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone() == {
            "n": 1
        }


def _seed_history(db: Database, months: int, per_month: int) -> None:
    """Decisions in each of the last ``months`` months (written as the superuser: setup only)."""
    with db.admin(autocommit=True) as admin:
        admin.execute("SET ROLE pyretrieve_owner")
        admin.execute(
            "SELECT count(*) FROM pyretrieve.ensure_decision_partitions(p_from => %s)",
            (month_start(-months),),
        )
        admin.execute("RESET ROLE")
        grant = admin.execute(
            "SELECT grant_id FROM pyretrieve.grants WHERE principal = %s::regrole", (role("alice"),)
        ).fetchone()
        assert grant is not None
        admin.execute(
            "INSERT INTO pyretrieve.decisions (workspace_id, principal, project_id, purpose, grant_id,"
            " evaluated_at, ceiling, semantic_policy, requested_limit, candidate_limit, query_digest,"
            " semantic_intent)"
            " SELECT CASE WHEN i %% 5 = 0 THEN 'globex' ELSE 'acme' END,"
            "        CASE WHEN i %% 7 = 0 THEN %s ELSE %s END, 'docs', 'support', %s,"
            "        %s::timestamptz + (m || ' months')::interval + (i %% 600) * interval '1 hour',"
            "        'internal', 'optional', 10, 100, sha256(i::text::bytea), 'optional'"
            " FROM generate_series(0, %s - 1) m, generate_series(1, %s) i",
            (
                role("bob"),
                role("alice"),
                grant["grant_id"],
                month_start(-months),
                months,
                per_month,
            ),
        )
        admin.execute("ANALYZE pyretrieve.decisions")


def test_admins_prune_whole_months_older_than_the_retention(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    _seed_history(db, 4, 50)
    with acting_as(conn, "alice"):
        authorize(conn)
    with db.admin() as admin:
        before = admin.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone()
    assert before == {"n": 201}
    cutoff = datetime.now(UTC) - timedelta(days=62)
    expected = [p["partition_name"] for p in partitions(db) if p["range_end"] <= cutoff]
    assert len(expected) >= 1
    with acting_as(conn, "adam"):
        dry = conn.execute(
            "SELECT partition_name, decisions FROM pyretrieve.prune_decisions('62 days', p_dry_run => true)"
        ).fetchall()
    assert [r["partition_name"] for r in dry] == expected
    assert all(r["decisions"] == 50 for r in dry)
    assert [p["partition_name"] for p in partitions(db) if p["range_end"] <= cutoff] == expected
    with acting_as(conn, "adam"):
        pruned = conn.execute(
            "SELECT partition_name, decisions FROM pyretrieve.prune_decisions('62 days')"
        ).fetchall()
    assert pruned == dry
    left = partitions(db)
    assert not [p for p in left if p["range_end"] <= cutoff]
    assert left[-1]["range_start"] == month_start(2)
    with db.admin() as admin:
        after = admin.execute(
            "SELECT count(*) AS n, min(evaluated_at) AS oldest FROM pyretrieve.decisions"
        ).fetchone()
    assert after is not None
    assert after["n"] == 201 - 50 * len(expected)
    assert after["oldest"] >= cutoff - timedelta(days=31)


@pytest.mark.parametrize("nick", ["alice", "wally", "nobody"])
def test_only_admins_prune_or_list_and_the_retention_has_a_floor(
    db: Database, conn: psycopg.Connection[Any], nick: str
) -> None:
    for statement in (
        "SELECT * FROM pyretrieve.prune_decisions('90 days')",
        "SELECT * FROM pyretrieve.list_decisions(now() - interval '1 day')",
        "SELECT * FROM pyretrieve.decision_partitions()",
    ):
        with pytest.raises(psycopg.Error) as caught, acting_as(conn, nick):
            conn.execute(statement)
        assert caught.value.sqlstate in ("PR001", "42501")
    for retention in ("23 hours", "0 days", "-1 month"):
        with pytest.raises(psycopg.Error) as caught, acting_as(conn, "adam"):
            conn.execute("SELECT * FROM pyretrieve.prune_decisions(%s::interval)", (retention,))
        assert (caught.value.sqlstate, caught.value.diag.message_primary) == (
            "PR010",
            "retention must be at least one day",
        )
    # The owner function that drops a partition is not the admins' to call, and refuses the
    # current month (or any month that ended less than a day ago) whoever calls it.
    current = f"decisions_{month_start():%Y_%m}"
    with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.drop_decision_partition(%s)", (current,))
    for target in (current, "fragments", "decisions"):
        with acting_as(conn, "adam"):
            conn.execute("SET LOCAL ROLE pyretrieve_api")
            with pytest.raises(psycopg.Error) as caught, conn.transaction():
                conn.execute("SELECT pyretrieve.drop_decision_partition(%s)", (target,))
        assert caught.value.sqlstate == "PR010"
    assert current in [p["partition_name"] for p in partitions(db)]


def test_list_decisions_answers_who_searched_what_scope_when(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    _seed_history(db, 3, 20)
    since = month_start(-1)
    with acting_as(conn, "adam"):
        scope = conn.execute(
            "SELECT * FROM pyretrieve.list_decisions(%s, %s, 'acme', 'docs')",
            (since, month_start()),
        ).fetchall()
        bob = conn.execute(
            "SELECT * FROM pyretrieve.list_decisions(%s, p_principal => %s)", (since, role("bob"))
        ).fetchall()
        capped = conn.execute(
            "SELECT * FROM pyretrieve.list_decisions(%s, p_limit => 3)", (month_start(-3),)
        ).fetchall()
        for args in [("2020-01-02", "2020-01-01", None, None), ("2020-01-01", None, None, "docs")]:
            with pytest.raises(psycopg.Error) as caught, conn.transaction():
                conn.execute(
                    "SELECT * FROM pyretrieve.list_decisions(%s::timestamptz, %s::timestamptz, %s, %s)",
                    args,
                )
            assert caught.value.sqlstate == "PR010"
    # Month -1 holds i = 1..20: acme where i % 5 <> 0 (16 of them).
    assert len(scope) == 16
    assert all((r["workspace_id"], r["project_id"]) == (WS, PJ) for r in scope)
    assert all(since <= r["evaluated_at"] < month_start() for r in scope)
    assert [r["evaluated_at"] for r in scope] == sorted(
        (r["evaluated_at"] for r in scope), reverse=True
    )
    assert {r["principal"] for r in bob} == {role("bob")}
    assert len(bob) == 2  # i = 7, 14 in month -1
    assert len(capped) == 3
    assert not any("query" in k and k != "query_digest" for k in scope[0])


@pytest.fixture(scope="module")
def history(server: Server, template_db: str) -> Iterator[Database]:
    """Twelve months of decisions, 3,000 a month, analysed: enough rows for the planner."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.connect(autocommit=True) as c, acting_as(c, "adam"):
            c.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
            c.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
            c.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'support', 'internal')",
                (role("alice"), WS, PJ),
            )
        _seed_history(db, 12, 3000)
        yield db
    finally:
        drop_database(server, db.name)


@pytest.mark.parametrize(
    ("call", "index"),
    [
        (
            "list_decisions(%(since)s, %(until)s, 'acme', 'docs')",
            "workspace_id_project_id_evaluated_at_idx",
        ),
        (
            "list_decisions(%(since)s, %(until)s, p_principal => %(bob)s)",
            "principal_evaluated_at_idx",
        ),
    ],
    ids=["scope", "principal"],
)
def test_the_audit_questions_read_only_the_months_asked_through_an_index(
    history: Database, call: str, index: str
) -> None:
    params = {"since": month_start(-3), "until": month_start(-1), "bob": role("bob")}
    plans = captured_plans(
        history, "adam", lambda c: c.execute(f"SELECT * FROM pyretrieve.{call}", params).fetchall()
    )
    scans = [
        n
        for p in plans
        for n in nodes(p)
        if str(n.get("Relation Name", "")).startswith("decisions")
    ]
    read = sorted({n["Relation Name"] for n in scans})
    # Months -3 and -2 only, out of thirteen or more partitions.
    assert read == [f"decisions_{month_start(-3):%Y_%m}", f"decisions_{month_start(-2):%Y_%m}"]
    assert all(
        n["Node Type"] in ("Index Scan", "Index Scan Backward", "Bitmap Heap Scan") for n in scans
    ), scans
    used = {n.get("Index Name") for p in plans for n in nodes(p) if n.get("Index Name")}
    assert used == {f"decisions_{month_start(m):%Y_%m}_{index}" for m in (-3, -2)}
