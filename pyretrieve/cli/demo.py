"""``pyretrieve demo``: the main job on the embedded default (or any --dsn)."""

from __future__ import annotations

from pyretrieve.cli import main
from pyretrieve.cli.common import dsn_option, handle_errors
from pyretrieve.db.connect import resolve_dsn


@main.command()
@dsn_option
@handle_errors
def demo(dsn: str | None) -> None:
    """Install, load a small corpus into two workspaces, and show who sees what."""
    from pyretrieve import demo as demo_module

    demo_module.run(resolve_dsn(dsn, installer=True))
