"""Batch planning: what each record of a batch asks of the database.

Pure functions of the input and of what the database reported about the batch's source uris
(their active fragments, with content digest, classification and, for one model, whether the
embedding is current). Nothing here imports the database layer, so every rule of idempotency
and supersession is unit-tested without a server:

* a record whose source has an active fragment with the same digest and classification is
  **unchanged** (any other active fragment of that source is superseded by that one);
* a record whose source has active fragments with other content or classification
  **supersedes** them;
* a record whose source has none is **inserted**;
* a text file's last fragment asks for the file's surplus positions to be **retracted** when a
  fragment at position n + 1 exists (the file got shorter);
* with ``sync``, active fragments under the input's source that the input no longer holds are
  retracted, except documents with a problem in this run;
* a folder's files still active under their names from before source names
  (``<relative path>#<n>``) are **legacy**, retracted on request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from pyretrieve.ingest.records import Record
from pyretrieve.ingest.reports import IngestIssue

__all__ = [
    "Action",
    "BatchPlan",
    "Existing",
    "Outcome",
    "Step",
    "Tally",
    "document_of",
    "documents_removed",
    "legacy_firsts",
    "like_prefix",
    "plan_batch",
    "select_gone",
    "select_legacy",
    "select_surplus",
    "tally",
]

Action = Literal["insert", "supersede", "unchanged"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Existing:
    """An active fragment found under one of the batch's source uris.

    ``embedding_current``: whether its embedding for the batch's model exists and was computed
    from this content after the fragment was written; ``None`` when not asked (no model, or
    a look-up that does not report it).
    """

    source_uri: str
    fragment_id: UUID
    content_digest: bytes
    classification: str
    embedding_current: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """What one record asks for.

    ``replaces``: the active fragments of the record's source that this step supersedes (by
    the new fragment, or for an unchanged record by ``keep``). ``keep``: for an unchanged
    record, the active fragment that stays. ``embed``: whether an embedding must be computed
    for the record's body (a new or changed fragment, or an unchanged one whose embedding is
    missing or stale).
    """

    index: int
    record: Record
    action: Action
    replaces: tuple[UUID, ...] = ()
    keep: UUID | None = None
    embed: bool = False

    @property
    def writes(self) -> bool:
        """Whether the database has anything to do for this step."""
        return self.action != "unchanged" or bool(self.replaces) or self.embed


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchPlan:
    """The steps of one batch in input order, and the surplus probes of its text files.

    ``probes`` maps a source uri ``<document>#<n + 1>`` to (``<document>#``, n) for every text
    file whose last fragment is in the batch: when that uri is active, the file has shrunk and
    its positions above n are retracted.
    """

    steps: tuple[Step, ...]
    probes: Mapping[str, tuple[str, int]]

    @property
    def writes(self) -> tuple[Step, ...]:
        """The steps the database must act on; a batch without any writes nothing."""
        return tuple(s for s in self.steps if s.writes)


def lookup_uris(records: Sequence[Record]) -> list[str]:
    """Every source uri the planner needs to know about: the records' and the probes'."""
    return [r.source_uri for r in records] + list(probes_of(records))


def probes_of(records: Sequence[Record]) -> dict[str, tuple[str, int]]:
    """Position n + 1 of every text file whose last fragment (position n) is in ``records``."""
    probes: dict[str, tuple[str, int]] = {}
    for record in records:
        if record.retract_beyond is not None:
            prefix, count = record.retract_beyond
            probes[f"{prefix}{count + 1}"] = (prefix, count)
    return probes


def plan_batch(
    records: Sequence[Record], existing: Iterable[Existing], *, model: bool = False
) -> BatchPlan:
    """Decide insert, supersede or unchanged for each record, and which files to probe.

    ``existing``: the active fragments under the records' source uris (and the probe uris),
    as the database reported them for this transaction. ``model``: whether the batch writes
    embeddings too (an unchanged record then asks for one when its embedding is not current).
    """
    by_uri: dict[str, list[Existing]] = {}
    for found in existing:
        by_uri.setdefault(found.source_uri, []).append(found)
    steps: list[Step] = []
    for index, record in enumerate(records):
        steps.append(_step(index, record, by_uri.get(record.source_uri, []), model))
    probes = {uri: limit for uri, limit in probes_of(records).items() if uri in by_uri}
    return BatchPlan(steps=tuple(steps), probes=probes)


def _step(index: int, record: Record, olds: Sequence[Existing], model: bool) -> Step:
    same = [
        o
        for o in olds
        if o.content_digest == record.digest and o.classification == record.classification
    ]
    if same:
        kept = same[0]
        return Step(
            index=index,
            record=record,
            action="unchanged",
            replaces=tuple(o.fragment_id for o in olds if o.fragment_id != kept.fragment_id),
            keep=kept.fragment_id,
            embed=model and kept.embedding_current is not True,
        )
    if olds:
        return Step(
            index=index,
            record=record,
            action="supersede",
            replaces=tuple(o.fragment_id for o in olds),
            embed=model,
        )
    return Step(index=index, record=record, action="insert", embed=model)


def select_surplus(found: Iterable[tuple[UUID, str]], limits: Mapping[str, int]) -> list[UUID]:
    """Of the active fragments ``found`` (id, source uri) under shrunk files, those whose
    position is above the file's new count (``limits``: ``<document>#`` -> count)."""
    surplus: list[UUID] = []
    for fragment_id, uri in found:
        prefix, _, position = uri.rpartition("#")
        limit = limits.get(prefix + "#")
        if limit is not None and position.isdigit() and int(position) > limit:
            surplus.append(fragment_id)
    return surplus


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching every string that starts with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def select_gone(
    active: Iterable[tuple[UUID, str]],
    *,
    seen: set[str],
    errors: Sequence[IngestIssue],
    kind: str,
) -> list[tuple[UUID, str]]:
    """For ``sync``: the active fragments under the source that this run's input no longer holds.

    Documents with a problem in this run are kept; for a JSONL or BEIR input (``kind`` other
    than ``"text"``), where a malformed line may be any document, any problem keeps everything.
    """
    if errors and kind != "text":
        return []
    kept = tuple(f"{issue.file}#" for issue in errors)
    return [(fid, uri) for fid, uri in active if uri not in seen and not uri.startswith(kept)]


