"""pyretrieve 0009: discover_tools in SQL (the client's discovery document) and its helpers.

Executes sql/migrations/0009_discover_tools.sql.

Revision ID: pyretrieve_0009
Revises: pyretrieve_0008
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0009"
down_revision = "pyretrieve_0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0009_discover_tools.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0009_discover_tools.down.sql")
