"""pyretrieve 0057: search() parses each lexical explanation term once, typed; explanations
are unchanged.

Executes sql/migrations/0057_search_terms_parsed_once.sql.

Revision ID: pyretrieve_0057
Revises: pyretrieve_0056
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0057"
down_revision = "pyretrieve_0056"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0057_search_terms_parsed_once.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0057_search_terms_parsed_once.down.sql")
