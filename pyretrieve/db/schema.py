"""The head schema: ``sql/schema/*.sql`` by responsibility, and the install script built from it.

``sql/schema/`` is where the schema is edited, one file per responsibility (roles and the
schema, tables, bindings, triggers, policies, the read API, search, writers, admin,
privileges, audit), applied in file-name order. ``sql/pyretrieve.sql`` is generated from
them so that ``psql -f`` installs the whole schema in one file; a test fails when it is stale.

    python -m pyretrieve.db.schema            # rewrite sql/pyretrieve.sql
    python -m pyretrieve.db.schema --check    # exit 1 when it is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyretrieve import resources

HEADER = """\
-- GENERATED FILE: do not edit. Built from sql/schema/*.sql by `python -m pyretrieve.db.schema`.
"""


def schema_files() -> list[Path]:
    """The head schema's files, in the order they are applied."""
    return sorted((resources.sql_dir() / "schema").glob("[0-9][0-9]_*.sql"))


def build_install_script() -> str:
    """The install script: the header, then every schema file with a marker naming it."""
    parts = [HEADER]
    for path in schema_files():
        parts.append(f"\n-- ==== sql/schema/{path.name} ====\n")
        parts.append(path.read_text(encoding="utf-8"))
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the script is stale")
    args = parser.parse_args(argv)
    target = resources.install_script()
    built = build_install_script()
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    if args.check:
        if current != built:
            print(f"{target.name} is stale: run python -m pyretrieve.db.schema", file=sys.stderr)
            return 1
        return 0
    if current != built:
        target.write_text(built, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
