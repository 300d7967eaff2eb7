"""pyretrieve 0045: compact_lexical_index plans for each call (a generic plan joined its arrays
by nested loops: 39 s against 1 s), and the audit checks that every principal-callable
SECURITY DEFINER function pins its plan cache mode, either way.

Executes sql/migrations/0045_compaction_plans.sql.

Revision ID: pyretrieve_0045
Revises: pyretrieve_0044
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0045"
down_revision = "pyretrieve_0044"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0045_compaction_plans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0045_compaction_plans.down.sql")
