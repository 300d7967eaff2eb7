"""pyretrieve 0059: a group of 16 lexeme buckets whose small lists hold fewer than 1,024
postings keeps them in one page of its own instead of a page per bucket; the lexical leg reads
a term's pages under its bucket's key and its group's, compaction rewrites whole groups, and an
install's pages are merged at the end of the upgrade (split again on the way down).

Executes sql/migrations/0059_lexical_page_groups.sql.

Revision ID: pyretrieve_0059
Revises: pyretrieve_0058
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0059"
down_revision = "pyretrieve_0058"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0059_lexical_page_groups.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0059_lexical_page_groups.down.sql")
