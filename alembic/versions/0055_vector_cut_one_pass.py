"""pyretrieve 0055: the exact vector leg keeps the p_limit + 1 nearest rows in one pass and
reads the scope again only when the next row ties the p_limit-th; rows are unchanged.

Executes sql/migrations/0055_vector_cut_one_pass.sql.

Revision ID: pyretrieve_0055
Revises: pyretrieve_0054
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0055"
down_revision = "pyretrieve_0054"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0055_vector_cut_one_pass.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0055_vector_cut_one_pass.down.sql")
