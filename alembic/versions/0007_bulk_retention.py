"""pyretrieve 0007: bulk ingestion (ingest_row, ingest_state, ingest_batch) and decisions
partitioned by month with retention (ensure/prune/list functions).

Executes sql/migrations/0007_bulk_retention.sql.

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
    run_sql_file(op.get_bind(), "0007_bulk_retention.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0007_bulk_retention.down.sql")
