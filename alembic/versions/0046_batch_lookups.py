"""pyretrieve 0046: ingest_batch finds each row's fragment from one read of the batch's
contents, matched through a map, and looks up a predecessor only for a row that supersedes:
on a table never analysed, a probe per row read the scope once per row.

Executes sql/migrations/0046_batch_lookups.sql.

Revision ID: pyretrieve_0046
Revises: pyretrieve_0045
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0046"
down_revision = "pyretrieve_0045"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0046_batch_lookups.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0046_batch_lookups.down.sql")