def documents_removed(gone: Iterable[tuple[UUID, str]], *, kind: str) -> list[str]:
    """What a sync run reports as removed: documents for a text folder, records otherwise."""
    if kind == "text":
        return sorted({uri.rpartition("#")[0] for _, uri in gone})
    return sorted(uri for _, uri in gone)


def document_of(source_uri: str) -> str:
    """The document a fragment belongs to: its source uri up to the last ``#``, or the whole
    uri when it has none (``notes/a.md#2`` -> ``notes/a.md``, ``c.jsonl#doc1`` -> ``c.jsonl``)."""
    document, hash_, _ = source_uri.rpartition("#")
    return document if hash_ else source_uri


def legacy_firsts(names: Iterable[str]) -> list[str]:
    """The first fragment of each old-scheme document (``<relative path>#1``, which every one
    of them had): the exact keys that find a folder's legacy documents."""
    return [f"{name}#1" for name in names]


def select_legacy(
    found: Iterable[tuple[UUID, str]], *, documents: set[str], seen: set[str]
) -> list[UUID]:
    """Of the active fragments ``found`` (id, source uri) under the legacy ``documents``, those
    at a numbered position that this run did not write itself (a nested ``docs/x.md`` of the
    old scheme is the new name of ``x.md`` in a folder named docs)."""
    gone: list[UUID] = []
    for fragment_id, uri in found:
        document, _, position = uri.rpartition("#")
        if document in documents and position.isdigit() and uri not in seen:
            gone.append(fragment_id)
    return gone


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What the database did for one written step: the fragment the record now has, whether
    this transaction created it, and whether an embedding was stored for it."""

    index: int
    fragment_id: UUID
    created: bool
    embedded: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Tally:
    """Counts of one batch: ``inserted + unchanged + superseded`` is the number of records."""

    inserted: int
    unchanged: int
    superseded: int
    embedded: int


def tally(plan: BatchPlan, outcomes: Iterable[Outcome]) -> Tally:
    """Count a batch from its plan and what the database did.

    A record inserted onto content that is already active at the same classification (another
    source, or an earlier record of the batch) is counted unchanged: it wrote no fragment.
    """
    by_index = {o.index: o for o in outcomes}
    inserted = unchanged = superseded = 0
    seen: set[UUID] = set()
    for step in plan.steps:
        if step.action == "unchanged":
            unchanged += 1
        elif step.action == "supersede":
            superseded += 1
        else:
            outcome = by_index.get(step.index)
            if outcome is None:
                raise ValueError(f"no outcome for inserted record {step.index}")
            if outcome.created and outcome.fragment_id not in seen:
                inserted += 1
            else:
                unchanged += 1
            seen.add(outcome.fragment_id)
    embedded = sum(1 for o in by_index.values() if o.embedded)
    return Tally(inserted=inserted, unchanged=unchanged, superseded=superseded, embedded=embedded)
