"""The README runs: every shell, SQL and Python snippet of it is executed here as written.

The quickstart's third block (from nothing to searching a folder) runs line by line on a fresh
embedded server with its own ``PYRETRIEVE_HOME``, from the repository root; the SQL and
Python snippets then run against that server. The two snippets that create a virtual
environment and install the package run only with ``PYRETRIEVE_TEST_INSTALL=1`` (they take
minutes and reach the package index), and the one that runs this very test suite is the
suite itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pyretrieve import embedded
from tests.test_cli import home  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

_FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)

VENV_DEMO = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/pyretrieve demo"
VENV_TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
)


def snippets(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [
        textwrap.dedent(m.group(3)).strip() for m in _FENCE.finditer(text) if m.group(2) == lang
    ]


def shell_lines(block: str) -> list[str]:
    return [
        line.split("  #")[0].strip()
        for line in block.splitlines()
        if line.strip() and not line.startswith("#")
    ]


def quickstart() -> str:
    return next(b for b in snippets("sh") if b.startswith("pyretrieve install"))


def plots_block() -> str:
    return next(b for b in snippets("sh") if "--render" in b)


def env_for(home_dir: Path) -> dict[str, str]:
    env = {**os.environ, "PYRETRIEVE_HOME": str(home_dir)}
    env.pop("PYRETRIEVE_DSN", None)
    # This checkout's code, and this environment's console script and python.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def sh(line: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_snippet_is_one_this_file_runs() -> None:
    """No snippet slips in unexecuted: the shell blocks are the four known ones (the synopsis
    of the commands is ``text``, not a snippet), and one SQL and one Python block."""
    blocks = snippets("sh")
    assert sorted(blocks) == sorted([VENV_DEMO, VENV_TESTS, quickstart(), plots_block()])
    assert len(snippets("sql")) == 1
    # The retrieval example runs here; the agent example, tests/db/test_tools_readme.py.
    python = snippets("python")
    assert len(python) == 2
    assert sum("discover_tools" in p for p in python) == 1
    assert len(snippets("bash")) == 0
    assert len(snippets("shell")) == 0


def test_the_quickstart_searches_a_folder_and_the_snippets_run(home: Path) -> None:  # noqa: F811
    env = env_for(home)
    lines = shell_lines(quickstart())
    # Five commands, one actor each: the installer, the admin twice, the writer, the reader.
    assert len(lines) == 5
    assert [line.split()[1] for line in lines] == [
        "install", "workspaces", "grant", "ingest", "search",
    ]  # fmt: skip
    assert [line.rpartition("--as ")[2].split()[0] if "--as " in line else None
            for line in lines] == [None, "ops", "ops", "ingest", "me"]  # fmt: skip
    seconds: list[float] = []
    outputs: list[str] = []
    for line in lines:
        started = time.perf_counter()
        done = sh(line, env)
        seconds.append(time.perf_counter() - started)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr
        outputs.append(done.stdout)
    print("quickstart seconds per step:", [round(s, 1) for s in seconds])

    assert "pyretrieve schema installed: none -> " in outputs[0]
    assert "principal ops (pyretrieve_admin)" in outputs[0]
    assert "principal ingest (pyretrieve_writer)" in outputs[0]
    assert "principal me (pyretrieve_reader)" in outputs[0]
    assert "model all-MiniLM-L6-v2-int8 (384-d)" in outputs[1]
    assert "granted ingest notes/docs for reading up to internal" in outputs[2]
    assert "granted me notes/docs for reading up to internal" in outputs[2]
    docs = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert "as source docs" in outputs[3]
    assert "skipped 0" in outputs[3]
    search = outputs[4]
    assert "explanation of the top result" in search
    assert "semantic: used" in search
    assert "docs/" in search
    assert '"provenance"' in search

    # The index holds the folder's documents under the source "docs".
    app = embedded.app_url(embedded.start(home))
    with psycopg.connect(app, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL ROLE ingest")
        # Bound first, as the Ingestor does: a STABLE look-up that binds the scope itself
        # does not see its own binding.
        conn.execute("SELECT pyretrieve.bind_write_scope('notes', 'docs')")
        rows = conn.execute(
            "SELECT source_uri FROM pyretrieve.active_sources_like('notes', 'docs', %s)",
            (["docs/%"],),
        ).fetchall()
    documents = {str(r[0]).rpartition("#")[0] for r in rows}
    assert documents == {f"docs/{name}" for name in docs}

    # The SQL snippet, as an admin, for a principal created the same way.
    assert sh("pyretrieve principals create alice --reader", env).returncode == 0
    (statement,) = snippets("sql")
    with psycopg.connect(app, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier("ops")))
        conn.execute(statement.encode())

    # The Python snippet, in a fresh interpreter, names nothing it does not define.
    (program,) = [p for p in snippets("python") if "discover_tools" not in p]
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    *_, status, canonical = done.stdout.strip().splitlines()
    assert status == "used None"
    result = json.loads(canonical)
    assert result["results"] == []
    assert result["decision"]["purpose"] == "support"


def test_the_first_hour_eval_times_this_very_block() -> None:
    """evals/firsthour.py runs the quickstart from a fresh pip install: the same lines."""
    from evals.firsthour import quickstart as timed

    assert timed() == shell_lines(quickstart())


def test_the_plot_snippets_redraw_the_committed_pages(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the evals extra is not installed")
    pytest.importorskip("ir_measures", reason="the evals extra is not installed")
    for folder in ("evals", "docs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    env = env_for(tmp_path / "home")
    # The copied evals first; pyretrieve from this tree (the report names its default model),
    # not whichever checkout the environment has installed.
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    for line in shell_lines(plots_block()):
        done = sh(line, env, cwd=tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    for page in ("performance.md", "quality.md"):
        assert (tmp_path / "docs" / page).read_text(encoding="utf-8") == (
            ROOT / "docs" / page
        ).read_text(encoding="utf-8")


@pytest.mark.skipif(
    os.environ.get("PYRETRIEVE_TEST_INSTALL") != "1",
    reason="creates a virtual environment and installs from the package index:"
    " PYRETRIEVE_TEST_INSTALL=1",
)
def test_the_install_snippet_runs_the_demo(tmp_path: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    checkout = tmp_path / "checkout"
    for name in listed:
        target = checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    env = {**os.environ, "PYRETRIEVE_HOME": str(tmp_path / "home")}
    env.pop("PYRETRIEVE_DSN", None)
    env.pop("PYTHONPATH", None)
    try:
        started = time.perf_counter()
        done = sh(VENV_DEMO, env, cwd=checkout)
        print(f"install and demo: {time.perf_counter() - started:.0f} s")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "sees" in done.stdout
    finally:
        embedded.stop(tmp_path / "home")
