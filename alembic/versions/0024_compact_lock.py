"""pyretrieve 0024: compaction locks the small lexemes' blocks in one read of the scope's blocks
not full (the partial index) against the lexemes, instead of a key probe per lexeme.

Executes sql/migrations/0024_compact_lock.sql.

Revision ID: pyretrieve_0024
Revises: pyretrieve_0023
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0024"
down_revision = "pyretrieve_0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0024_compact_lock.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0024_compact_lock.down.sql")
