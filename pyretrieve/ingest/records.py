"""Source records: what one JSONL line, BEIR document or text-file fragment becomes.

A record is validated once, here, with fixed messages that never quote its content; the
planner and the executors trust its fields.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from pyretrieve import contract
from pyretrieve.ingest.reports import IngestIssue

__all__ = [
    "CLASSIFICATIONS",
    "MAX_BODY_CHARS",
    "MAX_PROVENANCE",
    "MAX_SOURCE_URI",
    "Invalid",
    "Record",
    "body_digest",
    "check_text",
    "jsonl_records",
    "open_lines",
]

CLASSIFICATIONS = contract.CLASSIFICATION_ORDER
MAX_BODY_CHARS = contract.MAX_BODY_CHARS
MAX_SOURCE_URI = contract.MAX_SOURCE_URI_CHARS
MAX_PROVENANCE = contract.MAX_PROVENANCE_CHARS


@dataclass(frozen=True, kw_only=True, slots=True)
class Record:
    """One source record to write: its identity (``source_uri``), body and metadata, and where
    it was read (file, line) for reports. ``digest`` is the sha256 of the body's UTF-8 bytes,
    the database's ``content_digest``."""

    source_uri: str
    body: str
    classification: str
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    source_revision: str | None = None
    manifest_id: str | None = None
    file: str
    line: int | None
    # For a text file's last fragment: retract active fragments "<prefix><n>" with n > count.
    retract_beyond: tuple[str, int] | None = None
    digest: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", body_digest(self.body))


def body_digest(body: str) -> bytes:
    """sha256 of the UTF-8 bytes of a body: what the database stores as ``content_digest``."""
    return hashlib.sha256(body.encode("utf-8")).digest()


class Invalid(Exception):
    """A record-level problem; its message is a fixed text that quotes no content."""


def check_text(value: str, what: str) -> str:
    if "\x00" in value:
        raise Invalid(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


def _optional_str(obj: dict[str, Any], key: str, limit: int) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{key} must be a string")
    if len(value) > limit:
        raise Invalid(f"{key} is longer than {limit} characters")
    return check_text(value, key) or None


def _timestamp(obj: dict[str, Any], key: str) -> datetime | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{key} must be an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{key} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _classification(obj: dict[str, Any], default: str) -> str:
    value = obj.get("classification")
    if value is None:
        return default
    if value not in CLASSIFICATIONS:
        raise Invalid("classification must be one of " + ", ".join(CLASSIFICATIONS))
    return str(value)


def _body(title: str | None, text: str) -> str:
    body = f"{title}\n\n{text}" if title and title.strip() else text
    if not body.strip():
        raise Invalid("empty text")
    if len(body) > MAX_BODY_CHARS:
        raise Invalid(f"text is longer than {MAX_BODY_CHARS} characters")
    return check_text(body, "text")


def _check_times(observed: datetime | None, expires: datetime | None) -> None:
    if expires is None:
        return
    if expires <= (observed or datetime.now(UTC)):
        raise Invalid("expires_at must be after observed_at (or after now)")


@contextmanager
def open_lines(path: Path) -> Iterator[IO[bytes]]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as gz:
            yield cast(IO[bytes], gz)
    else:
        with path.open("rb") as fh:
            yield fh


def jsonl_records(
    path: Path, *, display: str, uri_prefix: str, beir: bool, classification: str
) -> Iterator[Record | IngestIssue]:
    id_key = "_id" if beir else "id"
    try:
        with open_lines(path) as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    yield _jsonl_record(
                        raw,
                        id_key=id_key,
                        beir=beir,
                        uri_prefix=uri_prefix,
                        classification=classification,
                        display=display,
                        number=number,
                    )
                except Invalid as exc:
                    yield IngestIssue(display, number, str(exc))
    except (OSError, EOFError, gzip.BadGzipFile):
        yield IngestIssue(display, None, "the file could not be read to the end")


def _jsonl_record(
    raw: bytes,
    *,
    id_key: str,
    beir: bool,
    uri_prefix: str,
    classification: str,
    display: str,
    number: int,
) -> Record:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise Invalid("line is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise Invalid("line is not a JSON object")
    ident = obj.get(id_key)
    if isinstance(ident, bool) or not isinstance(ident, str | int) or str(ident) == "":
        raise Invalid(f"missing {id_key}")
    text = obj.get("text")
    if not isinstance(text, str):
        raise Invalid("missing text")
    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        raise Invalid("title must be a string")
    body = _body(title, text)
    if beir:
        source_uri = f"{uri_prefix}#{ident}"
        revision = manifest = None
        observed = expires = None
        record_classification = classification
    else:
        source_uri = _optional_str(obj, "source_uri", MAX_SOURCE_URI) or f"{uri_prefix}#{ident}"
        revision = _optional_str(obj, "source_revision", MAX_PROVENANCE)
        manifest = _optional_str(obj, "manifest_id", MAX_PROVENANCE)
        observed = _timestamp(obj, "observed_at")
        expires = _timestamp(obj, "expires_at")
        _check_times(observed, expires)
        record_classification = _classification(obj, classification)
    if len(source_uri) > MAX_SOURCE_URI:
        raise Invalid(f"source uri is longer than {MAX_SOURCE_URI} characters")
    check_text(source_uri, "id")
    return Record(
        source_uri=source_uri,
        body=body,
        classification=record_classification,
        observed_at=observed,
        expires_at=expires,
        source_revision=revision,
        manifest_id=manifest,
        file=display,
        line=number,
    )
