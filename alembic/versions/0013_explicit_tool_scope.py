"""pyretrieve 0013: the tool look-ups state the fragments' workspace directly.

Executes sql/migrations/0013_explicit_tool_scope.sql.

Revision ID: pyretrieve_0013
Revises: pyretrieve_0012
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0013"
down_revision = "pyretrieve_0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0013_explicit_tool_scope.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0013_explicit_tool_scope.down.sql")
