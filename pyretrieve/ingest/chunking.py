"""Splitting text and Markdown files into fragments at paragraph and heading boundaries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["DEFAULT_MAX_CHARS", "Chunk", "split_text"]

DEFAULT_MAX_CHARS = 2000


class Chunk(NamedTuple):
    """A fragment of a text file and the 1-based line it starts on."""

    text: str
    line: int


_HEADING = re.compile(r"#{1,6}(\s|$)")
_FENCE = re.compile(r"(```|~~~)")
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*\s|\n")


def _blocks(text: str, markdown: bool) -> Iterator[tuple[str, int, bool]]:
    """(block, first line, is a heading): paragraphs split at blank lines and headings."""
    lines: list[str] = []
    start = 0
    fence: str | None = None

    def flush() -> Iterator[tuple[str, int, bool]]:
        if lines:
            block = "\n".join(lines).rstrip()
            if block.strip():
                yield block, start, False
            lines.clear()

    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if markdown and fence is not None:
            lines.append(line)
            if stripped.startswith(fence):
                fence = None
            continue
        if markdown and (m := _FENCE.match(stripped)):
            # A fenced code block is one paragraph even when it holds blank lines.
            fence = m.group(1)
            if not lines:
                start = number
            lines.append(line)
            continue
        if not line.strip():
            yield from flush()
            continue
        if markdown and len(line) - len(stripped) < 4 and _HEADING.match(stripped):
            yield from flush()
            yield line.rstrip(), number, True
            continue
        if not lines:
            start = number
        lines.append(line)
    yield from flush()


def _cut(text: str, max_chars: int) -> int:
    """Where to end a piece of ``text`` no longer than ``max_chars``: at a sentence end if one
    falls in the second half of the window, else at the last whitespace."""
    window = text[: max_chars + 1]
    best = -1
    for m in _SENTENCE_END.finditer(window):
        if m.end() - 1 <= max_chars:
            best = m.end()
    if best > max_chars // 2:
        return min(best, max_chars)
    space = max(window.rfind(" "), window.rfind("\n"), window.rfind("\t"))
    if space > 0:
        return space
    # One "word" longer than the bound (a URL, a hash, base64): the only place left is inside it.
    return max_chars


def _split_long(block: str, line: int, max_chars: int) -> Iterator[Chunk]:
    rest = block
    offset = 0
    while rest:
        if len(rest) <= max_chars:
            yield Chunk(rest, line + block.count("\n", 0, offset))
            return
        end = _cut(rest, max_chars)
        piece = rest[:end].rstrip()
        if piece:
            yield Chunk(piece, line + block.count("\n", 0, offset))
        skipped = len(rest[end:]) - len(rest[end:].lstrip())
        offset += end + skipped
        rest = rest[end:].lstrip()


def split_text(
    text: str, *, max_chars: int = DEFAULT_MAX_CHARS, markdown: bool = False
) -> list[Chunk]:
    """Split a document into fragments of at most ``max_chars`` characters.

    Paragraphs (blank-line separated) are packed together while they fit; in Markdown every
    heading starts a new fragment, which holds the heading and the text after it (never a
    heading alone: when the next paragraph does not fit beside it, the paragraph is cut to
    the room left), and fenced code blocks stay whole when they fit. A paragraph longer than
    the bound is cut at a sentence end or else at whitespace, never inside a word unless the
    word alone is longer than the bound.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    chunks: list[Chunk] = []
    current: list[str] = []
    current_line = 0
    size = 0
    only_headings = False  # current holds headings and no text yet

    def flush() -> None:
        nonlocal current, size, only_headings
        if current:
            chunks.append(Chunk("\n\n".join(current), current_line))
        current = []
        size = 0
        only_headings = False

    for block, line, heading in _blocks(text, markdown):
        if heading and not only_headings:
            flush()
        added = len(block) + (2 if current else 0)
        if current and size + added > max_chars and only_headings and not heading:
            # Keep the headings with the start of this paragraph: cut it to the room left.
            room = max_chars - size - 2
            end = _cut(block, room) if room > 0 else 0
            piece = block[:end].rstrip()
            if piece:
                current.append(piece)
                rest = block[end:].lstrip()
                line += block.count("\n", 0, len(block) - len(rest))
                block = rest
            flush()
            if not block:
                continue
            added = len(block)
        elif current and size + added > max_chars:
            flush()
            added = len(block)
        if len(block) > max_chars:
            pieces = list(_split_long(block, line, max_chars))
            chunks.extend(pieces[:-1])
            block, line = pieces[-1]
            added = len(block)
        if not current:
            current_line = line
            only_headings = heading
        elif not heading:
            only_headings = False
        current.append(block)
        size += added
    if only_headings and chunks and len(chunks[-1].text) + 2 + size <= max_chars:
        # Trailing headings with no text after them: they end the previous fragment.
        last = chunks.pop()
        current.insert(0, last.text)
        current_line = last.line
    flush()
    return chunks
