"""pyretrieve 0018: BM25's scope statistics come from an append-only log the fragments'
triggers write, not from a scan of the scope's fragments.

Executes sql/migrations/0018_statistics_log.sql.

Revision ID: pyretrieve_0018
Revises: pyretrieve_0017
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0018"
down_revision = "pyretrieve_0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0018_statistics_log.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0018_statistics_log.down.sql")
