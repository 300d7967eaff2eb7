"""pyretrieve 0015: the lexical leg lists the parts of the score for the returned rows only.

Executes sql/migrations/0015_lexical_top_terms.sql.

Revision ID: pyretrieve_0015
Revises: pyretrieve_0014
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0015"
down_revision = "pyretrieve_0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0015_lexical_top_terms.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0015_lexical_top_terms.down.sql")
