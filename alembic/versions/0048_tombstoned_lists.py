"""pyretrieve 0048: the lexical leg leaves a tombstoned posting out of a list whose time range
the window holds by the term's tombstones, instead of reading each fragment of the list: until
compaction, retracts made each search check thousands of fragments.

Executes sql/migrations/0048_tombstoned_lists.sql.

Revision ID: pyretrieve_0048
Revises: pyretrieve_0047
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0048"
down_revision = "pyretrieve_0047"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0048_tombstoned_lists.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0048_tombstoned_lists.down.sql")
