"""The server of ``widetable serve``: one event loop, a small worker pool, graceful drain.

* ``app.py`` (this module): :class:`WidetableServer`: the listening socket
  (bound at construction, so the port is known at once), TLS, the event loop,
  the worker pool, idle connections, drain.
* ``http.py``: HTTP/1.1 framing, one asyncio ``Protocol`` per connection.
* ``service.py``: Tablestore's checks, dispatch (inline or on the pool) and
  signed answers; its docstring says which requests run where.

Threads. ``serve_forever()`` runs the event loop (uvloop when it is installed,
else asyncio's own) on the calling thread. Every connection's framing, checks,
decoding and most store calls run there, so the server's Python runs on one
thread with no GIL handoffs between connection threads. A pool of ``workers``
threads (4) runs the requests that may wait. ``drain()`` is called from
another thread.

Connections. HTTP/1.1 keep-alive; one idle for ``idle_timeout`` seconds (60;
a request sent partly counts as idle) is closed. ``drain()`` stops accepting,
closes idle connections, lets in-flight requests finish (answering them with
``Connection: close``) for up to ``grace`` seconds, then closes the store.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..db import Database
from . import tables
from .auth import KeyStore
from .busypoll import check_window
from .http import Connection
from .service import TablestoreService

log = logging.getLogger("widetable.server")

MAX_BODY = 5 * 2**20
DEFAULT_INSTANCE = "widetable"
IDLE_TIMEOUT = 60.0  # seconds a keep-alive connection may sit idle
WORKERS = 4  # threads for requests that may wait (see service.py)
BACKLOG = 128
POLL = 0.05  # seconds between checks while draining


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop if it is installed (its loop costs less per request than
    asyncio's pure-Python one), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=BACKLOG)


def _listen_unix(path: str) -> socket.socket:
    """A listening unix socket at ``path``, readable and writable by this user only. A
    socket file left by a server that is gone is replaced; one a live server listens
    on is not (OSError)."""
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise OSError(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)  # left behind by a server that is gone
        else:
            raise OSError(f"a server is already listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)  # the file is created 0600: only this user may connect
        try:
            sock.bind(path)
        except OSError as exc:
            raise OSError(f"cannot listen on the unix socket {path}: {exc.strerror or exc}") from None
        finally:
            os.umask(old)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _tls(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    if certfile is None:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


class WidetableServer:
    """Serves one Database. ``serve_forever()`` in one thread, ``drain()`` from another."""

    def __init__(self, db: Database, keys: KeyStore, host: str = "127.0.0.1", port: int = 8080,
                 instance: str = DEFAULT_INSTANCE, certfile: str | None = None,
                 keyfile: str | None = None, access_log: bool = False,
                 capacity: int | None = None, idle_timeout: float = IDLE_TIMEOUT,
                 workers: int = WORKERS, unix_socket: str | None = None,
                 busy_poll: int = 0) -> None:
        """``capacity``: operations per second per partition, set on every table now and
        on tables created later (0 turns throttling off); None leaves tables as they are.
        Binds ``host:port`` (port 0 picks a free one), and ``unix_socket`` if given (a
        path: local clients skip TCP; no TLS there, the file is the owner's only);
        raises OSError if it cannot. ``busy_poll``: microseconds the loop polls for the
        next request after each answer before it sleeps (``busypoll.py``); off by
        default here, as this server may share its process, and its GIL, with the
        caller (``widetable serve`` polls for 200 µs)."""
        if capacity is not None and (type(capacity) is not int or capacity < 0):
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        check_window(busy_poll)
        if not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds, got {idle_timeout!r}")
        self._ssl = _tls(certfile, keyfile)
        if capacity is not None:
            tables.apply_capacity(db, capacity)  # before the port opens: no request sees the old
        self.socket = _listen(host, port)
        self.server_address = (host, self.socket.getsockname()[1])
        try:
            self.unix = _listen_unix(unix_socket) if unix_socket is not None else None
        except BaseException:
            self.socket.close()
            raise
        self.unix_path = None if unix_socket is None else os.path.abspath(unix_socket)
        self._unix_inode = None if unix_socket is None else os.stat(unix_socket).st_ino
        self.db = db
        self.keys = keys
        self.instance = instance
        self.capacity = capacity
        self.tls = certfile is not None
        self.idle_timeout = idle_timeout
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="widetable-worker")
        self.service = TablestoreService(db, keys, instance, capacity, self.pool, access_log,
                                         busy_poll)
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._finished = threading.Event()
        self._grace = 30.0
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def endpoint(self) -> str:
        host = self.server_address[0]
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def unix_endpoint(self) -> str | None:
        """``unix://<path>`` for ``widetable.connect``, if the server listens on a unix socket."""
        return None if self.unix_path is None else f"unix://{self.unix_path}"

    @property
    def draining(self) -> bool:
        return self.service.draining

    def serve_forever(self) -> None:
        """Serve on this thread until ``drain()`` is called (from another thread)."""
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                runner.run(self._serve())
        finally:
            self._finished.set()

    def drain(self, grace: float = 30.0) -> None:
        """Stop accepting, finish in-flight requests (up to ``grace`` s), close the store.

        Returns once the store is closed. Any thread but the loop's."""
        with self._lock:
            self.service.draining = True
            self._grace = grace
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                pass  # the loop has already stopped
            self._finished.wait()
        else:
            self._close_listeners()
        if self.service.jobs:
            log.warning("closing the store with %d requests still running", self.service.jobs)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.db.close()

    # -- on the loop --------------------------------------------------------------------

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.service.draining:
                self._close_listeners()
                return
            self._loop, self._wake = loop, asyncio.Event()
        self.service.loop = self.service.poll.loop = loop
        servers = [await loop.create_server(self._connection, sock=self.socket, ssl=self._ssl,
                                            backlog=BACKLOG)]
        if self.unix is not None:
            servers.append(await loop.create_unix_server(self._connection, sock=self.unix,
                                                         backlog=BACKLOG))
        self._sweeper = loop.call_later(self._sweep_every, self._sweep)
        try:
            await self._wake.wait()
        finally:
            self._sweeper.cancel()
            for server in servers:
                server.close()  # stops accepting; open connections stay
            self._unlink()
            await self._finish_in_flight()

    def _close_listeners(self) -> None:
        self.socket.close()
        if self.unix is not None:
            self.unix.close()
            self._unlink()

    def _unlink(self) -> None:
        """Remove the unix socket's file, if it is still ours."""
        path = self.unix_path
        if path is None or self.unix is None:
            return
        try:
            if os.stat(path).st_ino == self._unix_inode:
                os.unlink(path)
        except OSError:
            pass

    def _connection(self) -> Connection:
        return Connection(self.service, self._connections, MAX_BODY)

    @property
    def _sweep_every(self) -> float:
        return min(1.0, self.idle_timeout / 4)

    def _sweep(self) -> None:
        """Close connections idle (or stuck mid-request) for ``idle_timeout`` seconds."""
        cutoff = time.monotonic() - self.idle_timeout
        for conn in list(self._connections):
            if not conn.busy and conn.last_active < cutoff:
                conn.close()
        self._sweeper = self._loop.call_later(  # type: ignore[union-attr]
            self._sweep_every, self._sweep)

    async def _finish_in_flight(self) -> None:
        """Close idle connections, wait (up to the grace) for the rest, abort what is left."""
        deadline = time.monotonic() + self._grace
        while True:
            for conn in list(self._connections):
                if conn.idle():
                    conn.close()
            if not (self._connections or self.service.jobs) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL)
        for conn in list(self._connections):
            if conn.transport is not None:
                conn.transport.abort()
