"""pyretrieve 0038: a caller's planner settings do not reach inside the read functions.
pyretrieve.authorize and pyretrieve.fragments pin enable_seqscan off and enable_indexscan and
enable_bitmapscan on; lexical_candidates and vector_candidates pin the index scans on. With a
principal's index scans off, authorize scanned every tenant's grants whole and fragments every
tenant's fragments.

Executes sql/migrations/0038_index_scans_pinned.sql.

Revision ID: pyretrieve_0038
Revises: pyretrieve_0037
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0038"
down_revision = "pyretrieve_0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0038_index_scans_pinned.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0038_index_scans_pinned.down.sql")
