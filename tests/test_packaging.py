"""The wheel carries the SQL and the Alembic revisions; the repository keeps its fixed layout."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TOP_LEVEL = {
    "pyproject.toml",
    "README.md",
    "sql",
    "alembic",
    "pyretrieve",
    "tests",
    "evals",
    "docker",
    "docs",
    ".ci",
}

REQUIRED_IN_WHEEL = (
    "pyretrieve/_sql/pyretrieve.sql",
    "pyretrieve/_sql/migrations/0001_initial.sql",
    "pyretrieve/_sql/migrations/0001_initial.down.sql",
    "pyretrieve/_alembic/env.py",
    "pyretrieve/_alembic/versions/0001_initial.py",
    "pyretrieve/resources.py",
)


def _git_ls_files() -> list[str]:
    result = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.skip(f"not a git checkout: {result.stderr.strip()}")
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = list(out.glob("pyretrieve-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow
def test_wheel_carries_sql_alembic_and_the_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        missing = [n for n in REQUIRED_IN_WHEEL if n not in names]
        assert not missing, f"missing from the wheel: {missing}"

        # Every tracked file of sql/ and alembic/ is in the wheel, byte for byte.
        for path in _git_ls_files():
            top, _, rest = path.partition("/")
            if top in ("sql", "alembic"):
                packaged = f"pyretrieve/_{top}/{rest}"
                assert packaged in names, f"{path} is not in the wheel"
                assert zf.read(packaged) == (ROOT / path).read_bytes(), f"{packaged} differs"
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert not [n for n in names if n.startswith("tests/")]

        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        parser = configparser.ConfigParser()
        parser.read_string(zf.read(entry_points).decode("utf-8"))
        assert dict(parser["console_scripts"]) == {"pyretrieve": "pyretrieve.cli:main"}


@pytest.mark.slow
def test_installed_package_finds_its_sql_inside_the_package(wheel: Path, tmp_path: Path) -> None:
    # Unpacked wheel first on the path, outside the checkout: the resources must resolve to
    # the copies inside the package, not to the repository's top-level folders.
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = (
        "from pyretrieve import resources; "
        "print(resources.install_script()); "
        "print(resources.migration_script('0001_initial.sql')); "
        "print(resources.alembic_dir())"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    package = site / "pyretrieve"
    paths = [Path(line) for line in result.stdout.splitlines()]
    assert paths == [
        package / "_sql" / "pyretrieve.sql",
        package / "_sql" / "migrations" / "0001_initial.sql",
        package / "_alembic",
    ]
    assert all(p.exists() for p in paths)


@pytest.mark.slow
def test_an_app_finds_the_revisions_as_a_package_resource(wheel: Path, tmp_path: Path) -> None:
    # docs/sqlalchemy.md: an application's alembic.ini names pyretrieve's revisions as the
    # package resource pyretrieve:_alembic/versions.
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    app = tmp_path / "app"
    (app / "versions").mkdir(parents=True)
    code = (
        "import sys; from alembic.config import Config; "
        "from alembic.script import ScriptDirectory; "
        "c = Config(); c.set_main_option('script_location', sys.argv[1]); "
        "c.set_main_option('path_separator', 'space'); "
        "c.set_main_option('version_locations', sys.argv[1] + '/versions'"
        " + ' pyretrieve:_alembic/versions'); "
        "s = ScriptDirectory.from_config(c); "
        "print(s.get_revision('pyretrieve@head').revision); "
        "print(s.get_revision('pyretrieve@head').path)"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", code, str(app)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    head, path = result.stdout.split()
    newest = max(p.name[:4] for p in (ROOT / "sql" / "migrations").glob("[0-9]*_*.sql"))
    assert head == f"pyretrieve_{newest}"
    assert Path(path).is_relative_to(site / "pyretrieve" / "_alembic" / "versions")


def test_repository_top_level_is_the_fixed_set() -> None:
    entries = {path.split("/", 1)[0] for path in _git_ls_files()}
    unexpected = sorted(e for e in entries - TOP_LEVEL if not e.startswith("."))
    assert not unexpected, f"unexpected top-level entries: {unexpected}"
    missing = sorted(TOP_LEVEL - entries)
    assert not missing, f"missing top-level entries: {missing}"
