"""pyretrieve 0050: a bulk write (4,096 postings or more in one statement) writes its lists of
fewer than 128 postings as pending pages, one per bucket and classification, instead of a block
per lexeme; compaction merges them, and its share rule counts them (and compacts once a bucket
holds 16). A load no longer writes and deletes a row per rare lexeme per batch.

Executes sql/migrations/0050_bulk_pending_pages.sql.

Revision ID: pyretrieve_0050
Revises: pyretrieve_0049
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0050"
down_revision = "pyretrieve_0049"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0050_bulk_pending_pages.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0050_bulk_pending_pages.down.sql")
