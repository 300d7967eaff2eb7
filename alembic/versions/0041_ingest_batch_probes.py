"""pyretrieve 0041: a bulk batch's work no longer grows with its scope. ingest_batch plans
generically, and finds each row's fragment and the fragments it supersedes by one key probe per
row, where its statements, planned for a growing scope's stale statistics, had compared every
new row with every fragment of the scope.

Executes sql/migrations/0041_ingest_batch_probes.sql.

Revision ID: pyretrieve_0041
Revises: pyretrieve_0040
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0041"
down_revision = "pyretrieve_0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0041_ingest_batch_probes.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0041_ingest_batch_probes.down.sql")
