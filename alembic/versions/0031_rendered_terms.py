"""pyretrieve 0031: pyretrieve.search renders the lexical terms of its explanation (each
number through json_double) only for the rows it returns, not for every lexical candidate.
The results and explanations are unchanged; an SQL search takes 0.63 to 0.87 times 0030's
time at scopes of 200 to 5,000 SciFact abstracts (evals/bench/search-revisions.json).

Executes sql/migrations/0031_rendered_terms.sql.

Revision ID: pyretrieve_0031
Revises: pyretrieve_0030
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0031"
down_revision = "pyretrieve_0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0031_rendered_terms.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0031_rendered_terms.down.sql")
