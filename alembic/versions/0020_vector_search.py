"""pyretrieve 0020: the vector leg says how it searched (exact, or through the scope's own
HNSW index) on every row and in every explanation, and maintain_vector_indexes gives each
scope its index from a measured size.

Executes sql/migrations/0020_vector_search.sql.

Revision ID: pyretrieve_0020
Revises: pyretrieve_0019
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0020"
down_revision = "pyretrieve_0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0020_vector_search.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0020_vector_search.down.sql")
