"""What ingestion reports: problems per record, and the counts of a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pyretrieve.errors import InvalidInput

__all__ = [
    "CompactReport",
    "IngestIssue",
    "IngestReport",
    "MalformedInput",
    "Progress",
    "ReembedReport",
    "RetractReport",
    "SourceList",
]

# progress(records done, records in all or None when not known in advance)
Progress = Callable[[int, int | None], None]


class IngestIssue(NamedTuple):
    """A record that was not written: where it is and why (never what it says)."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


class MalformedInput(InvalidInput):
    """Strict mode found malformed records; nothing was written."""

    def __init__(self, issues: Sequence[IngestIssue]) -> None:
        self.issues: tuple[IngestIssue, ...] = tuple(issues)
        first = self.issues[0]
        more = len(self.issues) - 1
        message = f"malformed input, nothing written: {first}"
        if more:
            message += f" (and {more} more)"
        super().__init__(message)


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestReport:
    """What one ``ingest_path`` run did. ``read = inserted + unchanged + superseded + skipped``."""

    path: str
    workspace: str
    project: str
    model: str | None
    read: int
    inserted: int
    unchanged: int
    superseded: int
    retracted: int
    embedded: int
    skipped: int
    errors: tuple[IngestIssue, ...]
    batches: int
    seconds: float
    # The source this run wrote under, and (with sync) the documents it retracted because the
    # input no longer holds them.
    source: str | None = None
    removed: tuple[str, ...] = ()
    # Documents of this folder still active under their names from before source names
    # (``<relative path>``); retracted too (and counted in ``retracted``) with retract_legacy.
    legacy: tuple[str, ...] = ()
    legacy_retracted: bool = False

    @property
    def written(self) -> int:
        return self.inserted + self.superseded


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactReport:
    """What ``Ingestor.compact`` did to a scope's lexical index (the classifications up to the
    writer's ceiling): rows (blocks and pages) read and written, and the postings moved."""

    workspace: str
    project: str
    rows_read: int
    rows_written: int
    postings: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RetractReport:
    """What ``Ingestor.retract`` did: fragments retracted per source uri asked for."""

    workspace: str
    project: str
    retracted: dict[str, int]

    @property
    def fragments(self) -> int:
        return sum(self.retracted.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceList:
    """The documents of one scope that a writer may see (active fragments up to its ceiling):
    each document's name, the source uri up to its last ``#`` (the whole uri when it has
    none), with how many active fragments it has."""

    workspace: str
    project: str
    documents: dict[str, int]

    @property
    def fragments(self) -> int:
        return sum(self.documents.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class ReembedReport:
    """What one ``reembed`` run did: ``embedded = missing + stale``."""

    workspace: str
    project: str
    model: str
    missing: int
    stale: int
    embedded: int
    batches: int
    seconds: float
