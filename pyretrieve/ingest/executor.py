"""The database side of ingestion: how a planned batch reaches the SQL API.

Two writers carry out the same :class:`~pyretrieve.ingest.plan.BatchPlan`:

* :class:`RowWriter`, one function call per record (``put_fragment`` /
  ``supersede_fragment`` / ``put_embedding``), the reference the bulk path is compared with;
* :class:`BulkWriter`, the default: the batch's rows are copied (``COPY``) into a temporary
  staging table the writer creates in its own transaction, and one set-based call
  (``pyretrieve.ingest_batch``) writes them. The staging table is the caller's: the function
  receives its rows as one array value built in the caller's own context, and never reads a
  table of the caller's by name.

Both run inside the caller's transaction (one per batch), with the write scope bound; an
error leaves the batch wholly absent. Both embed :data:`EMBED_CHUNK` texts per embedder call
and send each chunk to the server before embedding the next (the row path stores it with
``put_embedding``, the bulk path copies it into the staging table), so the transaction is
never idle for longer than one chunk takes to embed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import Cursor
from psycopg.rows import TupleRow
from psycopg.types import TypeInfo

from pyretrieve.db import queries
from pyretrieve.embedders import Embedder
from pyretrieve.errors import (
    AccessDenied,
    IntegrityViolation,
    InternalError,
    InvalidEmbedding,
    PyretrieveError,
)
from pyretrieve.ingest.plan import (
    BatchPlan,
    Existing,
    Outcome,
    Step,
    like_prefix,
    select_surplus,
)
from pyretrieve.ingest.records import body_digest
from pyretrieve.vectors import canonical_embedding

__all__ = [
    "EMBED_CHUNK",
    "BatchWriter",
    "BulkWriter",
    "RowWriter",
    "embed_bodies",
    "retract",
    "retract_surplus",
]

Vector = NDArray[np.float32]
_T = TypeVar("_T")

# Texts embedded per embedder call inside a batch's transaction. Each chunk's vectors reach the
# server before the next chunk is embedded, so the session is never idle in its transaction for
# longer than one chunk takes: a whole batch of 256 texts with a slow model on a busy machine
# (all-MiniLM-L6-v2 at 4 texts/s) would stay idle past the 60 s idle-in-transaction timeout
# that bind_write_scope sets, and fail.
EMBED_CHUNK = 32


class BatchWriter(Protocol):
    """How one planned batch is looked up and written, inside the caller's transaction."""

    def lookup(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        uris: Sequence[str],
        model: str | None,
    ) -> list[Existing]:
        """The active fragments under ``uris`` (with embedding state for ``model`` if the
        writer can report it)."""
        ...

    def apply(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        plan: BatchPlan,
        embedder: Embedder | None,
    ) -> list[Outcome]:
        """Write the plan's steps; one outcome per written step that has a fragment."""
        ...

    def store_embeddings(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        embedder: Embedder,
        items: Sequence[tuple[UUID, str]],
    ) -> int:
        """Embed (fragment id, body) items and store the vectors; returns how many."""
        ...


def embed_bodies(embedder: Embedder, bodies: Sequence[str]) -> list[Vector]:
    """The embedder's vectors for ``bodies``, checked and in canonical float32 form."""
    if not bodies:
        return []
    try:
        raw = embedder.embed_documents(list(bodies))
    except PyretrieveError:
        raise
    except Exception as exc:
        # The embedder is outside our control and its message may quote the text.
        raise InternalError(
            f"embedder {embedder.model_id!r} failed ({type(exc).__name__})"
        ) from None
    if len(raw) != len(bodies):
        raise InvalidEmbedding("the embedder returned a different number of vectors")
    vectors: list[Vector] = []
    for values in raw:
        vector = canonical_embedding(values)
        if vector.shape[0] != embedder.dimension:
            raise InvalidEmbedding("the embedder returned a vector of the wrong dimension")
        vectors.append(vector)
    return vectors


class _Vectors:
    """pgvector's binary adapters, registered on one cursor at a time: the caller's
    connection keeps its own adapters."""

    def __init__(self) -> None:
        self.info: TypeInfo | None = None

    def use(self, cur: Cursor[TupleRow]) -> TypeInfo:
        from pgvector.psycopg.vector import register_vector_info

        if self.info is None:
            self.info = TypeInfo.fetch(cur.connection, "public.vector")
        if self.info is None:
            raise InternalError("the vector type is missing from the database")
        register_vector_info(cast(Any, cur), self.info)
        return self.info


def retract(cur: Cursor[TupleRow], workspace: str, project: str, ids: Sequence[UUID]) -> None:
    """Retract active fragments by id (each must be visible to the write scope)."""
    if ids:
        cur.execute(queries.INGEST_RETRACT, (workspace, project, list(ids)))


