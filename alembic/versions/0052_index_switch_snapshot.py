"""pyretrieve 0052: vector_candidates finds the scope's HNSW index by name in pg_class and its
pg_index row in the same snapshot, the statement's. With the name resolved by to_regclass (the
newest catalog), a search whose snapshot predated a rebuild's commit found the new index's name
but not its row and scanned the scope exactly.

Executes sql/migrations/0052_index_switch_snapshot.sql.

Revision ID: pyretrieve_0052
Revises: pyretrieve_0051
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0052"
down_revision = "pyretrieve_0051"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0052_index_switch_snapshot.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0052_index_switch_snapshot.down.sql")
