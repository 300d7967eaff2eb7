"""The sample application's first table: notes that point at pyretrieve fragments.

Revision ID: sample_0001
Revises:
Depends on: pyretrieve_0006
"""

from __future__ import annotations

from alembic import op

revision = "sample_0001"
down_revision = None
branch_labels = ("sample",)
# The pyretrieve revision this table needs, by id (the head when it was written). A branch
# label here would resolve to the branch's first revision, not its head.
depends_on = "pyretrieve_0006"


def upgrade() -> None:
    op.execute(
        "CREATE TABLE public.sample_notes ("
        " id integer PRIMARY KEY,"
        " fragment_id uuid NOT NULL,"
        " title text NOT NULL)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE public.sample_notes")
