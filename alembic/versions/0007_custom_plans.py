"""pyretrieve 0007: the vector leg planned per call, with one key look-up per nearest row.

Executes sql/migrations/0007_custom_plans.sql.

Revision ID: pyretrieve_0007
Revises: pyretrieve_0006
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0007"
# Stacks on any head: the migration is self-contained. Re-point to the previous revision
# when migrations are merged.
down_revision = "pyretrieve_0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0007_custom_plans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0007_custom_plans.down.sql")
