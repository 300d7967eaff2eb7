"""pyretrieve 0043: every function a reader or writer may execute plans generically, so that
a writer's probe of one key stays a probe behind a growing scope's stale statistics, and the
audit flags a function that does not (definer_plans_for_the_values_at_hand).

Executes sql/migrations/0043_generic_plans.sql.

Revision ID: pyretrieve_0043
Revises: pyretrieve_0042
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0043"
down_revision = "pyretrieve_0042"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0043_generic_plans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0043_generic_plans.down.sql")
