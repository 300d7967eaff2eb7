"""pyretrieve 0004: the SQL API is the only door (SECURITY DEFINER functions, one binding per
transaction, per-scope generations, no table privileges for principals).

Executes sql/migrations/0004_function_door.sql.

Revision ID: pyretrieve_0004
Revises: pyretrieve_0003
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0004"
down_revision = "pyretrieve_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0004_function_door.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0004_function_door.down.sql")
