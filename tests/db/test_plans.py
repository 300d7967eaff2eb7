"""Query plans: in-scope candidate queries start from a pyretrieve index and never read the whole
fragments table, and the policies' look-ups run once per query (InitPlans).

The candidate queries run inside plpgsql functions, so their plans are captured with
auto_explain (nested statements, JSON, with ANALYZE row counts) and sent to the client. Loading
auto_explain needs a superuser session; the session then SETs ROLE to the principal, and the
test checks that current_user is that principal and not a superuser, which is all RLS looks at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import (
    Database,
    Server,
    acting_as,
    create_database,
    drop_database,
    role,
    rows_read,
    second_wall,
)
from tests.db.seed import PURPOSE, authorize, lexical, vector

Conn = psycopg.Connection[Any]
WORKSPACES, PROJECTS, ROWS = 10, 2, 4000
SCOPE_ROWS = ROWS // (WORKSPACES * PROJECTS)  # 200 rows per workspace/project
MODEL = "plan-16d"
SCOPE = ("ws3", "p1")
# A scope holding most of the table (no embeddings): where a plan's shape follows the scope's
# share of the table rather than its size.
BIG, BIG_ROWS = ("ws0", "big"), 6000
PYRETRIEVE_INDEXES = {
    "fragments_pkey", "fragments_scope_idx", "fragments_active_content_key",
    "fragments_docno_key", "embeddings_pkey", "embeddings_scope_idx", "lexical_blocks_pkey",
    "lexical_pages_pkey", "lexical_tombstones_pkey",
}  # fmt: skip
# lexical_tombstones is left out: it is empty but for postings whose block another writer held
# while their fragment left, so the planner rightly reads it by a sequential scan of no page;
# the lexical plan test bounds its reads instead.
TENANT_SCANNED = {"fragments", "embeddings", "lexical_blocks", "lexical_pages"}


@pytest.fixture(scope="module")
def corpus(server: Server, template_db: str) -> Iterator[Database]:
    """ROWS fragments with 16-d embeddings over WORKSPACES x PROJECTS scopes, inserted by the
    superuser in bulk (setup only), then analysed. alice reads SCOPE."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute(
                "SELECT pyretrieve.create_workspace(format('ws%%s', w))"
                " FROM generate_series(0, %s) w",
                (WORKSPACES - 1,),
            )
            admin.execute(
                "SELECT pyretrieve.create_project(format('ws%%s', w), format('p%%s', p))"
                " FROM generate_series(0, %s) w, generate_series(0, %s) p",
                (WORKSPACES - 1, PROJECTS - 1),
            )
            admin.execute("SELECT pyretrieve.register_model(%s, 16)", (MODEL,))
            admin.execute(
                "INSERT INTO pyretrieve.fragments"
                " (workspace_id, project_id, body, classification, observed_at)"
                " SELECT format('ws%%s', i %% %s), format('p%%s', (i / %s) %% %s),"
                "        format('document %%s about topic%%s and subject%%s', i, i %% 37, i %% 11),"
                "        (ARRAY['public','internal','confidential','restricted'])[1 + i %% 4]"
                "            ::pyretrieve.classification,"
                "        now() - (i %% 90) * interval '1 day'"
                " FROM generate_series(0, %s) i",
                (WORKSPACES, WORKSPACES, PROJECTS, ROWS - 1),
            )
            admin.execute(
                "INSERT INTO pyretrieve.embeddings"
                " (workspace_id, project_id, fragment_id, model_id, embedding, source_digest)"
                " SELECT f.workspace_id, f.project_id, f.fragment_id, %s,"
                "        ARRAY(SELECT random() - 0.5 + 0 * length(f.body)"
                "              FROM generate_series(1, 16))::real[]::public.vector,"
                "        f.content_digest"
                " FROM pyretrieve.fragments f",
                (MODEL,),
            )
            admin.execute("SELECT pyretrieve.create_project(%s, %s)", BIG)
            admin.execute(
                "INSERT INTO pyretrieve.fragments"
                " (workspace_id, project_id, body, classification, observed_at)"
                " SELECT %s, %s, format('document %%s about topic%%s', i, i %% 37),"
                "        (ARRAY['public','internal','confidential','restricted'])[1 + i %% 4]"
                "            ::pyretrieve.classification,"
                "        now() - (i %% 90) * interval '1 day'"
                " FROM generate_series(1, %s) i",
                (*BIG, BIG_ROWS),
            )
            for scope in (SCOPE, BIG):
                admin.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'restricted')",
                    (role("alice"), *scope, PURPOSE),
                )
            # As the Ingestor leaves a scope after a run: small lists compacted into pages.
            admin.execute(
                "SELECT count(c.*) FROM pyretrieve.projects p CROSS JOIN LATERAL"
                " pyretrieve.compact_lexical_postings(p.workspace_id, p.project_id, 'restricted') c"
            )
            # As autovacuum leaves a settled table: statistics and the visibility map.
            admin.execute("VACUUM (ANALYZE)")
        yield db
    finally:
        drop_database(server, db.name)


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def captured_plans(db: Database, nick: str, call: Any) -> list[dict[str, Any]]:
    """Run ``call(conn)`` as the principal with auto_explain on; return every statement plan
    (top level and nested) it produced, as auto_explain's JSON."""
    return captured_plans_by_transaction(db, nick, call, transactions=1)[0]


