"""pyretrieve 0035: pyretrieve.search writes floats at extra_float_digits 1 whatever the caller
set. The legs' rows travel to its fusion as jsonb, and a float becomes jsonb through its text:
at a caller's extra_float_digits of 0 or below the explanation showed rounded lexical scores and
cosine distances, not the client's.

Executes sql/migrations/0035_exact_search_floats.sql.

Revision ID: pyretrieve_0035
Revises: pyretrieve_0034
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0035"
down_revision = "pyretrieve_0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0035_exact_search_floats.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0035_exact_search_floats.down.sql")
