"""pyretrieve 0011: read policies state the bound scope once, outside their read-or-write OR.

Executes sql/migrations/0011_scope_first_policies.sql.

Revision ID: pyretrieve_0011
Revises: pyretrieve_0010
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0011"
down_revision = "pyretrieve_0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0011_scope_first_policies.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0011_scope_first_policies.down.sql")