def retract_surplus(cur: Cursor[TupleRow], workspace: str, project: str, plan: BatchPlan) -> int:
    """Retract the positions of shrunk text files above their new count."""
    if not plan.probes:
        return 0
    limits = dict(plan.probes.values())
    found = cur.execute(
        queries.INGEST_ACTIVE_LIKE, (workspace, project, [like_prefix(p) for p in limits])
    ).fetchall()
    surplus = select_surplus(((fid, str(uri)) for fid, uri in found), limits)
    retract(cur, workspace, project, surplus)
    return len(surplus)


# ---------------------------------------------------------------------------------------------
# One call per record
# ---------------------------------------------------------------------------------------------


class RowWriter:
    """One SQL API call per record and per embedding: the reference path."""

    def __init__(self) -> None:
        self._vectors = _Vectors()

    def lookup(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        uris: Sequence[str],
        model: str | None,
    ) -> list[Existing]:
        rows = cur.execute(queries.INGEST_ACTIVE_SOURCES, (workspace, project, list(uris)))
        return [
            Existing(
                source_uri=str(uri),
                fragment_id=fid,
                content_digest=bytes(digest),
                classification=str(cls),
            )
            for uri, fid, digest, cls in rows.fetchall()
        ]

    def apply(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        plan: BatchPlan,
        embedder: Embedder | None,
    ) -> list[Outcome]:
        ids: dict[int, UUID] = {}
        rows: list[tuple[int, UUID | None, Step]] = []
        for step in plan.steps:
            if step.keep is not None:
                ids[step.index] = step.keep
            if step.action == "insert":
                rows.append((step.index, None, step))
            else:
                # Superseding by the same content returns the kept fragment.
                rows.extend((step.index, old, step) for old in step.replaces)
        if rows:
            for index, fid in cur.execute(
                queries.INGEST_WRITE_ROWS, _row_params(workspace, project, rows)
            ).fetchall():
                ids[int(index)] = fid
        inserts = [s.index for s in plan.steps if s.action == "insert"]
        created: set[UUID] = set()
        if inserts:
            rows_created = cur.execute(
                queries.INGEST_CREATED_NOW, (workspace, project, [ids[i] for i in inserts])
            ).fetchall()
            created = {fid for (fid,) in rows_created}
        embedded: set[UUID] = set()
        if embedder is not None:
            embedded = self._embed_needed(cur, workspace, project, plan, ids, embedder)
        outcomes = []
        marked: set[UUID] = set()
        for step in plan.steps:
            fid = ids.get(step.index)
            if fid is None:
                continue
            outcomes.append(
                Outcome(
                    index=step.index,
                    fragment_id=fid,
                    created=fid in created,
                    embedded=fid in embedded and fid not in marked,
                )
            )
            if fid in embedded:
                marked.add(fid)
        return outcomes

    def _embed_needed(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        plan: BatchPlan,
        ids: dict[int, UUID],
        embedder: Embedder,
    ) -> set[UUID]:
        bodies: dict[UUID, str] = {}
        for step in plan.steps:
            bodies.setdefault(ids[step.index], step.record.body)
        targets = cur.execute(
            queries.INGEST_EMBEDDINGS_NEEDED,
            (workspace, project, embedder.model_id, list(bodies)),
        ).fetchall()
        items = []
        for fid, digest, _missing in targets:
            if bytes(digest) != body_digest(bodies[fid]):
                raise IntegrityViolation("digest_mismatch", fragment_id=fid)
            items.append((fid, bodies[fid]))
        self.store_embeddings(cur, workspace, project, embedder, items)
        return {fid for fid, _ in items}

    def store_embeddings(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        embedder: Embedder,
        items: Sequence[tuple[UUID, str]],
    ) -> int:
        if not items:
            return 0
        self._vectors.use(cur)
        for start in range(0, len(items), EMBED_CHUNK):
            chunk = items[start : start + EMBED_CHUNK]
            vectors = embed_bodies(embedder, [body for _, body in chunk])
            cur.execute(
                queries.INGEST_PUT_EMBEDDINGS,
                (
                    workspace,
                    project,
                    embedder.model_id,
                    [fid for fid, _ in chunk],
                    vectors,
                    [body_digest(body) for _, body in chunk],
                ),
            )
        return len(items)


def _row_params(
    workspace: str, project: str, rows: Sequence[tuple[int, UUID | None, Step]]
) -> dict[str, Any]:
    records = [step.record for _, _, step in rows]
    return {
        "ws": workspace,
        "pj": project,
        "i": [i for i, _, _ in rows],
        "old": [old for _, old, _ in rows],
        "body": [r.body for r in records],
        "cls": [r.classification for r in records],
        "obs": [r.observed_at for r in records],
        "exp": [r.expires_at for r in records],
        "uri": [r.source_uri for r in records],
        "rev": [r.source_revision for r in records],
        "man": [r.manifest_id for r in records],
    }


# ---------------------------------------------------------------------------------------------
# COPY into a staging table, one set-based call per batch
# ---------------------------------------------------------------------------------------------

