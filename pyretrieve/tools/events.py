"""Telemetry events of tool discovery, through the ``pyretrieve.tools`` logger.

Each event is one INFO record whose message is the event name and whose ``event`` attribute is
a dict of digests, counts, levels and stages: never query text, tool names or schemas. With
OpenTelemetry installed each is also an event of the current span (the discovery's or the
rediscovery's), with the same fields (:func:`pyretrieve.telemetry.event`).

* ``tool_discovery``: one per discovery (candidates, K, policy, level, stage, applied).
* ``tool_discovery_miss``: the discovery's confidence is ``low`` or ``fail``.
* ``empty_discovery``: no authorised tool matched.
* ``tool_rediscovery``: a model named a tool it was not offered (outcome only).
* ``tool_schema_round``: schemas loaded for a round (count, characters, tokens, fingerprint).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from pyretrieve import telemetry

log = logging.getLogger("pyretrieve.tools")
EVENTS = (
    "tool_discovery",
    "tool_discovery_miss",
    "empty_discovery",
    "tool_rediscovery",
    "tool_schema_round",
)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def emit(name: str, **fields: Any) -> None:
    if name not in EVENTS:
        raise ValueError(f"unknown event {name!r}")
    for key, value in fields.items():
        if not (value is None or isinstance(value, bool | int | float | str)):
            raise TypeError(f"event field {key} must be a scalar")
    log.info(name, extra={"event": {"name": name, **fields}})
    telemetry.event(name, fields)
