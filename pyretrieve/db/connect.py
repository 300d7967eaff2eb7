"""Which database a command talks to: --dsn, else $PYRETRIEVE_DSN, else the embedded server."""

from __future__ import annotations

import os

from pyretrieve import embedded


def resolve_dsn(dsn: str | None = None, *, start_embedded: bool = True) -> str:
    if dsn:
        return dsn
    env = os.environ.get("PYRETRIEVE_DSN")
    if env:
        return env
    if not start_embedded:
        url = embedded.url()
        if url is None:
            raise RuntimeError("the embedded server is not running (pyretrieve db start)")
        return url
    return embedded.start()
