"""pyretrieve 0006: tools for LLM agents (tools and tool_rollouts tables, tool functions).

Executes sql/migrations/0006_tools.sql.

Revision ID: pyretrieve_0006
Revises: pyretrieve_0005
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0006"
# Stacks on any head: the migration is self-contained. Re-point to the previous revision
# when migrations are merged.
down_revision = "pyretrieve_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0006_tools.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0006_tools.down.sql")
