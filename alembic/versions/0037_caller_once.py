"""pyretrieve 0037: pyretrieve.authorize chooses the effective grant once, and
pyretrieve.effective_grant reads the caller once (sub-selects). With a caller's enable_indexscan
off, or few roles, the planner scanned the grants and pg_authid and called effective_grant once
per grant and caller() once per role (about 300 calls in a cluster of 100 roles). Their results
are unchanged.

Executes sql/migrations/0037_caller_once.sql.

Revision ID: pyretrieve_0037
Revises: pyretrieve_0036
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0037"
down_revision = "pyretrieve_0036"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0037_caller_once.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0037_caller_once.down.sql")
