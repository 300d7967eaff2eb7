"""pyretrieve 0010: bulk ingestion (ingest_row, ingest_state, ingest_batch) and decisions
partitioned by month with retention (ensure/prune/list functions).

Executes sql/migrations/0010_bulk_retention.sql.

Revision ID: pyretrieve_0010
Revises: pyretrieve_0009
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0010"
# Functions, the ingest_row type and the decisions table's partitioning (hand-written data
# moves both ways): re-point to the previous revision and re-draft when migrations are merged.
down_revision = "pyretrieve_0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0010_bulk_retention.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0010_bulk_retention.down.sql")
