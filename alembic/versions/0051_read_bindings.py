"""pyretrieve 0051: the second wall reads one small row per look-up. authorize() writes the
decision's scope, ceiling and oldest observation time to read_bindings (one row per server
process, valid only in the transaction that wrote it), and every read policy takes the
transaction's binding from bound_filter() (that row, else the write scope): the scope as one
row comparison, the ceiling, the oldest observation time and now(), at most four look-ups a
table where 0050's policies wrote ten over the decisions log's partitions.

Executes sql/migrations/0051_read_bindings.sql.

Revision ID: pyretrieve_0051
Revises: pyretrieve_0050
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0051"
down_revision = "pyretrieve_0050"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0051_read_bindings.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0051_read_bindings.down.sql")