def captured_plans_by_transaction(
    db: Database, nick: str, call: Any, *, transactions: int
) -> list[list[dict[str, Any]]]:
    """``captured_plans`` for ``call`` run in each of several transactions of one session,
    the plans of each transaction apart."""
    messages: list[str] = []
    captured: list[list[str]] = []
    with db.admin(autocommit=True) as conn:
        conn.execute("LOAD 'auto_explain'")
        for name, value in [
            ("auto_explain.log_min_duration", "0"),
            ("auto_explain.log_nested_statements", "on"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_timing", "off"),
            ("auto_explain.log_format", "json"),
            # lexical_candidates runs with client_min_messages = warning, so the plans are
            # raised at WARNING to reach the client from inside it.
            ("auto_explain.log_level", "warning"),
            ("client_min_messages", "warning"),
        ]:
            conn.execute(
                sql.SQL("SET {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value))
            )
        conn.add_notice_handler(lambda d: messages.append(d.message_primary or ""))
        for _ in range(transactions):
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role(nick))))
                who = conn.execute(
                    "SELECT current_user AS u, r.rolsuper, r.rolbypassrls,"
                    " current_setting('is_superuser') AS su"
                    " FROM pg_roles r WHERE r.rolname = current_user"
                ).fetchone()
                assert who == {
                    "u": role(nick), "rolsuper": False, "rolbypassrls": False, "su": "off"
                }  # fmt: skip
                messages.clear()
                call(conn)
                captured.append(list(messages))
    return [
        [json.loads(m.split("plan:", 1)[1])["Plan"] for m in batch if "plan:" in m]
        for batch in captured
    ]


def scans_of(plans: list[dict[str, Any]], relation: str) -> list[dict[str, Any]]:
    """Scan nodes that read ``relation`` (a Bitmap Heap Scan stands with its index scans)."""
    return [n for p in plans for n in nodes(p) if n.get("Relation Name") == relation]


def assert_index_only_access(plans: list[dict[str, Any]]) -> None:
    tenant = [n for p in plans for n in nodes(p) if n.get("Relation Name") in TENANT_SCANNED]
    assert tenant, "no plan touched the tenant tables"
    for node in tenant:
        assert node["Node Type"] != "Seq Scan", node
        assert node["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan"), node
        if node["Node Type"] == "Bitmap Heap Scan":
            index_nodes = [n for n in nodes(node) if n["Node Type"] == "Bitmap Index Scan"]
            assert index_nodes, node
        else:
            index_nodes = [node]
        for index_node in index_nodes:
            assert index_node["Index Name"] in PYRETRIEVE_INDEXES, index_node
            # An index read of one scope, never of the whole table.
            assert index_node["Actual Rows"] <= SCOPE_ROWS * max(1, index_node["Actual Loops"])


