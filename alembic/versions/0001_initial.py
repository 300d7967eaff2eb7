"""pyretrieve 0001: the initial schema (sql/migrations/0001_initial.sql).

Revision ID: pyretrieve_0001
Revises:
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0001"
down_revision = None
branch_labels = ("pyretrieve",)
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0001_initial.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0001_initial.down.sql")
