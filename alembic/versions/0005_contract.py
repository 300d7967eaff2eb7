"""pyretrieve 0005: one contract, written once (pyretrieve.search() explains each result with
the Python ranker's document, byte for byte in canonical JSON).

Executes sql/migrations/0005_contract.sql.

Revision ID: pyretrieve_0005
Revises: pyretrieve_0004
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0005"
down_revision = "pyretrieve_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0005_contract.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0005_contract.down.sql")
