"""pyretrieve 0058: vector_candidates states the scope's filter once, read by both passes of the
exact cut; plans, rows and ranks are unchanged.

Executes sql/migrations/0058_vector_scope_stated_once.sql.

Revision ID: pyretrieve_0058
Revises: pyretrieve_0057
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0058"
down_revision = "pyretrieve_0057"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0058_vector_scope_stated_once.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0058_vector_scope_stated_once.down.sql")
