"""The package and the evals stay typed and linted: mypy --strict and ruff run as part of the
suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy", "--strict", "pyretrieve")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean_on_the_evals() -> None:
    # The evals write the committed figures: a type error there is a wrong figure waiting.
    result = _run("mypy", "--strict", "evals")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_is_clean() -> None:
    result = _run("ruff", "check", "pyretrieve", "tests", "alembic", "evals", "docs")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run("ruff", "format", "--check", "pyretrieve", "tests", "alembic", "evals", "docs")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_python_blocks_of_the_pages_are_formatted() -> None:
    # The README's snippets are executed by tests and copied by readers: formatted like the code.
    pages = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
    result = _run("ruff", "format", "--check", *pages)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(pages)} files already formatted" in result.stdout
