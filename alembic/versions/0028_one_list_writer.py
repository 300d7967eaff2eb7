"""pyretrieve 0028: every write of postings groups them once and writes them through
write_lexical_lists (blocks only, or pages for a scope's first write), which compaction also
uses: the block format is written in one place.

Executes sql/migrations/0028_one_list_writer.sql.

Revision ID: pyretrieve_0028
Revises: pyretrieve_0027
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0028"
down_revision = "pyretrieve_0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0028_one_list_writer.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0028_one_list_writer.down.sql")