def assert_lookups_run_once(plans: list[dict[str, Any]]) -> None:
    """The binding look-ups are InitPlans, each evaluated at most once."""
    lookups = [
        n for p in plans for n in nodes(p)
        if n.get("Function Name") in ("bound_filter", "bound_decision", "write_scope")
    ]  # fmt: skip
    assert lookups
    for node in lookups:
        assert node["Parent Relationship"] == "InitPlan", node
        assert node["Actual Loops"] <= 1, node


def candidate_plans(plans: list[dict[str, Any]], relation: str) -> list[dict[str, Any]]:
    """The plans of the candidate query itself (the one that reads ``relation`` with a
    Limit on top), not the policies' helper look-ups."""
    return [
        p
        for p in plans
        if scans_of([p], relation) and any(n["Node Type"] == "Limit" for n in nodes(p))
    ]


def test_lexical_candidates_read_the_scope_through_an_index(corpus: Database) -> None:
    got: dict[str, Any] = {}

    def call(conn: Conn) -> None:
        d = authorize(conn, *SCOPE)["decision_id"]
        got["rows"] = lexical(conn, d, "topic5 subject3 document", 100)

    plans = captured_plans(corpus, "alice", call)
    assert got["rows"], "the query matches rows in the scope"
    mine = candidate_plans(plans, "fragments")
    assert mine, [p["Node Type"] for p in plans]
    assert_index_only_access(mine)
    assert_lookups_run_once(mine)
    assert_index_only_access([p for p in plans if scans_of([p], "fragments")])


@pytest.mark.parametrize("scope", [SCOPE, BIG], ids=["small", "big"])
def test_the_lexical_scope_statistics_read_the_scopes_statistics_log(
    corpus: Database, scope: tuple[str, str]
) -> None:
    """The scope's statistics (document count, average length) are summed from its rows of the
    statistics log (through the log's key, bounded by the scope, when the scope is a small share
    of the log), and no plan reads the scope's fragments for them (an index-only scan of every fragment of the scope, until
    0018). No plan ORs two bitmap scans of the two bindings' scopes (which the planner chose for
    a scope holding much of the table while the policies ORed two scopes)."""

    def call(conn: Conn) -> None:
        d = authorize(conn, *scope)["decision_id"]
        assert lexical(conn, d, "topic5 document", 100)

    mine = candidate_plans(captured_plans(corpus, "alice", call), "fragments")
    assert mine
    every = [n for p in mine for n in nodes(p)]
    assert not [n for n in every if n["Node Type"] == "BitmapOr"]
    assert not [n for n in every if n.get("Index Name") == "fragments_scope_idx"]
    stats = [n for n in every if n.get("Relation Name") == "statistics_log"]
    assert len(stats) == 1
    (scan,) = stats
    with corpus.admin() as admin:
        logged = admin.execute(
            "SELECT count(*) FILTER (WHERE workspace_id = %s AND project_id = %s) AS scope,"
            " count(*) AS every FROM pyretrieve.statistics_log",
            scope,
        ).fetchone()
    assert logged is not None
    # One writing statement logged a row per (classification, observed_at) of the rows it
    # wrote: the scope's log is far smaller than its fragments, the whole log than the table.
    assert 0 < logged["scope"] < (SCOPE_ROWS if scope == SCOPE else BIG_ROWS) // 10
    assert logged["every"] < (ROWS + BIG_ROWS) // 10
    assert 0 < scan["Actual Rows"] <= logged["scope"]
    if scope == SCOPE:
        # A small share of the log: read through the key (or a bitmap of it), bounded by scope.
        index = [
            n
            for n in nodes(scan)
            if n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
        ]
        assert [n["Index Name"] for n in index] == ["statistics_log_pkey"]
        assert "workspace_id" in index[0]["Index Cond"]
        assert "project_id" in index[0]["Index Cond"]


def key_read(every: list[dict[str, Any]], relation: str, index: str) -> tuple[dict[str, Any], str]:
    """The one read of ``relation`` in the plan, through ``index`` (an index scan, or a bitmap
    heap scan over it, as the planner prefers for the rows it expects): the node and its index
    condition."""
    reads = [n for n in every if n.get("Relation Name") == relation]
    assert [n["Node Type"] for n in reads] in (["Index Scan"], ["Bitmap Heap Scan"]), reads
    (read,) = reads
    probe = read if read["Node Type"] == "Index Scan" else read["Plans"][0]
    assert probe.get("Index Name") == index, probe
    return read, str(probe["Index Cond"])


