"""docs/sqlalchemy.md: the Core example runs, and the Alembic section is the sample app.

The Python blocks before the Alembic section run in order against a test database; only the
settings block's three lines (``DATABASE_URL``, ``WRITER``, ``READER``) are replaced. The
Alembic section's ``env.py`` and revision are the files of tests/sample_app, its alembic.ini
is the sample's but for the documented package-resource location, and its shell commands run
against a fresh database with the sample's configuration.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import psycopg

from pyretrieve.errors import AccessDenied
from tests.conftest import (
    HEAD,
    ROOT,
    Database,
    Server,
    acting_as,
    create_database,
    drop_database,
)
from tests.conftest import role as role_of
from tests.db.test_sample_app import SAMPLE, SAMPLE_HEAD, alembic, assert_at_heads, url_of

DOC = ROOT / "docs" / "sqlalchemy.md"
FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```", re.S | re.M)
SETTINGS = ("DATABASE_URL", "WRITER", "READER")


def blocks(part: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the Core part or the Alembic part."""
    text = DOC.read_text(encoding="utf-8")
    core, _, migrations = text.partition("\n## Alembic")
    assert migrations, "docs/sqlalchemy.md has no Alembic section"
    source = core if part == "core" else migrations
    return [(lang, textwrap.dedent(body)) for _, lang, body in FENCE.findall(source)]


def substitute(block: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        block, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", block, flags=re.M)
        assert count == 1, f"the settings block of {DOC.name} has no single {name} line"
    return block


def test_the_core_example_runs(db: Database, conn: psycopg.Connection[Any]) -> None:
    writer, reader = role_of("wally"), role_of("alice")
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (writer,),
        )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'support',"
            " 'confidential')",
            (reader,),
        )
    with db.admin() as admin:
        admin.execute(
            "CREATE TABLE public.notes (id integer PRIMARY KEY, fragment_id uuid NOT NULL,"
            " title text NOT NULL)"
        )
        admin.execute(f'GRANT SELECT, INSERT ON public.notes TO "{writer}"')
        admin.commit()

    python = [body for lang, body in blocks("core") if lang == "python"]
    assert len(python) == 5
    python[0] = substitute(
        python[0], {"DATABASE_URL": url_of(db.app_dsn), "WRITER": writer, "READER": reader}
    )
    namespace: dict[str, Any] = {"__name__": "sqlalchemy_doc"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in python:
            exec(compile(block, str(DOC), "exec"), namespace)
    lines = out.getvalue().splitlines()

    assert lines[0] == "stored True"
    rank, uri, confidence = lines[1].split()
    assert (rank, uri) == ("1", "handbook.md#1")
    assert 0 < float(confidence) <= 1
    assert lines[2].strip() == "Rotate credentials every 90 days from the admin console."
    assert lines[3] == "record handbook.md#1 internal"
    assert lines[4] == f"{AccessDenied.code} PR001 access denied"
    assert len(lines) == 5
    # The application's row was committed with the fragment.
    with db.admin() as admin:
        row = admin.execute("SELECT fragment_id, title FROM public.notes").fetchone()
    assert row is not None
    assert row["title"] == "credentials"
    assert str(row["fragment_id"]) in repr(namespace["fragment_id"])


def _ini_sections(text: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return dict(parser["alembic"])


def test_the_alembic_section_is_the_sample_app() -> None:
    fenced = blocks("alembic")
    ini = [b for lang, b in fenced if lang == "ini"]
    python = [b for lang, b in fenced if lang == "python"]
    assert len(ini) == 1
    assert len(python) == 2
    documented = _ini_sections(ini[0])
    sample = _ini_sections((SAMPLE / "alembic.ini").read_text(encoding="utf-8"))
    # The same configuration, but where pyretrieve's revisions are found: the package
    # resource of an installed pyretrieve (tests/test_packaging.py resolves it from the
    # wheel), or, for the sample inside this repository, their canonical home.
    assert documented.pop("version_locations") == (
        "%(here)s/migrations/versions pyretrieve:_alembic/versions"
    )
    assert sample.pop("version_locations") == (
        "%(here)s/migrations/versions %(here)s/../../alembic/versions"
    )
    assert documented == sample
    assert python[0] == (SAMPLE / "migrations" / "env.py").read_text(encoding="utf-8")
    assert python[1] == (SAMPLE / "migrations" / "versions" / "sample_0001_notes.py").read_text(
        encoding="utf-8"
    )


def _commands(block: str) -> list[list[str]]:
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == "alembic", line
            out.append(words[1:])
    return out


def test_the_alembic_commands_run_as_documented(server: Server, tmp_path: Path) -> None:
    upgrade, stamp = [b for lang, b in blocks("alembic") if lang == "sh"]
    fresh = create_database(server, None)
    installed = create_database(server, None)
    try:
        dsn = server.dsn(fresh)
        outputs = [alembic(dsn, *words, cwd=tmp_path) for words in _commands(upgrade)]
        assert _commands(upgrade)[1] == ["current"]
        current = outputs[1].splitlines()
        assert f"{SAMPLE_HEAD} (head)" in current
        assert [line for line in current if line.startswith(f"{HEAD} (")]
        assert_at_heads(dsn)

        # Installed by pyretrieve first, then joined by the documented stamp.
        from pyretrieve.db import migrate

        dsn = server.dsn(installed)
        migrate.upgrade(dsn)
        with psycopg.connect(dsn) as conn:
            version = conn.execute("SELECT pyretrieve.schema_version()").fetchone()
        assert version is not None
        stamped = [w[1] for w in _commands(stamp) if w[0] == "stamp"]
        assert stamped == [f"pyretrieve_{version[0]}"] == [HEAD], (
            "docs/sqlalchemy.md: the stamp names pyretrieve's newest revision"
        )
        for words in _commands(stamp):
            alembic(dsn, *words, cwd=tmp_path)
        assert_at_heads(dsn)
    finally:
        drop_database(server, fresh)
        drop_database(server, installed)
