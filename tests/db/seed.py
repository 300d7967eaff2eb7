"""A small, reusable seed for database tests, written through the SQL API.

Layout (principal nicknames as in ``tests.conftest``):

* workspace ``acme``: projects ``docs`` (english) and ``wiki``;
* workspace ``globex``: project ``docs`` — the foreign tenant. Every globex body carries a
  sentinel ``GLOBEX-SENTINEL-<n>`` and the words the acme tests search for, and every globex
  embedding sits exactly on the probe vector, so any leak shows up first;
* model ``test-3d`` (dimension 3);
* grants: alice reads acme/docs (purpose ``support``, ceiling confidential, max_age 30 days);
  bob reads acme/docs (ceiling internal, no max_age); the group ``pyretrieve_reader`` reads
  acme/wiki (ceiling public); wally writes acme/docs (ceiling internal) and acme/wiki (ceiling
  public); walt writes acme/docs and globex/docs (ceiling restricted). No reader holds a
  globex grant.
* acme/docs fragments, one per case (see ``CASES``), each with its own marker word, all sharing
  the word ``ledger``, each with a ``test-3d`` embedding. The hidden ones sit exactly on the
  probe vector ``PROBE``; the visible ones are further away.

Everything is written as adam (admin) and the writers, through the SQL functions, and each
scope's lexical index is then compacted (its small lists into pages) as the Ingestor does; the cases
the API forbids for new content use the ``p_observed_at``/``p_expires_at`` arguments. The one
exception is marking rows superseded/retracted while writers' UPDATEs fail (see ``supersede``).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, create_database, drop_database, role

MODEL = "test-3d"
PROBE = (1.0, 0.0, 0.0)
PURPOSE = "support"
INGEST = "ingest"
SHARED_WORD = "ledger"

# case -> (marker word, classification, visible to alice under her decision)
CASES: dict[str, tuple[str, str, bool]] = {
    "public": ("apricot", "public", True),
    "internal": ("bramble", "internal", True),
    "confidential": ("cobalt", "confidential", True),
    "restricted": ("dagger", "restricted", False),
    "superseded": ("ember", "internal", False),
    "successor": ("fennel", "internal", True),
    "retracted": ("garnet", "internal", False),
    "expired": ("harbor", "internal", False),
    "future": ("indigo", "internal", False),
    "old": ("juniper", "internal", False),
}
HIDDEN_CASES = tuple(c for c, (_, _, visible) in CASES.items() if not visible)
VISIBLE_CASES = tuple(c for c, (_, _, visible) in CASES.items() if visible)
SENTINEL_PREFIX = "GLOBEX-SENTINEL-"
GLOBEX_COUNT = 6


def sha(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def vec(values: Sequence[float]) -> str:
    """A pgvector text literal."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def body_for(case: str) -> str:
    word, classification, _ = CASES[case]
    return f"acme {classification} {SHARED_WORD} note about {word}"


@dataclass
class Seeded:
    """Ids of everything the seed wrote."""

    acme: dict[str, UUID] = field(default_factory=dict)  # case -> fragment id (acme/docs)
    wiki: list[UUID] = field(default_factory=list)  # acme/wiki fragments
    globex: list[UUID] = field(default_factory=list)  # globex/docs fragments
    sentinels: list[str] = field(default_factory=list)  # globex bodies' sentinel strings
    grants: dict[str, UUID] = field(default_factory=dict)  # "alice", "bob", "group", ...

    @property
    def visible(self) -> set[UUID]:
        """acme/docs fragments alice may see under her decision."""
        return {self.acme[c] for c in VISIBLE_CASES}

    @property
    def hidden(self) -> set[UUID]:
        """acme/docs fragments alice may not see under her decision."""
        return {self.acme[c] for c in HIDDEN_CASES}

    @property
    def foreign_strings(self) -> list[str]:
        """Strings that must never appear in anything an acme caller receives."""
        return [*self.sentinels, "globex", *(str(i) for i in self.globex)]


