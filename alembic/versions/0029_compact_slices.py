"""pyretrieve 0029: compaction reads each page's lexemes and each block as arrays, and writes a
list with one source and no tombstone as it is; only the others are opened posting by posting,
filtered and sorted. The index it writes is the same.

Executes sql/migrations/0029_compact_slices.sql.

Revision ID: pyretrieve_0029
Revises: pyretrieve_0028
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0029"
down_revision = "pyretrieve_0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0029_compact_slices.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0029_compact_slices.down.sql")
