"""pyretrieve 0017: the postings key covers what the lexical leg reads, and each term's
document frequency is counted over its own postings.

Executes sql/migrations/0017_covering_postings.sql.

Revision ID: pyretrieve_0017
Revises: pyretrieve_0016
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0017"
down_revision = "pyretrieve_0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0017_covering_postings.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0017_covering_postings.down.sql")
