"""pyretrieve 0030: similar-tool protection reads a tool's description too. pyretrieve.tools
gains entities, the entity words of the name and description (a stored generated column);
tool_entries returns them and discover_tools compares them with the request's; plurals are
stemmed so that games matches game.

Executes sql/migrations/0030_tool_entities.sql.

Revision ID: pyretrieve_0030
Revises: pyretrieve_0029
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0030"
down_revision = "pyretrieve_0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0030_tool_entities.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0030_tool_entities.down.sql")