def paged_lexemes(corpus: Database, scope: tuple[str, str], n: int) -> list[str]:
    """The first ``n`` lexemes (rare ones: a small list) that the scope keeps in pages."""
    with corpus.admin() as admin:
        rows = admin.execute(
            "SELECT l.lexeme FROM pyretrieve.lexical_pages p, unnest(p.lexemes) l(lexeme)"
            " WHERE p.workspace_id = %s AND p.project_id = %s ORDER BY 1 LIMIT %s",
            (*scope, n),
        ).fetchall()
    assert len(rows) == n
    return [str(r["lexeme"]) for r in rows]


@pytest.mark.parametrize("scope", [SCOPE, BIG], ids=["small", "big"])
def test_the_lexical_leg_reads_the_blocks_of_the_query_terms_only(
    corpus: Database, scope: tuple[str, str]
) -> None:
    """The lexical index is read through its keys, once per query term, bounded by scope and
    term: the plan reads the blocks of the query's terms and no other (a block holds up to 128
    postings, so a term's blocks are a few rows where its postings were as many rows), and the
    pages of the terms' buckets and of their groups of 16 and no other (a rare term's small
    list is a slice of one);
    each term's tombstones are one probe of their key; and fragments are read only for the
    rows the leg returns, each by its document number."""
    terms = ["topic5", "document", *paged_lexemes(corpus, scope, 1)]

    def call(conn: Conn) -> None:
        d = authorize(conn, *scope)["decision_id"]
        assert lexical(conn, d, " ".join(terms), 100)

    mine = candidate_plans(captured_plans(corpus, "alice", call), "fragments")
    every = [x for p in mine for x in nodes(p)]
    scan, cond = key_read(every, "lexical_blocks", "lexical_blocks_pkey")
    for column in ("workspace_id", "project_id", "lexeme"):
        assert column in cond, cond
    assert scan["Actual Loops"] == len(terms)  # once per query term
    with corpus.admin() as admin:
        held = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_blocks"
            " WHERE workspace_id = %s AND project_id = %s AND lexeme = ANY (%s)",
            (*scope, terms),
        ).fetchone()
        buckets = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_pages"
            " WHERE workspace_id = %s AND project_id = %s"
            "   AND bucket IN (SELECT unnest(ARRAY[b, 256 + (b >> 4)])"
            "                    FROM (SELECT pyretrieve.lexeme_bucket(t) AS b"
            "                            FROM unnest(%s::text[]) t) x)",
            (*scope, terms),
        ).fetchone()
    assert held is not None
    assert buckets is not None
    # At most the blocks of the terms (fewer when the decision's window excludes some).
    # (Actual Rows is the mean per loop, rounded to two places.)
    assert 0 < round(scan["Actual Rows"] * scan["Actual Loops"]) <= held["n"]
    page_scan, cond = key_read(every, "lexical_pages", "lexical_pages_pkey")
    for column in ("workspace_id", "project_id", "bucket"):
        assert column in cond, cond
    assert page_scan["Actual Loops"] == len(terms)
    # The rare term's page at least, and no page outside the terms' buckets and their groups.
    assert 0 < round(page_scan["Actual Rows"] * page_scan["Actual Loops"]) <= buckets["n"]
    tombstones = [n for n in every if n.get("Relation Name") == "lexical_tombstones"]
    assert [n["Actual Loops"] for n in tombstones] == [len(terms)]  # one read per term
    assert [n["Actual Rows"] for n in tombstones] == [0]  # none here, nor another scope's
    fragments = [n for n in every if n.get("Relation Name") == "fragments"]
    assert fragments
    for node in fragments:
        assert node.get("Index Name") == "fragments_docno_key", node
        # One fragment per probe: a posting's or a returned row's, never a scan of the scope.
        assert node["Actual Rows"] <= node["Actual Loops"], node