def grant(
    conn: psycopg.Connection[Any],
    principal: str,
    workspace: str,
    project: str,
    purpose: str,
    ceiling: str,
    *,
    max_age: str | None = None,
    semantic_policy: str = "optional",
    expires: str | None = None,
) -> UUID:
    """grant_access as the current role; ``principal`` is a role name; ``expires`` is SQL."""
    row = conn.execute(
        "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, %s::pyretrieve.classification,"
        f" %s::interval, %s::pyretrieve.semantic_policy, {expires or 'NULL'}) AS id",
        (principal, workspace, project, purpose, ceiling, max_age, semantic_policy),
    ).fetchone()
    assert row is not None
    return _one(row)


def put(
    conn: psycopg.Connection[Any],
    workspace: str,
    project: str,
    body: str,
    classification: str = "internal",
    *,
    observed: str | None = None,
    expires: str | None = None,
) -> UUID:
    """put_fragment as the current role; ``observed``/``expires`` are SQL expressions."""
    row = conn.execute(
        "SELECT pyretrieve.put_fragment(%s, %s, %s, %s::pyretrieve.classification,"
        f" {observed or 'NULL'}, {expires or 'NULL'}) AS id",
        (workspace, project, body, classification),
    ).fetchone()
    assert row is not None
    return _one(row)


def embed(
    conn: psycopg.Connection[Any],
    workspace: str,
    project: str,
    fragment_id: UUID,
    values: Sequence[float],
    source: str,
    model: str = MODEL,
) -> int:
    """put_embedding as the current role; returns the vector generation."""
    row = conn.execute(
        "SELECT pyretrieve.put_embedding(%s, %s, %s, %s, %s::public.vector, %s) AS g",
        (workspace, project, fragment_id, model, vec(values), sha(source)),
    ).fetchone()
    assert row is not None
    return int(_one(row))


def authorize(
    conn: psycopg.Connection[Any],
    workspace: str = "acme",
    project: str = "docs",
    purpose: str = PURPOSE,
    *,
    query: str = SHARED_WORD,
    intent: str = "optional",
    limit: int = 10,
    embedding_digest: bytes | None = None,
) -> dict[str, Any]:
    """authorize() as the current role; returns the decision row as a dict."""
    cur = conn.execute(
        "SELECT * FROM pyretrieve.authorize(%s, %s, %s, %s, %s, %s, %s)",
        (workspace, project, purpose, sha(query), intent, embedding_digest, limit),
    )
    row = cur.fetchone()
    assert row is not None
    names = [c.name for c in cur.description or []]
    return row if isinstance(row, dict) else dict(zip(names, row, strict=True))


def lexical(
    conn: psycopg.Connection[Any], decision: UUID, query: str, limit: int = 100
) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, %s)", (decision, query, limit)
    )
    return _rows(cur)


def vector(
    conn: psycopg.Connection[Any],
    decision: UUID,
    values: Sequence[float],
    limit: int = 100,
    model: str = MODEL,
) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT * FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, %s)",
        (decision, model, vec(values), limit),
    )
    return _rows(cur)


def records(
    conn: psycopg.Connection[Any], decision: UUID, ids: Sequence[UUID] | None
) -> list[dict[str, Any]]:
    arg = None if ids is None else list(ids)
    cur = conn.execute("SELECT * FROM pyretrieve.fragments(%s, %s::uuid[])", (decision, arg))
    return _rows(cur)


def supersede(
    db: Database, conn: psycopg.Connection[Any], nick: str, ws: str, project: str, old: UUID,
    body: str,
) -> UUID:  # fmt: skip
    """supersede_fragment as writer ``nick`` in its own transaction; returns the new id."""
    with acting_as(conn, nick):
        row = conn.execute(
            "SELECT pyretrieve.supersede_fragment(%s, %s, %s, %s) AS id",
            (ws, project, old, body),
        ).fetchone()
        assert row is not None
        return UUID(str(_one(row)))


def retract(
    db: Database, conn: psycopg.Connection[Any], nick: str, ws: str, project: str, fid: UUID
) -> None:
    """retract_fragment as writer ``nick`` in its own transaction."""
    with acting_as(conn, nick):
        conn.execute("SELECT pyretrieve.retract_fragment(%s, %s, %s)", (ws, project, fid))


