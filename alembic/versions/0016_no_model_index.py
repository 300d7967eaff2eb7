"""pyretrieve 0016: register_model builds no per-model HNSW index, and the ones it built go.

Executes sql/migrations/0016_no_model_index.sql.

Revision ID: pyretrieve_0016
Revises: pyretrieve_0015
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0016"
down_revision = "pyretrieve_0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0016_no_model_index.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0016_no_model_index.down.sql")
