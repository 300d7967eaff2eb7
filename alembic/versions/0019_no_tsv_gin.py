"""pyretrieve 0019: no GIN index over the fragments' text-search vectors, which no query
could use under row-level security.

Executes sql/migrations/0019_no_tsv_gin.sql.

Revision ID: pyretrieve_0019
Revises: pyretrieve_0018
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0019"
down_revision = "pyretrieve_0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0019_no_tsv_gin.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0019_no_tsv_gin.down.sql")