# The writer's own staging table: created in its transaction (so it is the writer's, whatever
# principal the pooled session served before) and dropped at commit.
_STAGING_COLUMNS = (
    ("ord", "integer"),
    ("source_uri", "text"),
    ("body", "text"),
    ("classification", "text"),
    ("observed_at", "timestamptz"),
    ("expires_at", "timestamptz"),
    ("source_revision", "text"),
    ("manifest_id", "text"),
    ("replaces", "uuid[]"),
    ("keep", "uuid"),
    ("embedding", "public.vector"),
)


class BulkWriter:
    """COPY of each batch into a temporary staging table, then ``pyretrieve.ingest_batch``."""

    def __init__(self) -> None:
        self._vectors = _Vectors()

    def lookup(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        uris: Sequence[str],
        model: str | None,
    ) -> list[Existing]:
        rows = cur.execute(queries.INGEST_STATE, (workspace, project, list(uris), model))
        return [
            Existing(
                source_uri=str(uri),
                fragment_id=fid,
                content_digest=bytes(digest),
                classification=str(cls),
                embedding_current=current,
            )
            for uri, fid, digest, cls, current in rows.fetchall()
        ]

    def apply(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        plan: BatchPlan,
        embedder: Embedder | None,
    ) -> list[Outcome]:
        steps = plan.writes
        if not steps:
            return []
        wanted = [] if embedder is None else [s for s in steps if s.embed]
        embedding = {s.index for s in wanted}
        info = self._stage(cur)
        self._copy(cur, info, [_staging_row(s, None) for s in steps if s.index not in embedding])
        if embedder is not None:
            self._copy_embedded(cur, info, embedder, wanted, _staging_row, _step_body)
        return self._write(cur, workspace, project, embedder)

    def store_embeddings(
        self,
        cur: Cursor[TupleRow],
        workspace: str,
        project: str,
        embedder: Embedder,
        items: Sequence[tuple[UUID, str]],
    ) -> int:
        if not items:
            return 0
        info = self._stage(cur)
        numbered = list(enumerate(items))
        self._copy_embedded(
            cur,
            info,
            embedder,
            numbered,
            # A kept fragment's row: only its id and the new embedding.
            lambda item, v: (
                item[0],
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                item[1][0],
                v,
            ),
            lambda item: item[1][1],
        )
        return sum(o.embedded for o in self._write(cur, workspace, project, embedder))

    def _stage(self, cur: Cursor[TupleRow]) -> TypeInfo:
        """Create this transaction's staging table; the vector type for the copies."""
        info = self._vectors.use(cur)
        try:
            cur.execute(queries.INGEST_STAGING_CREATE)
        except psycopg.errors.InsufficientPrivilege:
            raise AccessDenied(
                "bulk ingestion stages each batch in a temporary table of the writer's own and"
                " needs the TEMPORARY privilege on the database (or use write_path='rows')"
            ) from None
        return info

    @staticmethod
    def _copy(cur: Cursor[TupleRow], info: TypeInfo, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        types: list[int | str] = [t for _, t in _STAGING_COLUMNS[:-1]]
        types.append(info.oid)
        with cur.copy(queries.INGEST_STAGING_COPY) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)

    def _copy_embedded(
        self,
        cur: Cursor[TupleRow],
        info: TypeInfo,
        embedder: Embedder,
        items: Sequence[_T],
        row: Callable[[_T, Vector], tuple[Any, ...]],
        body: Callable[[_T], str],
    ) -> None:
        # Chunk by chunk, each copied into the staging table before the next is embedded: the
        # transaction waits on the embedder for one chunk at a time, never for the batch.
        for start in range(0, len(items), EMBED_CHUNK):
            chunk = items[start : start + EMBED_CHUNK]
            vectors = embed_bodies(embedder, [body(item) for item in chunk])
            self._copy(cur, info, [row(i, v) for i, v in zip(chunk, vectors, strict=True)])

    @staticmethod
    def _write(
        cur: Cursor[TupleRow], workspace: str, project: str, embedder: Embedder | None
    ) -> list[Outcome]:
        """The one set-based call that writes everything staged in this transaction."""
        model = None if embedder is None else embedder.model_id
        result = cur.execute(queries.INGEST_BATCH, (workspace, project, model)).fetchall()
        return [
            Outcome(index=int(i), fragment_id=fid, created=bool(created), embedded=bool(done))
            for i, fid, created, done in result
        ]


def _step_body(step: Step) -> str:
    return step.record.body


def _staging_row(step: Step, vector: Vector | None) -> tuple[Any, ...]:
    record = step.record
    if step.keep is not None:
        # A kept fragment carries no content: only what it supersedes and its embedding.
        return (
            step.index,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            list(step.replaces),
            step.keep,
            vector,
        )
    return (
        step.index,
        record.source_uri,
        record.body,
        record.classification,
        record.observed_at,
        record.expires_at,
        record.source_revision,
        record.manifest_id,
        list(step.replaces),
        None,
        vector,
    )
