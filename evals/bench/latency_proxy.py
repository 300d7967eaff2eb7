"""A TCP proxy in front of a PostgreSQL server that adds network latency and counts round trips.

A search's cost on a real network is its round trips times the round-trip time, which a local
socket hides. :class:`LatencyProxy` forwards each connection to the server (a Unix socket or a
TCP address), holds every chunk for ``one_way_ms`` in each direction, and counts *turns*: the
times a client starts sending after the server has answered (the first send counts too). A
turn is one round trip; with a delay the count does not depend on the machine's speed (a
client that waits sends only after the proxy has passed the answer on, while a pipelined
batch goes out whole). Without one, a chunk read late can shift the count by one. The delay
is an asyncio timer: the round trip it gives is measured, not assumed (about 1 ms more than
twice ``one_way_ms`` on Linux, whose event loop waits in whole milliseconds).

Usage::

    with LatencyProxy.to_server(conn.info, one_way_ms=0.25) as proxy:
        dsn = proxy.dsn(conninfo)
        before = proxy.turns
        ...  # one request on a connection to dsn
        round_trips = proxy.turns - before
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from psycopg.conninfo import make_conninfo

__all__ = ["LatencyProxy"]

_CHUNK = 65536


@dataclass
class _Link:
    """One proxied connection: which side sent last, for counting turns."""

    last: str | None = None


@dataclass
class LatencyProxy:
    """Forward 127.0.0.1:``port`` to ``upstream`` (a Unix socket path, or ``(host, port)``),
    delaying each chunk by ``one_way_ms`` in each direction, in a thread of its own."""

    upstream: str | tuple[str, int]
    one_way_ms: float = 0.0
    port: int = 0
    _turns: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.base_events.Server | None = None

    @classmethod
    def to_server(cls, info: Any, *, one_way_ms: float) -> LatencyProxy:
        """A proxy to the server a psycopg connection's ``info`` names."""
        host, port = info.host, int(info.port)
        if host.startswith("/"):
            return cls(upstream=str(Path(host) / f".s.PGSQL.{port}"), one_way_ms=one_way_ms)
        return cls(upstream=(host, port), one_way_ms=one_way_ms)

    @property
    def turns(self) -> int:
        with self._lock:
            return self._turns

    def dsn(self, conninfo: str) -> str:
        """``conninfo`` (a connection string to the proxied server) through the proxy."""
        return make_conninfo(conninfo, host="127.0.0.1", port=str(self.port), sslmode="disable")

    def __enter__(self) -> LatencyProxy:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._accept, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="latency-proxy", daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = self._loop
        if loop is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if isinstance(self.upstream, str):
            up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        link = _Link()
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, link, "client"),
                self._pump(up_reader, writer, link, "server"),
                return_exceptions=True,
            )
        except asyncio.CancelledError:
            pass  # the proxy is closing: the connection ends with it
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        link: _Link,
        side: str,
    ) -> None:
        # Chunks are delivered in order, each no earlier than one_way_ms after it was read.
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        delay = self.one_way_ms / 1000.0

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    sink.close()
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                sink.write(data)
                await sink.drain()

        delivery = asyncio.ensure_future(deliver())
        try:
            while data := await source.read(_CHUNK):
                if side == "client" and link.last != "client":
                    with self._lock:
                        self._turns += 1
                link.last = side
                queue.put_nowait((time.monotonic() + delay, data))
        finally:
            queue.put_nowait((0.0, b""))
            with contextlib.suppress(Exception):
                await delivery
