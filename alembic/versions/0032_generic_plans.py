"""pyretrieve 0032: pyretrieve.lexical_candidates and pyretrieve.search plan their statements
generically from a session's first call (plan_cache_mode = force_generic_plan) instead of afresh
for each of its first five, after which PL/pgSQL kept the generic plan anyway. Results and
explanations are unchanged; a new session's second to sixth searches no longer pay about 4 ms
of planning each (evals/bench/session_start.py).

Executes sql/migrations/0032_generic_plans.sql.

Revision ID: pyretrieve_0032
Revises: pyretrieve_0031
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0032"
down_revision = "pyretrieve_0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0032_generic_plans.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0032_generic_plans.down.sql")
