"""pyretrieve 0025: a fragment's text is analysed once per write: the row trigger sets tsv and
doc_length, which stop being generated columns (the length analysed the text a second time).

Executes sql/migrations/0025_tsvector_once.sql.

Revision ID: pyretrieve_0025
Revises: pyretrieve_0024
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0025"
down_revision = "pyretrieve_0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0025_tsvector_once.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0025_tsvector_once.down.sql")
