"""pyretrieve 0003: scope-local BM25, append-only generations, weighted fusion.

Executes sql/migrations/0003_bm25.sql.

Revision ID: pyretrieve_0003
Revises: pyretrieve_0002
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0003"
down_revision = "pyretrieve_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0003_bm25.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0003_bm25.down.sql")
