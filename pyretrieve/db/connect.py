"""Which database a command talks to: --dsn, else $PYRETRIEVE_DSN, else the embedded server.

On the embedded server, installation and role management run as its superuser; every other
command connects as the application login role (``pyretrieve_app``), which is no superuser and
may only SET ROLE to the principals granted to it. A DSN given with --dsn or $PYRETRIEVE_DSN is
used as it is.
"""

from __future__ import annotations

import os

from pyretrieve import embedded


def explicit_dsn(dsn: str | None = None) -> str | None:
    """--dsn, else $PYRETRIEVE_DSN, else None (the embedded default)."""
    return dsn or os.environ.get("PYRETRIEVE_DSN") or None


def resolve_dsn(
    dsn: str | None = None, *, start_embedded: bool = True, installer: bool = False
) -> str:
    given = explicit_dsn(dsn)
    if given:
        return given
    if not start_embedded:
        url = embedded.url()
        if url is None:
            raise RuntimeError("the embedded server is not running (pyretrieve db start)")
    else:
        url = embedded.start()
    return url if installer else embedded.app_url(url)
