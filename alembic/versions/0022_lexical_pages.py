"""pyretrieve 0022: the lexical index's small lists in pages (lexical_pages): the postings of a
lexeme with fewer than 128 in a scope and classification share a page with the other such
lexemes of its bucket instead of a block of their own; every scope is compacted on upgrade.

Executes sql/migrations/0022_lexical_pages.sql.

Revision ID: pyretrieve_0022
Revises: pyretrieve_0021
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0022"
down_revision = "pyretrieve_0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0022_lexical_pages.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0022_lexical_pages.down.sql")
