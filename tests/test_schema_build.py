"""sql/pyretrieve.sql is generated from sql/schema/: edited in one place, never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyretrieve.db import schema

ROOT = Path(__file__).resolve().parent.parent


def test_the_install_script_is_built_from_the_schema_files() -> None:
    built = schema.build_install_script()
    current = (ROOT / "sql" / "pyretrieve.sql").read_text(encoding="utf-8")
    assert current == built, "sql/pyretrieve.sql is stale: run python -m pyretrieve.db.schema"


def test_the_build_holds_every_schema_file_in_order(tmp_path: Path) -> None:
    files = schema.schema_files()
    names = [p.name for p in files]
    assert names == sorted(names)
    assert names[0].startswith("00_")
    assert names[-1].startswith("90_")
    built = schema.build_install_script()
    positions = [built.index(f"-- ==== sql/schema/{name} ====") for name in names]
    assert positions == sorted(positions)
    for path in files:
        assert path.read_text(encoding="utf-8") in built


def test_check_mode_fails_on_a_stale_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stale = tmp_path / "pyretrieve.sql"
    stale.write_text("-- stale\n", encoding="utf-8")
    monkeypatch.setattr(schema.resources, "install_script", lambda: stale)
    assert schema.main(["--check"]) == 1
    assert schema.main([]) == 0
    assert schema.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == schema.build_install_script()
