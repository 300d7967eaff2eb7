"""pyretrieve 0034: pyretrieve.bound_decision and pyretrieve.bound_write find the transaction's
binding through the xact_id index whatever the statistics say (enable_seqscan = off). A month's
partition of the decisions log starts empty and is analysed so; until autovacuum analysed it
again, every look-up (about 30 per search) scanned the partition whole, 36 us each at 500 rows
and 109 us at 2,000 in a scratch run, against 8 us by the index.

Executes sql/migrations/0034_binding_index_scans.sql.

Revision ID: pyretrieve_0034
Revises: pyretrieve_0033
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0034"
down_revision = "pyretrieve_0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0034_binding_index_scans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0034_binding_index_scans.down.sql")
