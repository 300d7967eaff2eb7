"""pyretrieve 0002: the audit views (sql/migrations/0002_audit.sql).

Revision ID: pyretrieve_0002
Revises: pyretrieve_0001
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0002"
down_revision = "pyretrieve_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0002_audit.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0002_audit.down.sql")
