"""The sample application's Alembic environment: one engine, one version table for all
branches (its own and pyretrieve's), one transaction per upgrade."""

from __future__ import annotations

import os
from logging.config import fileConfig

from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from alembic import context

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name)

# pyretrieve's revisions execute their SQL on the psycopg connection underneath, so the URL
# names the psycopg driver: postgresql+psycopg://.
url = os.environ.get("DATABASE_URL") or config.get_main_option("sqlalchemy.url")

if context.is_offline_mode():
    raise SystemExit("pyretrieve's revisions run online only")

with create_engine(url, poolclass=NullPool).connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