def test_a_pages_term_position_and_slice_are_computed_once_per_page(corpus: Database) -> None:
    """Each page the lexical leg reads gives the term's position among its lexemes and the
    term's slice of its postings once: each in a sub-select of its own, evaluated once per page.
    Pulled up into the scan (until 0056), the position was copied into the page scan's filter
    and into each bound of the slice, and the slice into each of its four uses, each copy
    reading the page's arrays again (decompressing them when compressed): a tenth of the leg
    on SciFact."""
    terms = paged_lexemes(corpus, SCOPE, 3)

    def call(conn: Conn) -> None:
        d = authorize(conn, *SCOPE)["decision_id"]
        assert lexical(conn, d, " ".join(terms), 100)

    every = [x for p in candidate_plans(captured_plans(corpus, "alice", call), "fragments")
             for x in nodes(p)]  # fmt: skip
    page_scan, _ = key_read(every, "lexical_pages", "lexical_pages_pkey")
    assert "array_position" not in str(page_scan.get("Filter", "")), page_scan
    pages = round(page_scan["Actual Rows"] * page_scan["Actual Loops"])
    assert pages >= len(terms)
    (position,) = [n for n in every if n["Node Type"] == "Subquery Scan" and n.get("Alias") == "i"
                   and "IS NOT NULL" in str(n.get("Filter", ""))]  # fmt: skip
    assert position["Actual Loops"] == pages  # once per page the scan gave


def test_vector_candidates_read_the_scope_through_an_index(corpus: Database) -> None:
    got: dict[str, Any] = {}

    def call(conn: Conn) -> None:
        d = authorize(conn, *SCOPE)["decision_id"]
        got["rows"] = vector(conn, d, [0.1] * 16, 100, model=MODEL)

    plans = captured_plans(corpus, "alice", call)
    assert len(got["rows"]) == 100
    mine = candidate_plans(plans, "embeddings")
    assert mine, [p["Node Type"] for p in plans]
    assert scans_of(mine, "fragments")
    assert_index_only_access(mine)
    assert_lookups_run_once(mine)


def test_vector_candidates_plan_generically_and_read_by_keys_from_the_first_call(
    corpus: Database,
) -> None:
    """The vector leg's plan is generic from a session's first call (the scope a parameter:
    planning it afresh at each call cost 0.5 to 1.5 ms), and it must not depend on the scope's
    size: every run reads the scope through its index and each nearest row's fragment by its
    key, never a scan of the scope per row (the plain join's generic plan did that, 20x slower
    at a 10,000-row scope, before the LATERAL look-up)."""

    def call(conn: Conn) -> None:
        d = authorize(conn, *SCOPE)["decision_id"]
        assert len(vector(conn, d, [0.1] * 16, 100, model=MODEL)) == 100

    runs = captured_plans_by_transaction(corpus, "alice", call, transactions=8)
    for n, plans in enumerate(runs, start=1):
        mine = candidate_plans(plans, "embeddings")
        assert mine, n
        assert_index_only_access(mine)
        # A generic plan states the scope as a parameter ($n); a custom one as a constant.
        conditions = [
            sub["Index Cond"] for node in scans_of(mine, "embeddings")
            for sub in nodes(node) if "Index Cond" in sub
        ]  # fmt: skip
        assert conditions, n
        assert all("$" in c and f"'{SCOPE[0]}'" not in c for c in conditions), (n, conditions)
        joined = scans_of(mine, "fragments")
        assert joined, n
        for node in joined:
            assert node["Actual Rows"] <= node["Actual Loops"], (n, node)
            assert node.get("Index Name") == "fragments_pkey", (n, node)


def test_the_vector_legs_plan_settings_are_pinned(db: Database) -> None:
    """The catalog keeps the settings the test above depends on: generic plans, and no
    sequential scan (a plan made for an average scope must not read every scope for a small
    one)."""
    with db.admin() as admin:
        row = admin.execute(
            "SELECT proconfig FROM pg_proc"
            " WHERE oid = 'pyretrieve.vector_candidates(uuid, text, public.vector, integer)'"
            "::regprocedure"
        ).fetchone()
    assert row is not None
    assert "plan_cache_mode=force_generic_plan" in row["proconfig"]
    assert "enable_seqscan=off" in row["proconfig"]


