"""pyretrieve 0039: as 0038 for tool discovery. pyretrieve.discover_tools, tool_entries,
tool_schemas, tool_by_name and tool_rollout pin enable_seqscan off and enable_indexscan and
enable_bitmapscan on: with a caller's index scans off, discovery scanned every tenant's tools
and fragments whole.

Executes sql/migrations/0039_tool_reads_pinned.sql.

Revision ID: pyretrieve_0039
Revises: pyretrieve_0038
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0039"
down_revision = "pyretrieve_0038"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0039_tool_reads_pinned.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0039_tool_reads_pinned.down.sql")
