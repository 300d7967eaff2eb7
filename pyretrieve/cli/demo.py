"""``pyretrieve demo``: the main job on the embedded default (or any --dsn)."""

from __future__ import annotations

import click

from pyretrieve.cli import main
from pyretrieve.cli.common import dsn_option, handle_errors
from pyretrieve.db.connect import resolve_dsn


@main.command()
@dsn_option
@click.option("--json", "as_json", is_flag=True, help="Also print the top result's explanation.")
@handle_errors
def demo(dsn: str | None, as_json: bool) -> None:
    """Install, load a small corpus into two workspaces, and show side by side what two
    principals with different ceilings see for the same search."""
    from pyretrieve import demo as demo_module
    from pyretrieve.db.connect import explicit_dsn

    demo_module.run(
        resolve_dsn(dsn, installer=True), json=as_json, embedded=explicit_dsn(dsn) is None
    )
