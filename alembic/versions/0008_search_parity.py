"""pyretrieve 0008: search() takes the client's semantic intent and degrades as the client does.

Executes sql/migrations/0008_search_parity.sql.

Revision ID: pyretrieve_0008
Revises: pyretrieve_0007
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0008"
# Function definitions only: re-point to the previous revision when migrations are merged.
down_revision = "pyretrieve_0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0008_search_parity.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0008_search_parity.down.sql")
