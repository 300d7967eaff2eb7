"""pyretrieve 0027: pages whose lexeme ranges overlap in a bucket (two first writes at once)
count as waiting in compaction's share rule, and compaction rewrites their buckets.

Executes sql/migrations/0027_overlapping_pages.sql.

Revision ID: pyretrieve_0027
Revises: pyretrieve_0026
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0027"
down_revision = "pyretrieve_0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0027_overlapping_pages.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0027_overlapping_pages.down.sql")
