"""Inputs: what a path to ingest holds (a JSONL file, a BEIR folder, a folder of text and
Markdown files) read as a stream of records and issues, and the checks across records."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pyretrieve.errors import InvalidInput
from pyretrieve.ingest.chunking import split_text
from pyretrieve.ingest.records import (
    CLASSIFICATIONS,
    MAX_SOURCE_URI,
    Invalid,
    Record,
    check_text,
    jsonl_records,
    open_lines,
)
from pyretrieve.ingest.reports import IngestIssue

__all__ = ["TEXT_SUFFIXES", "Source", "checked", "open_source"]

TEXT_SUFFIXES = (".txt", ".md")
# A source name is one path segment: no "/" (the separator of its documents) and no "#".
_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _text_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if not name.startswith(".") and name.lower().endswith(TEXT_SUFFIXES):
                files.append(Path(dirpath) / name)
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    return files


def _text_records(
    root: Path, *, source: str, classification: str, max_chars: int
) -> Iterator[Record | IngestIssue]:
    for path in _text_files(root):
        # The document's identity: stable across runs, unique across folders.
        rel = f"{source}/{path.relative_to(root).as_posix()}"
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except OSError:
            yield IngestIssue(rel, None, "the file could not be read")
            continue
        except UnicodeDecodeError:
            yield IngestIssue(rel, None, "the file is not valid UTF-8")
            continue
        chunks = split_text(text, max_chars=max_chars, markdown=rel.lower().endswith(".md"))
        if not chunks:
            yield IngestIssue(rel, None, "the file has no text")
            continue
        prefix = f"{rel}#"
        if len(prefix) + len(str(len(chunks))) > MAX_SOURCE_URI:
            yield IngestIssue(rel, None, "the path is too long for a source uri")
            continue
        for position, chunk in enumerate(chunks, start=1):
            try:
                body = check_text(chunk.text, "text")
            except Invalid as exc:
                yield IngestIssue(rel, chunk.line, str(exc))
                continue
            yield Record(
                source_uri=f"{prefix}{position}",
                body=body,
                classification=classification,
                file=rel,
                line=chunk.line,
                retract_beyond=(prefix, len(chunks)) if position == len(chunks) else None,
            )


@dataclass(frozen=True, slots=True)
class Source:
    kind: str  # "jsonl" | "beir" | "text"
    records: Callable[[], Iterator[Record | IngestIssue]]
    lines: Callable[[], int | None]  # a cheap upper bound for progress, when one exists
    name: str  # the source: the first part of every source uri it writes
    prefix: str  # what every generated source uri starts with ("name/" or "name#")
    # A folder of text: its files' relative paths, the document names of the old scheme.
    legacy_names: Callable[[], list[str]] | None = None


def _count_lines(path: Path) -> int:
    with open_lines(path) as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _source_name(name: str | None, default: str) -> str:
    chosen = default if name is None else name
    if not isinstance(chosen, str) or not _SOURCE_NAME.fullmatch(chosen):
        raise InvalidInput(
            "a source name is 1 to 128 letters, digits, '_', '.' or '-' (no '/' or '#'),"
            " starting with a letter or digit: pass one with source="
        )
    return chosen


def open_source(path: Path, classification: str, max_chars: int, name: str | None = None) -> Source:
    if path.is_file():
        if not path.name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
            raise InvalidInput("a file to ingest must be JSON Lines (.jsonl or .jsonl.gz)")
        display = path.name
        stem = _source_name(name, display.removesuffix(".gz"))
        return Source(
            "jsonl",
            lambda: jsonl_records(
                path, display=display, uri_prefix=stem, beir=False, classification=classification
            ),
            lambda: _count_lines(path),
            stem,
            f"{stem}#",
        )
    if path.is_dir():
        corpus = next(
            (c for c in (path / "corpus.jsonl", path / "corpus.jsonl.gz") if c.is_file()), None
        )
        if corpus is not None:
            beir_corpus = corpus
            folder = _source_name(name, path.resolve().name)
            return Source(
                "beir",
                lambda: jsonl_records(
                    beir_corpus,
                    display=beir_corpus.name,
                    uri_prefix=folder,
                    beir=True,
                    classification=classification,
                ),
                lambda: _count_lines(beir_corpus),
                folder,
                f"{folder}#",
            )
        source = _source_name(name, path.resolve().name)
        return Source(
            "text",
            lambda: _text_records(
                path, source=source, classification=classification, max_chars=max_chars
            ),
            lambda: None,
            source,
            f"{source}/",
            lambda: [f.relative_to(path).as_posix() for f in _text_files(path)],
        )
    raise InvalidInput("no such file or folder to ingest")


def checked(items: Iterable[Record | IngestIssue], ceiling: str) -> Iterator[Record | IngestIssue]:
    """Cross-record checks: the writer's ceiling and one record per source uri."""
    allowed = CLASSIFICATIONS[: CLASSIFICATIONS.index(ceiling) + 1]
    seen: dict[str, tuple[str, int | None]] = {}
    for item in items:
        if isinstance(item, IngestIssue):
            yield item
            continue
        if item.classification not in allowed:
            yield IngestIssue(item.file, item.line, "classification is above the writer's ceiling")
            continue
        first = seen.get(item.source_uri)
        if first is not None:
            where = first[0] if first[1] is None else f"{first[0]}:{first[1]}"
            yield IngestIssue(item.file, item.line, f"duplicate source id (first at {where})")
            continue
        seen[item.source_uri] = (item.file, item.line)
        yield item
