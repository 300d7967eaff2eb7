"""pyretrieve 0033: pyretrieve.vector_candidates plans its statements generically from a
session's first call (plan_cache_mode = force_generic_plan, where 0007 to 0032 planned every
call afresh) and reads no table sequentially (enable_seqscan = off). Its rows are unchanged; the
exact leg no longer spends 0.6 to 1.2 ms of each call planning (evals/bench/vector_plans.py).

Executes sql/migrations/0033_vector_generic_plans.sql.

Revision ID: pyretrieve_0033
Revises: pyretrieve_0032
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0033"
down_revision = "pyretrieve_0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0033_vector_generic_plans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0033_vector_generic_plans.down.sql")
