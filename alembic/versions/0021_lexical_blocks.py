"""pyretrieve 0021: the lexical index in blocks of up to 128 postings per scope, lexeme and
classification (lexical_blocks, with lexical_tombstones), rebuilt from every active fragment,
instead of a row per posting; fragments get their document number (docno).

Executes sql/migrations/0021_lexical_blocks.sql.

Revision ID: pyretrieve_0021
Revises: pyretrieve_0020
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0021"
down_revision = "pyretrieve_0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0021_lexical_blocks.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0021_lexical_blocks.down.sql")
