"""pyretrieve 0026: the first write into a scope's empty lexical index writes its lists as
compaction would leave them (pages for small lists, blocks of 128 for the others), through
write_lexical_lists, which compaction now shares.

Executes sql/migrations/0026_first_pages.sql.

Revision ID: pyretrieve_0026
Revises: pyretrieve_0025
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0026"
down_revision = "pyretrieve_0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0026_first_pages.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0026_first_pages.down.sql")
