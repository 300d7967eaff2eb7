"""pyretrieve 0044: what a request reads of the grants and of the cluster's roles follows the
caller, not the other principals: its grant look-ups probe the grants' key (with 5,000
principals granted one project, an authorize read 10,004 grant rows), and the superuser check
reads the caller's own memberships (it scanned every role of the cluster).

Executes sql/migrations/0044_grant_probes.sql.

Revision ID: pyretrieve_0044
Revises: pyretrieve_0043
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0044"
down_revision = "pyretrieve_0043"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0044_grant_probes.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0044_grant_probes.down.sql")
