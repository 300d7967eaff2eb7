"""pyretrieve 0040: the functions principal groups may execute plan with their own settings.
The writers' functions and the remaining readers' pin enable_seqscan off and enable_indexscan
and enable_bitmapscan on (0038 and 0039 pinned the read path and discovery), and the audit
flags any SECURITY DEFINER function a reader or writer may execute that does not
(definer_follows_caller_planner).

Executes sql/migrations/0040_principal_functions_pinned.sql.

Revision ID: pyretrieve_0040
Revises: pyretrieve_0039
"""

from __future__ import annotations

from alembic import op
from pyretrieve.db.migrate import run_sql_file

revision = "pyretrieve_0040"
down_revision = "pyretrieve_0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file(op.get_bind(), "0040_principal_functions_pinned.sql")


def downgrade() -> None:
    run_sql_file(op.get_bind(), "0040_principal_functions_pinned.down.sql")