def test_fragments_read_by_id_through_an_index(corpus: Database) -> None:
    def call(conn: Conn) -> None:
        d = authorize(conn, *SCOPE)["decision_id"]
        ids = [r["fragment_id"] for r in lexical(conn, d, "document", 50)]
        rows = conn.execute("SELECT * FROM pyretrieve.fragments(%s, %s)", (d, ids)).fetchall()
        assert len(rows) == len(ids) == 50

    plans = captured_plans(corpus, "alice", call)
    assert_index_only_access([p for p in plans if scans_of([p], "fragments")])


def test_policy_lookups_are_initplans(corpus: Database) -> None:
    with corpus.connect(autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("alice"))))
        authorize(conn, *SCOPE)
        # The second wall: pyretrieve_api's policies under alice's decision.
        second_wall(conn)
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT count(*) FROM pyretrieve.fragments"
        ).fetchone()
        assert row is not None
        plan = row["QUERY PLAN"][0]["Plan"]
        count = conn.execute("SELECT count(*) AS n FROM pyretrieve.fragments").fetchone()
    all_nodes = list(nodes(plan))
    relationships = [n.get("Parent Relationship") for n in all_nodes]
    init_plans = [n for n in all_nodes if n.get("Parent Relationship") == "InitPlan"]
    # One look-up per policy term, each evaluated once per query, none per row.
    assert len(init_plans) >= 5, relationships
    assert "SubPlan" not in relationships
    assert all(
        n.get("Function Name") in (None, "bound_filter", "bound_write")
        for p in init_plans for n in nodes(p)
    )  # fmt: skip
    frag = [n for n in all_nodes if n.get("Relation Name") == "fragments"]
    assert frag
    assert all(n["Node Type"] != "Seq Scan" for n in frag), frag
    assert count is not None
    assert 0 < count["n"] <= SCOPE_ROWS


def test_a_principal_sees_no_plan_over_a_table(corpus: Database) -> None:
    """EXPLAIN, with ANALYZE or without, shows a principal no plan, row count or estimate of
    any table: the 0003 attacks (Rows Removed by Filter counted what RLS hid; estimates
    applied the MCV list of a hidden word) need a table the principal may read."""
    attacks = [
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pyretrieve.fragments WHERE doc_length > 0",
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM pyretrieve.lexical_blocks"
        " WHERE workspace_id = 'ws3' AND project_id = 'p1' AND lexeme = 'word'",
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT 1 FROM pyretrieve.lexical_tombstones"
        " WHERE workspace_id = 'ws3' AND project_id = 'p1' AND lexeme = 'word'",
        # A page's lexemes: an estimate or a removed-row count would tell whether a hidden
        # fragment holds the word.
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT 1 FROM pyretrieve.lexical_pages"
        " WHERE workspace_id = 'ws3' AND project_id = 'p1'"
        "   AND bucket = pyretrieve.lexeme_bucket('word') AND 'word' = ANY (lexemes)",
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM pyretrieve.lexical_pages"
        " WHERE workspace_id = 'ws3' AND project_id = 'p1' AND first_lexeme <= 'word'",
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pyretrieve.grants",
        "EXPLAIN (FORMAT JSON) SELECT * FROM pyretrieve.decisions",
    ]
    with corpus.connect(autocommit=True) as conn:
        for statement in attacks:
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("alice"))))
                authorize(conn, *SCOPE)
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(statement)
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role("alice"))))
            d = authorize(conn, *SCOPE)["decision_id"]
            row = conn.execute(
                "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON)"
                " SELECT * FROM pyretrieve.lexical_candidates(%s, 'word', 100)",
                (d,),
            ).fetchone()
    assert row is not None
    shown = list(nodes(row["QUERY PLAN"][0]["Plan"]))
    assert [n["Node Type"] for n in shown] == ["Function Scan"]
    assert not any("Relation Name" in n or "Rows Removed by Filter" in n for n in shown)


