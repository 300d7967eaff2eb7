"""pyretrieve 0023: compact_lexical_index takes p_min_share: with a share above 0 it compacts
only once the postings in blocks not full and the tombstones are at least that share of the
postings in pages, so that the Ingestor's compaction after each run rewrites each posting of a
growing scope a bounded number of times.

Executes sql/migrations/0023_compact_share.sql.

Revision ID: pyretrieve_0023
Revises: pyretrieve_0022
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0023"
down_revision = "pyretrieve_0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0023_compact_share.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0023_compact_share.down.sql")
