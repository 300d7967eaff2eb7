"""pyretrieve 0053: a read binding keeps the decision's max_age, not the oldest observation
time derived from it (bound_filter() derives it, once), and the read bindings' insert and
update policies make their one check through copies_bound_decision().

Executes sql/migrations/0053_read_binding_max_age.sql.

Revision ID: pyretrieve_0053
Revises: pyretrieve_0052
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0053"
down_revision = "pyretrieve_0052"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0053_read_binding_max_age.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0053_read_binding_max_age.down.sql")
