"""pyretrieve 0056: lexical_candidates computes a page's lexeme position and the term's slice
once per page, and a returned row's position in a block once per probe; rows are unchanged.

Executes sql/migrations/0056_lexical_pages_once.sql.

Revision ID: pyretrieve_0056
Revises: pyretrieve_0055
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0056"
down_revision = "pyretrieve_0055"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0056_lexical_pages_once.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0056_lexical_pages_once.down.sql")
