"""Alembic environment for pyretrieve's own revisions.

Applications that run their own Alembic can instead add pyretrieve's ``versions`` folder to
their ``version_locations`` and upgrade the ``pyretrieve`` branch (``alembic upgrade
pyretrieve@head``); the revisions only execute versioned SQL from ``sql/migrations``.
"""

from __future__ import annotations

from sqlalchemy import create_engine

from alembic import context

VERSION_TABLE = "pyretrieve_alembic_version"

config = context.config


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, version_table=VERSION_TABLE, version_table_schema="public"
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        context.configure(
            connection=conn, version_table=VERSION_TABLE, version_table_schema="public"
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit(
        "pyretrieve migrations run online only; use sql/pyretrieve.sql for a SQL script"
    )
run_migrations_online()