def concurrent_writers(
    db: Database, nick: str, writers: int, write: Callable[[psycopg.Connection[Any], int], None]
) -> list[BaseException]:
    """``write(conn, n)`` for n in range(writers), each on its own connection in one transaction
    as the principal ``nick``, with ``lock_timeout`` 2 s; every writer has written before any
    commits, so a shared row would make the others wait past the timeout. Returns the errors."""
    started = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            with db.connect() as c:
                c.execute("SET lock_timeout = '2s'")
                with c.transaction():
                    c.execute(f'SET LOCAL ROLE "{role(nick)}"')
                    write(c, n)
                    started.wait(timeout=10)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


# How a bulk-loaded row is hidden from a reader of ceiling internal: above the ceiling,
# retracted, expired, or observed in the future.
HIDDEN_KINDS = ("restricted", "retracted", "expired", "future")


def copy_fragments(
    cur: psycopg.Cursor[Any],
    rows: Iterable[tuple[str, str, UUID, str, str, str]],
    now: datetime,
) -> None:
    """COPY fragments in bulk (test setup, as the superuser; the triggers run): each row is
    (workspace, project, id, body, classification, hidden), hidden one of HIDDEN_KINDS or ""
    (restricted overrides the classification)."""
    with cur.copy(
        "COPY pyretrieve.fragments (workspace_id, project_id, fragment_id, body,"
        " classification, state, observed_at, expires_at) FROM STDIN"
    ) as copy:
        for ws, project, fid, body, classification, hidden in rows:
            copy.write_row((
                ws, project, fid, body,
                "restricted" if hidden == "restricted" else classification,
                "retracted" if hidden == "retracted" else "active",
                now + (timedelta(days=1) if hidden == "future" else -timedelta(hours=1)),
                now - timedelta(minutes=1) if hidden == "expired" else None,
            ))  # fmt: skip


