"""pyretrieve 0012: a default fusion and default weights per model, DBSF, explanations that name
the fusion.

Executes sql/migrations/0012_fusion_defaults.sql.

Revision ID: pyretrieve_0012
Revises: pyretrieve_0011
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0012"
# Table columns and a data step (hand-written, marked in the SQL) besides function definitions:
# re-point to the previous revision, and re-draft, when migrations are merged.
down_revision = "pyretrieve_0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0012_fusion_defaults.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0012_fusion_defaults.down.sql")
