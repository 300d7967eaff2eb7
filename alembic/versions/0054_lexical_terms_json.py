"""pyretrieve 0054: lexical_candidates returns its explanation terms as json, kept as written
(jsonb parsed every number into a numeric and printed it again), and a term's weight joins its
blocks rather than each posting; search() reads the json terms.

Executes sql/migrations/0054_lexical_terms_json.sql.

Revision ID: pyretrieve_0054
Revises: pyretrieve_0053
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0054"
down_revision = "pyretrieve_0053"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0054_lexical_terms_json.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0054_lexical_terms_json.down.sql")