def _rows(cur: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    rows = cur.fetchall()
    names = [c.name for c in cur.description or []]
    return [r if isinstance(r, dict) else dict(zip(names, r, strict=True)) for r in rows]


def _one(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def seed(db: Database, conn: psycopg.Connection[Any]) -> Seeded:
    """Write the layout described in the module docstring; ``conn`` is an autocommit
    authenticator connection to ``db``. Returns the ids written."""
    s = Seeded()
    with acting_as(conn, "adam"):
        for ws in ("acme", "globex"):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'wiki')")
        conn.execute("SELECT pyretrieve.create_project('globex', 'docs')")
        conn.execute("SELECT pyretrieve.register_model(%s, 3)", (MODEL,))
        g = s.grants
        g["alice"] = grant(
            conn, role("alice"), "acme", "docs", PURPOSE, "confidential", max_age="30 days"
        )
        g["bob"] = grant(conn, role("bob"), "acme", "docs", PURPOSE, "internal")
        g["group"] = grant(conn, "pyretrieve_reader", "acme", "wiki", PURPOSE, "public")
        g["wally"] = grant(conn, role("wally"), "acme", "docs", INGEST, "internal")
        g["wally-wiki"] = grant(conn, role("wally"), "acme", "wiki", INGEST, "public")
        g["walt"] = grant(conn, role("walt"), "acme", "docs", INGEST, "restricted")
        g["walt-globex"] = grant(conn, role("walt"), "globex", "docs", INGEST, "restricted")

    ids = s.acme
    with acting_as(conn, "walt"):
        for case in CASES:
            if case == "successor":
                continue
            _, classification, _ = CASES[case]
            observed = expires = None
            if case == "expired":
                observed, expires = "now() - interval '2 days'", "now() - interval '1 day'"
            elif case == "future":
                observed = "now() + interval '1 day'"
            elif case == "old":
                observed = "now() - interval '60 days'"
            elif case != "superseded":
                observed = "now() - interval '1 hour'"
            ids[case] = put(
                conn, "acme", "docs", body_for(case), classification,
                observed=observed, expires=expires,
            )  # fmt: skip
    # One write scope per transaction: globex gets its own.
    with acting_as(conn, "walt"):
        for n in range(1, GLOBEX_COUNT + 1):
            sentinel = f"{SENTINEL_PREFIX}{n}"
            word = CASES[list(CASES)[(n - 1) % len(CASES)]][0]
            body = f"{sentinel} {SHARED_WORD} {word} apricot public internal"
            fid = put(conn, "globex", "docs", body, "public")
            embed(conn, "globex", "docs", fid, PROBE, body)
            s.globex.append(fid)
            s.sentinels.append(sentinel)

    ids["successor"] = supersede(
        db, conn, "walt", "acme", "docs", ids["superseded"], body_for("successor")
    )
    retract(db, conn, "walt", "acme", "docs", ids["retracted"])

    with acting_as(conn, "walt"):
        for n, case in enumerate(CASES):
            # Hidden rows sit on the probe; visible ones at growing angles from it.
            values = PROBE if case in HIDDEN_CASES else (1.0, 0.1 * (n + 1), 0.0)
            embed(conn, "acme", "docs", ids[case], values, body_for(case))

    with acting_as(conn, "wally"):
        for word in ("quince", "rosemary"):
            body = f"acme wiki {SHARED_WORD} page {word}"
            s.wiki.append(put(conn, "acme", "wiki", body, "public"))
    # As the Ingestor leaves a scope after a run: its small lists compacted into pages (every
    # lexeme here has fewer than 128 postings), so the walls are tested on pages too.
    with acting_as(conn, "walt"):
        for ws in ("acme", "globex"):
            conn.execute("SELECT * FROM pyretrieve.compact_lexical_index(%s, 'docs')", (ws,))
    with acting_as(conn, "wally"):
        conn.execute("SELECT * FROM pyretrieve.compact_lexical_index('acme', 'wiki')")
    return s


def error_fields(exc: psycopg.Error) -> tuple[str | None, ...]:
    """Everything a caller learns from an error: SQLSTATE and every diagnostic text field."""
    d = exc.diag
    return (
        exc.sqlstate,
        d.message_primary,
        d.message_detail,
        d.message_hint,
        d.context,
        d.schema_name,
        d.table_name,
        d.column_name,
        d.constraint_name,
        d.internal_query,
    )


def error_text(exc: psycopg.Error) -> str:
    """str(exc) and every diagnostic field, for leak checks."""
    return "\n".join([str(exc), *(f for f in error_fields(exc) if f)])


@contextlib.contextmanager
def seeded_database(server: Server, template: str) -> Iterator[tuple[Database, Seeded]]:
    """A database of its own with the seed written, for a module of read-mostly tests."""
    db = Database(server=server, name=create_database(server, template))
    try:
        with db.connect(autocommit=True) as conn:
            seeded = seed(db, conn)
        yield db, seeded
    finally:
        drop_database(server, db.name)


Step = str | tuple[str, tuple[Any, ...]] | Callable[[], object]


def error_as(conn: psycopg.Connection[Any], nick: str | None, *steps: Step) -> psycopg.Error:
    """Run the steps in one transaction as ``nick`` (None: as the authenticator) and return the
    error they must raise; the transaction is rolled back."""

    def run() -> None:
        with contextlib.ExitStack() as stack:
            stack.enter_context(acting_as(conn, nick) if nick else conn.transaction())
            for step in steps:
                if callable(step):
                    step()
                elif isinstance(step, str):
                    conn.execute(step)
                else:
                    conn.execute(*step)

    with pytest.raises(psycopg.Error) as exc:
        run()
    return exc.value


# The lexical index's invariants, each a query of (workspace, project, what) rows that must
# return nothing: the blocks less the tombstones hold exactly the postings of the active
# fragments, and every block's summary is exact or, for the time range, a bound.
# Every entry of the lexical index as stored, tombstoned or not: the blocks' and each lexeme's
# slice of the pages.
RAW_LEXICAL_ENTRIES = """
    SELECT b.workspace_id, b.project_id, b.lexeme, b.classification, u.entry
      FROM pyretrieve.lexical_blocks b CROSS JOIN LATERAL unnest(b.entries) AS u(entry)
    UNION ALL
    SELECT p.workspace_id, p.project_id, t.lexeme, p.classification, p.entries[i] AS entry
      FROM pyretrieve.lexical_pages p
     CROSS JOIN LATERAL unnest(p.lexemes, p.starts) WITH ORDINALITY AS t(lexeme, start, n)
     CROSS JOIN LATERAL generate_series(t.start, coalesce(p.starts[t.n + 1] - 1, p.postings)) AS i
"""


def _time_range_check(table: str, key: str) -> str:
    """Rows of a block or page table (as b) whose classification or time range does not bound
    each of its fragments."""
    return f"""
        SELECT b.workspace_id, b.project_id, {key}
          FROM pyretrieve.{table} b
          JOIN pyretrieve.fragments f
            ON f.workspace_id = b.workspace_id AND f.project_id = b.project_id
           AND f.docno IN (SELECT (e >> 32)::integer FROM unnest(b.entries) e)
         WHERE f.classification <> b.classification
            OR f.observed_at NOT BETWEEN b.min_observed_at AND b.max_observed_at
            OR (f.expires_at IS NULL AND b.max_expires_at IS NOT NULL)
            OR (f.expires_at IS NOT NULL AND (f.expires_at < b.min_expires_at
                                              OR b.min_expires_at IS NULL
                                              OR f.expires_at > b.max_expires_at))"""


LEXICAL_INDEX_CHECKS = {
    "a posting that is not its fragment's (or of a fragment not active)": """
        SELECT p.workspace_id, p.project_id, p.lexeme, p.docno, p.tf, p.doc_length,
               p.classification
          FROM pyretrieve.lexical_postings p
        EXCEPT
        SELECT f.workspace_id, f.project_id, u.lexeme, f.docno,
               least(greatest(cardinality(u.positions), 1), 256), f.doc_length, f.classification
          FROM pyretrieve.fragments f CROSS JOIN LATERAL unnest(f.tsv) u
         WHERE f.state = 'active'""",
    "an active fragment's posting missing": """
        SELECT f.workspace_id, f.project_id, u.lexeme, f.docno
          FROM pyretrieve.fragments f CROSS JOIN LATERAL unnest(f.tsv) u
         WHERE f.state = 'active'
        EXCEPT
        SELECT p.workspace_id, p.project_id, p.lexeme, p.docno FROM pyretrieve.lexical_postings p""",
    "a posting twice": f"""
        WITH raw AS ({RAW_LEXICAL_ENTRIES})
        SELECT r.workspace_id, r.project_id, r.lexeme, (r.entry >> 32)::integer
          FROM raw r
         GROUP BY 1, 2, 3, 4 HAVING count(*) > 1""",
    "a tombstone of an active fragment, or of no posting": f"""
        WITH raw AS ({RAW_LEXICAL_ENTRIES})
        SELECT x.workspace_id, x.project_id, x.lexeme, x.docno
          FROM pyretrieve.lexical_tombstones x
         WHERE NOT EXISTS (SELECT 1 FROM raw r
                            WHERE r.workspace_id = x.workspace_id AND r.project_id = x.project_id
                              AND r.lexeme = x.lexeme AND r.classification = x.classification
                              AND (r.entry >> 32)::integer = x.docno)
            OR NOT EXISTS (SELECT 1 FROM pyretrieve.fragments f
                            WHERE f.workspace_id = x.workspace_id AND f.project_id = x.project_id
                              AND f.docno = x.docno AND f.state <> 'active')""",
    "a page whose layout or summary is wrong": """
        SELECT p.workspace_id, p.project_id, p.bucket, p.page
          FROM pyretrieve.lexical_pages p
         CROSS JOIN LATERAL (
               SELECT min((u.e >> 32)::integer) AS lo, max((u.e >> 32)::integer) AS hi
                 FROM unnest(p.entries) AS u(e)) s
         CROSS JOIN LATERAL (
               SELECT bool_and(l.lexeme COLLATE "C" > coalesce(l.prev, '') COLLATE "C"
                               AND l.start = coalesce(l.prev_end, 0) + 1
                               AND l.stop >= l.start AND l.stop - l.start < 127
                               -- A bucket's page (0 to 255), or its group's (256 + g).
                               AND CASE WHEN p.bucket < 256
                                        THEN pyretrieve.lexeme_bucket(l.lexeme) = p.bucket
                                        ELSE pyretrieve.lexeme_bucket(l.lexeme) >> 4 = p.bucket - 256
                                   END) AS ok,
                      max(l.stop) AS last_stop
                 FROM (SELECT t.lexeme, t.start,
                              coalesce(p.starts[t.n + 1] - 1, p.postings) AS stop,
                              lag(t.lexeme) OVER (ORDER BY t.n) AS prev,
                              lag(coalesce(p.starts[t.n + 1] - 1, p.postings)) OVER (ORDER BY t.n)
                                  AS prev_end
                         FROM unnest(p.lexemes, p.starts) WITH ORDINALITY AS t(lexeme, start, n)) l) k
         CROSS JOIN LATERAL (
               SELECT bool_and((p.entries[i] >> 32) < (p.entries[i + 1] >> 32)) AS ascending
                 FROM unnest(p.starts, p.lexemes) WITH ORDINALITY AS t(start, lexeme, n)
                CROSS JOIN LATERAL generate_series(t.start,
                                                   coalesce(p.starts[t.n + 1] - 1, p.postings) - 1) AS i) a
         WHERE (s.lo, s.hi) IS DISTINCT FROM (p.first_docno, p.last_docno)
            OR (p.first_lexeme, p.last_lexeme)
               IS DISTINCT FROM (p.lexemes[1], p.lexemes[cardinality(p.lexemes)])
            OR NOT k.ok OR k.last_stop <> p.postings
            OR a.ascending IS FALSE""",
    "a page whose time range does not bound its fragments": _time_range_check(
        "lexical_pages", "b.bucket, b.page"
    ),
    "a block whose summary is wrong": """
        SELECT b.workspace_id, b.project_id, b.lexeme, b.first_docno
          FROM pyretrieve.lexical_blocks b
         CROSS JOIN LATERAL (
               SELECT min(u.d) AS lo, max(u.d) AS hi, count(DISTINCT u.d) AS n,
                      max(((u.e >> 24) & 255) + 1) AS tf, min(u.e & 16777215) AS len,
                      bool_and(u.d > coalesce(u.prev, -2147483648)) AS ascending
                 FROM (SELECT d, e, lag(d) OVER (ORDER BY o) AS prev
                         FROM unnest(b.entries) WITH ORDINALITY AS t(e, o)
                        CROSS JOIN LATERAL (SELECT (t.e >> 32)::integer AS d) x) u) s
         WHERE (s.lo, s.hi, s.n, s.tf, s.len) IS DISTINCT FROM
               (b.first_docno, b.last_docno, b.postings::bigint, b.max_tf, b.min_length)
            OR NOT s.ascending""",
    "a block whose time range does not bound its fragments": _time_range_check(
        "lexical_blocks", "b.lexeme, b.first_docno"
    ),
}


def lexical_index_errors(admin: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    """What breaks an invariant of the lexical index (read as the superuser, past RLS)."""
    found = {}
    # Before migration 0022 the index had no pages: the checks read the blocks alone.
    row = admin.execute("SELECT to_regclass('pyretrieve.lexical_pages') IS NOT NULL").fetchone()
    pages = bool(row and next(iter(row.values() if isinstance(row, dict) else row)))
    for what, query in LEXICAL_INDEX_CHECKS.items():
        if not pages:
            if "a page" in what:
                continue
            query = query.replace(RAW_LEXICAL_ENTRIES, RAW_LEXICAL_ENTRIES.split("UNION ALL")[0])
        rows = admin.execute(query).fetchall()
        if rows:
            found[what] = rows[:5]
    return found
