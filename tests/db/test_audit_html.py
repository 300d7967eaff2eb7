"""``pyretrieve audit --format html``: the access matrix, the findings and their fixes, one page.

The page is parsed with the standard library's HTML parser and its cells are compared with
the seeded grants; where a headless Chromium is installed, the page is loaded in it and must
log no console message (its Content-Security-Policy turns any attempt to load something from
elsewhere into one).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from pyretrieve.audit import read_report
from pyretrieve.cli import main
from tests.conftest import Database, acting_as, role
from tests.db.seed import grant, seed

ORDER = ("public", "internal", "confidential", "restricted")


class Page(HTMLParser):
    """The matrix cells, the findings rows and all text of an audit page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: dict[tuple[str, str], dict[str, Any]] = {}
        self.columns: list[str] = []
        self.findings: list[dict[str, Any]] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._cell: dict[str, Any] | None = None
        self._finding: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if tag == "th" and "data-scope" in a:
            self.columns.append(a["data-scope"])
        if tag == "td" and "data-principal" in a:
            self._cell = {**a, "text": ""}
            self.cells[(a["data-principal"], a["data-scope"])] = self._cell
        if tag == "tr" and "data-code" in a:
            self._finding = {"severity": a.get("class"), "code": a["data-code"], "cells": []}
            self.findings.append(self._finding)
        if tag == "td" and self._finding is not None:
            self._finding["cells"].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "tr":
            self._finding = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell["text"] += data
        if self._finding is not None and self._finding["cells"]:
            self._finding["cells"][-1] += data


def page_of(dsn: str) -> tuple[int, str, Page]:
    result = CliRunner().invoke(
        main, ["audit", "--dsn", dsn, "--format", "html"], catch_exceptions=False
    )
    page = Page()
    page.feed(result.stdout)
    page.close()
    return result.exit_code, result.stdout, page


def test_the_matrix_has_a_cell_per_principal_and_scope_coloured_by_ceiling(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    seed(db, conn)
    # A second, lower grant in the same cell: the colour is the higher of the two.
    with acting_as(conn, "adam"):
        grant(conn, role("alice"), "acme", "docs", "billing", "public")
    code, html, page = page_of(db.admin_dsn)
    assert code == 0
    assert html.startswith("<!DOCTYPE html>")

    alice = page.cells[(role("alice"), "acme/docs")]
    assert alice["data-ceiling"] == "confidential"
    assert "ceiling-confidential" in alice["class"].split()
    assert "support: confidential, read, max age 30 days" in alice["text"]
    assert "billing: public, read" in alice["text"]
    assert page.cells[(role("bob"), "acme/docs")]["data-ceiling"] == "internal"
    # The group grant reaches its members, and says through whom.
    wiki = page.cells[(role("alice"), "acme/wiki")]
    assert wiki["data-ceiling"] == "public"
    assert "via pyretrieve_reader" in wiki["text"]
    # No reader holds a globex grant; the writer walt does.
    foreign = page.cells[(role("alice"), "globex/docs")]
    assert foreign["data-ceiling"] == ""
    assert "none" in foreign["class"].split()
    assert page.cells[(role("walt"), "globex/docs")]["data-ceiling"] == "restricted"
    assert "write" in page.cells[(role("walt"), "globex/docs")]["text"]

    # Every cell against the access view, read separately: the highest live ceiling, or none.
    with psycopg.connect(db.admin_dsn, autocommit=True) as admin:
        report = read_report(admin)
    expected: dict[tuple[str, str], list[str]] = {}
    for a in report.access:
        cell = expected.setdefault((a.principal, f"{a.workspace_id}/{a.project_id}"), [])
        if a.live:
            cell.append(a.ceiling)
    principals = sorted({p for p, _ in expected})
    scopes = sorted({s for _, s in expected})
    assert page.columns == scopes
    assert set(page.cells) == {(p, s) for p in principals for s in scopes}
    for key, cell in page.cells.items():
        live = expected.get(key, [])
        assert cell["data-ceiling"] == (max(live, key=ORDER.index) if live else ""), key
    assert "script" not in page.tags


def test_findings_are_listed_with_their_fixes_and_catalog_text_is_escaped(db: Database) -> None:
    evil = "<script>alert(1)</script>"
    with psycopg.connect(db.admin_dsn, autocommit=True) as admin:
        admin.execute(
            f'CREATE POLICY "{evil}" ON pyretrieve.grants FOR ALL TO pyretrieve_reader USING (true)'
        )
        admin.execute("ALTER TABLE pyretrieve.grants DISABLE ROW LEVEL SECURITY")
        report = read_report(admin)
    code, html, page = page_of(db.admin_dsn)
    assert code == 1  # an error finding, as with every other format
    assert [(f["code"], f["severity"]) for f in page.findings] == [
        (f.code, f.severity) for f in report.findings
    ]
    for row, finding in zip(page.findings, report.findings, strict=True):
        severity, code_cell, obj, evidence, fix = row["cells"]
        assert (severity, code_cell, evidence, fix) == (
            finding.severity,
            finding.code,
            finding.evidence,
            finding.fix,
        )
        assert obj == f"{finding.object_type} {finding.object}"
    assert "error" in {f["severity"] for f in page.findings}
    assert any("row level security" in f.fix.lower() for f in report.findings)
    # The policy's name is shown as text, never as markup.
    assert evil not in html
    assert evil in "".join(page.text)
    assert "script" not in page.tags


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# A console message as Chromium logs it: `...:INFO:CONSOLE:12] "message", source: ...`
# (older builds: `CONSOLE(12)]`).
_CONSOLE = re.compile(r":CONSOLE[:(]\d+")


def _load_in_chromium(browser: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, [line for line in result.stderr.splitlines() if _CONSOLE.search(line)]


@pytest.mark.skipif(
    _chromium() is None, reason="no headless Chromium (chromium or chromium-browser) on PATH"
)
def test_the_page_loads_in_chromium_without_console_messages(
    db: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    browser = _chromium()
    assert browser is not None
    seed(db, conn)
    _, html, _ = page_of(db.admin_dsn)
    page = tmp_path / "audit.html"
    page.write_text(html, encoding="utf-8")
    dom, console = _load_in_chromium(browser, page, tmp_path / "profile")
    assert console == []
    assert 'id="access-matrix"' in dom
    assert role("alice") in dom

    # The check sees what it is for: the same page with one external image is refused by the
    # page's own policy, and Chromium logs that on the console.
    control = tmp_path / "control.html"
    control.write_text(
        html.replace("</body>", '<img src="https://example.invalid/x.png" alt=""></body>'),
        encoding="utf-8",
    )
    _, console = _load_in_chromium(browser, control, tmp_path / "profile-control")
    assert any("Content Security Policy" in line for line in console), console
