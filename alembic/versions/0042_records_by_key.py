"""pyretrieve 0042: a search's records are read by their keys whatever the statistics say.
fragments() plans generically and probes the key once per id, where, planned for a growing
scope's stale statistics, it read every fragment of the scope at every search.

Executes sql/migrations/0042_records_by_key.sql.

Revision ID: pyretrieve_0042
Revises: pyretrieve_0041
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0042"
down_revision = "pyretrieve_0041"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0042_records_by_key.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0042_records_by_key.down.sql")
