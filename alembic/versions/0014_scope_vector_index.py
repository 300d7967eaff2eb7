"""pyretrieve 0014: a scope may have its own HNSW index of a model, which its vector leg then searches.

Executes sql/migrations/0014_scope_vector_index.sql.

Revision ID: pyretrieve_0014
Revises: pyretrieve_0013
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0014"
down_revision = "pyretrieve_0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0014_scope_vector_index.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0014_scope_vector_index.down.sql")