def test_the_binding_is_found_by_its_index_when_the_statistics_are_stale(
    server: Server, template_db: str
) -> None:
    """A month's partition of the decisions log starts empty and is analysed so (a new month, a
    new install), and so do the read bindings. A session that looked up its binding then keeps
    that plan until the tables are analysed again; 600 decisions later, every look-up of its
    next search still reads them through an index. Until 0034 the plan made for the empty
    partition scanned it whole, at each of about 30 look-ups per search, growing with it."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pyretrieve.create_workspace('acme')")
            admin.execute("SELECT pyretrieve.create_project('acme', 'docs')")
            admin.execute(
                "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, classification)"
                " SELECT 'acme', 'docs', format('document %s about topic%s', i, i % 7),"
                "        'internal' FROM generate_series(1, 50) i"
            )
            admin.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, 'internal')",
                (role("alice"), PURPOSE),
            )
            # The partitions as a new install or a new month has them: analysed while empty,
            # and left alone by autovacuum for the test.
            partitions = [
                str(r["p"])
                for r in admin.execute(
                    "SELECT inhrelid::regclass::text AS p FROM pg_inherits"
                    " WHERE inhparent = 'pyretrieve.decisions'::regclass"
                )
            ]
            assert partitions
            for table in [*partitions, "pyretrieve.read_bindings"]:
                admin.execute(
                    sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                        sql.SQL(table)
                    )
                )
            admin.execute("ANALYZE pyretrieve.decisions")
            admin.execute("ANALYZE pyretrieve.read_bindings")
        grown: list[int] = []

        def call(conn: Conn) -> None:
            if len(grown) == 1:
                # Between the session's two searches, 600 decisions of other transactions.
                with db.admin(autocommit=True) as other:
                    for _ in range(600):
                        with acting_as(other, "alice"):
                            authorize(other)
            grown.append(1)
            d = authorize(conn)["decision_id"]
            assert lexical(conn, d, "topic3 document", 100)

        first, second = captured_plans_by_transaction(db, "alice", call, transactions=2)
        with db.admin() as admin:
            stats = admin.execute(
                "SELECT sum(c.reltuples) AS analysed,"
                " (SELECT count(*) FROM pyretrieve.decisions) AS n"
                " FROM pg_class c WHERE c.oid = ANY (%s::regclass[])",
                (partitions,),
            ).fetchone()
        assert stats is not None
        # The statistics are stale: no row analysed, 602 there.
        assert stats["analysed"] <= 0
        assert stats["n"] == 602
        names = {p.split(".")[-1] for p in partitions}
        for plans in (first, second):
            reads = [n for p in plans for n in nodes(p) if n.get("Relation Name") in names]
            bindings = [
                n for p in plans for n in nodes(p)
                if n.get("Relation Name") == "read_bindings" and n["Node Type"] != "ModifyTable"
            ]  # fmt: skip
            # The function's own look-ups of its decision, and the policies' of the binding.
            assert reads, [n.get("Relation Name") for p in plans for n in nodes(p)]
            assert len(bindings) >= 10, [n.get("Relation Name") for p in plans for n in nodes(p)]
            for node in reads + bindings:
                assert node["Node Type"] in ("Index Scan", "Bitmap Heap Scan"), node
    finally:
        drop_database(server, db.name)


def test_a_searchs_records_are_read_by_key_when_the_scope_outgrew_the_statistics(
    server: Server, template_db: str
) -> None:
    """The statistics were taken before the reader's scope held a row (a new scope in a shared
    table grows long before the next automatic analysis), so they take it for one row. The
    records of a search must still be read by their keys: planned for those statistics,
    fragments() read every fragment of the scope, 5,000 rows for 200 ids, at every search,
    until 0042."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute("ALTER TABLE pyretrieve.fragments SET (autovacuum_enabled = false)")
            admin.execute("SELECT pyretrieve.create_workspace('acme')")
            for project in ("other", "docs"):
                admin.execute("SELECT pyretrieve.create_project('acme', %s)", (project,))
            admin.execute(
                "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, classification)"
                " SELECT 'acme', 'other', format('note %s', i), 'internal'"
                " FROM generate_series(1, 50) i"
            )
            admin.execute("ANALYZE pyretrieve.fragments")
            admin.execute(
                "INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, classification)"
                " SELECT 'acme', 'docs', format('document %s about topic%s', i, i % 7), 'internal'"
                " FROM generate_series(1, 5000) i"
            )
            admin.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, 'internal')",
                (role("alice"), PURPOSE),
            )
            ids = [
                r["fragment_id"]
                for r in admin.execute(
                    "SELECT fragment_id FROM pyretrieve.fragments WHERE project_id = 'docs'"
                    " ORDER BY fragment_id LIMIT 200"
                )
            ]
        with db.connect(autocommit=True) as conn, acting_as(conn, "alice"):
            d = authorize(conn)["decision_id"]
            with rows_read(conn) as read:
                rows = conn.execute(
                    "SELECT * FROM pyretrieve.fragments(%s, %s)", (d, ids)
                ).fetchall()
        assert [r["fragment_id"] for r in rows] == ids
        # One fetch per id; the scope is 5,000.
        assert read["pyretrieve.fragments"] == len(ids)
    finally:
        drop_database(server, db.name)


