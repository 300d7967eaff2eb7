"""pyretrieve 0047: the writers take a table's first statistics (take_first_statistics) once it
holds 1,000 rows: planned on the planner's defaults, a new install's calls read whole scopes
until autovacuum first analysed the tables, and for ever where it is off.

Executes sql/migrations/0047_first_statistics.sql.

Revision ID: pyretrieve_0047
Revises: pyretrieve_0046
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0047"
down_revision = "pyretrieve_0046"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0047_first_statistics.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0047_first_statistics.down.sql")
