"""docs/errors.md documents every stable error code, and only codes that exist.

Every concrete error class (a ``PyretrieveError`` subclass with a code of its own, in
``pyretrieve.errors`` and the modules that add one) must have a ``## CODE`` section naming its
class and the SQLSTATEs ``pyretrieve.db.errors.translate`` maps to it; every section must name
a code that some class carries.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyretrieve.errors as errors_module
from pyretrieve.audit import NotInstalled
from pyretrieve.db.errors import schema_errors, standard_errors
from pyretrieve.errors import PyretrieveError

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
SECTION = re.compile(r"^## (VES_MEMORY_[A-Z_]+)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)


def _sections() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    found = SECTION.findall(text)
    sections = dict(found)
    assert len(sections) == len(found), "a code is documented twice"
    return sections


def _error_classes() -> list[type[PyretrieveError]]:
    classes = [
        obj
        for name in errors_module.__all__
        if isinstance(obj := getattr(errors_module, name), type)
        and issubclass(obj, PyretrieveError)
    ]
    return [*classes, NotInstalled]


def test_every_error_code_is_documented_with_its_class_and_sqlstates() -> None:
    sections = _sections()
    sqlstates: dict[type[PyretrieveError], set[str]] = {}
    for state, cls in {**schema_errors(), **standard_errors()}.items():
        sqlstates.setdefault(cls, set()).add(state)
    for cls in _error_classes():
        assert cls.code in sections, f"{cls.__name__} ({cls.code}) is not in docs/errors.md"
        body = sections[cls.code]
        if cls is not PyretrieveError:
            named = re.search(rf"`(?:[\w.]+\.)?{cls.__name__}`", body)
            assert named, f"{cls.code}: the section does not name {cls.__name__}"
        for state in sqlstates.get(cls, set()):
            # A two-character entry is a SQLSTATE class ("class `08`").
            assert f"`{state}`" in body, f"{cls.code}: SQLSTATE {state} is not documented"
        for field in ("- Class:", "- SQLSTATE:", "- Meaning:", "- What to do:"):
            assert field in body, f"{cls.code}: no {field!r} line"


def test_every_documented_code_exists() -> None:
    codes = {cls.code for cls in _error_classes()}
    assert set(_sections()) - codes == set()


def test_every_documented_sqlstate_is_translated_to_that_code() -> None:
    mapped = {**schema_errors(), **standard_errors()}
    for code, body in _sections().items():
        for state in re.findall(r"`(PR\d{3}|[0-9A-Z]{5})`", body):
            assert state in mapped, f"{code}: {state} is documented but not translated"
            assert mapped[state].code == code, f"{code}: {state} becomes {mapped[state].code}"