def test_authorize_reads_the_caller_once_whatever_the_plan_of_its_role_look_up(
    server: Server, template_db: str
) -> None:
    """Attack: a caller turns index scans off (its enable_* settings reach the SQL API's
    statements that do not pin their own) in a cluster of many roles. authorize() still calls
    caller() a fixed number of times: the look-up of the caller's own role reads it once, so a
    scan of pg_authid does not call it once per role. Until 0037 it did: one call per role."""
    db = Database(server=server, name=create_database(server, template_db))
    extra = [f"{role('crowd')}_{i}" for i in range(60)]
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pyretrieve.create_workspace('acme')")
            admin.execute("SELECT pyretrieve.create_project('acme', 'docs')")
            admin.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, 'internal')",
                (role("alice"), PURPOSE),
            )
            for name in extra:
                admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
            roles = admin.execute("SELECT count(*) AS n FROM pg_catalog.pg_authid").fetchone()
            assert roles is not None
            assert roles["n"] > 60
        calls = {}
        for scans in ("on", "off"):
            # A session of its own each: a session's counts wait unflushed across transactions.
            with db.admin(autocommit=True) as session:
                session.execute("SET track_functions = 'all'")
                session.execute(f"SET enable_indexscan = {scans}")
                session.execute(f"SET enable_bitmapscan = {scans}")
                with acting_as(session, "alice"):
                    assert authorize(session, "acme", "docs")["decision_id"]
                    row = session.execute(
                        "SELECT calls FROM pg_catalog.pg_stat_xact_user_functions"
                        " WHERE schemaname = 'pyretrieve' AND funcname = 'caller'"
                    ).fetchone()
            assert row is not None
            calls[scans] = row["calls"]
        assert calls["off"] == calls["on"] < 30, calls
    finally:
        with db.admin(autocommit=True) as admin:
            for name in extra:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        drop_database(server, db.name)


def turn_index_scans_off(conn: Conn) -> None:
    """What a principal may set before it calls the SQL API, for the rest of its transaction:
    every way to push a plan off the indexes."""
    for name in ("enable_indexscan", "enable_bitmapscan", "enable_indexonlyscan"):
        conn.execute(sql.SQL("SET LOCAL {} = off").format(sql.Identifier(name)))


@pytest.mark.parametrize("leg", ["lexical", "vector", "records"])
def test_a_callers_planner_settings_do_not_turn_a_read_into_a_scan_of_every_scope(
    corpus: Database, leg: str
) -> None:
    """Attack: the caller turns every index scan off before it calls the SQL API. A read that
    then scanned a tenant table whole would take time with every tenant's rows (a gauge of how
    much the others hold, and a load any principal could multiply); each leg and the records
    still read its own scope through pyretrieve's indexes."""

    def call(conn: Conn) -> None:
        turn_index_scans_off(conn)
        d = authorize(conn, *SCOPE)["decision_id"]
        if leg == "lexical":
            assert lexical(conn, d, "topic5 subject3 document", 100)
        elif leg == "vector":
            assert len(vector(conn, d, [0.1] * 16, 100, model=MODEL)) == 100
        else:
            ids = [r["fragment_id"] for r in lexical(conn, d, "document", 50)]
            rows = conn.execute("SELECT * FROM pyretrieve.fragments(%s, %s)", (d, ids)).fetchall()
            assert len(rows) == 50

    plans = captured_plans(corpus, "alice", call)
    assert_index_only_access(plans)
    # authorize reads the grants (every tenant's) by their key too.
    grants = scans_of(plans, "grants")
    assert grants
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in grants), grants
