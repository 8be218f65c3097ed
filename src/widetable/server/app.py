"""The server of ``widetable serve``: one event loop, a small worker pool, graceful drain.

* ``app.py`` (this module): :class:`WidetableServer`: the listening sockets
  (bound at construction, so the port is known at once), the event loop, the
  worker pool, idle connections, drain; it puts the core and the protocols together,
  and is the only module that knows more than one protocol.
* ``core/``: what every protocol shares: ``listen.py`` (sockets, TLS, the loop),
  ``connection.py`` (a connection's buffer, back pressure, idleness),
  ``dispatch.py`` (the one rule of where a request runs, and the pool),
  ``auth.py`` (access keys, the request checks), ``calls.py`` (library calls
  more than one protocol makes).
* ``tablestore/``: Tablestore's HTTP protocol (``http.py`` framing,
  ``service.py`` checks and signed answers, one module per API family).
* ``native/``: widetable's own frames, reached by upgrading an HTTP connection.
* ``bigtable/``: Bigtable's gRPC API on its own port (``bigtable_port``), served by
  ``http2/`` (gRPC over HTTP/2) on its own thread and event loop; it shares the worker pool.

Threads. ``serve_forever()`` runs the event loop (uvloop when it is installed,
else asyncio's own) on the calling thread. Every connection's framing, checks,
decoding and most store calls run there, so the server's Python runs on one
thread with no GIL handoffs between connection threads. A pool of ``workers``
threads (4) runs the requests that may wait. ``drain()`` is called from
another thread.

Connections. At most ``max_connections`` (512) at once; one more is answered 503
``OTSServerBusy`` and closed. HTTP/1.1 keep-alive; one silent for
``idle_timeout`` seconds (60) is closed, and so is one whose request has not all
arrived ``request_timeout`` seconds (30) after its first byte. ``drain()`` stops accepting,
closes idle connections, lets in-flight requests finish (answering them with
``Connection: close``) for up to ``grace`` seconds, then closes the store.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..db import Database
from ..wire import native as native_wire
from ..wire.busypoll import check_window
from . import native
from .core.auth import KeyStore
from .core.dispatch import MAX_CONNECTIONS, Dispatcher
from .core.listen import BACKLOG, listen_tcp, listen_unix, loop_factory, tls_context
from .tablestore import tables
from .tablestore.http import Connection
from .tablestore.service import TablestoreService

log = logging.getLogger("widetable.server")

MAX_BODY = 5 * 2**20
DEFAULT_INSTANCE = "widetable"
IDLE_TIMEOUT = 60.0  # seconds a keep-alive connection may sit idle
REQUEST_TIMEOUT = 30.0  # seconds from a request's first byte to its last
WORKERS = 4  # threads for requests that may wait (see core/dispatch.py)
POLL = 0.05  # seconds between checks while draining


class WidetableServer:
    """Serves one Database. ``serve_forever()`` in one thread, ``drain()`` from another."""

    def __init__(self, db: Database, keys: KeyStore, host: str = "127.0.0.1", port: int = 8080,
                 instance: str = DEFAULT_INSTANCE, certfile: str | None = None,
                 keyfile: str | None = None, access_log: bool = False,
                 capacity: int | None = None, idle_timeout: float = IDLE_TIMEOUT,
                 workers: int = WORKERS, unix_socket: str | None = None,
                 busy_poll: int = 0, max_connections: int = MAX_CONNECTIONS,
                 request_timeout: float = REQUEST_TIMEOUT, bigtable_port: int | None = None,
                 bigtable_host: str = "127.0.0.1", bigtable_certfile: str | None = None,
                 bigtable_keyfile: str | None = None, bigtable_token: str | None = None) -> None:
        """``capacity``: operations per second per partition, set on every table now and
        on tables created later (0 turns throttling off); None leaves tables as they are.
        Binds ``host:port`` (port 0 picks a free one), and ``unix_socket`` if given (a
        path: local clients skip TCP; no TLS there, the file is the owner's only);
        raises OSError if it cannot. ``busy_poll``: microseconds the loop polls for the
        next request after each answer before it sleeps (``wire/busypoll.py``); off by
        default here, as this server may share its process, and its GIL, with the
        caller (``widetable serve`` polls for 200 µs). ``max_connections``: open client
        connections (TCP and unix socket together); one more is answered 503
        ``OTSServerBusy`` and closed. ``request_timeout``: seconds a request may take to
        arrive, from its first byte to its last; a connection still short of it then is
        closed (a client trickling bytes cannot hold it open). ``idle_timeout``: seconds
        a connection may stay silent between requests. ``bigtable_port``: also serve
        Bigtable's gRPC API there (0 picks a free one; None: not served), on
        ``bigtable_host`` (loopback by default: emulator-mode clients send no credentials),
        with TLS if ``bigtable_certfile``/``bigtable_keyfile`` are given and, if
        ``bigtable_token`` is, only to calls carrying ``authorization: Bearer <token>``."""
        if capacity is not None and (type(capacity) is not int or capacity < 0):
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        check_window(busy_poll)
        for what, seconds in (("idle_timeout", idle_timeout), ("request_timeout", request_timeout)):
            if type(seconds) not in (int, float) or not 0 < seconds < float("inf"):
                raise ValueError(f"{what} must be > 0 seconds, got {seconds!r}")
        if type(max_connections) is not int or max_connections < 1:
            raise ValueError(f"max_connections must be an int >= 1, got {max_connections!r}")
        self._ssl = tls_context(certfile, keyfile)
        if capacity is not None:
            tables.apply_capacity(db, capacity)  # before the port opens: no request sees the old
        self.socket = listen_tcp(host, port)
        self.server_address = (host, self.socket.getsockname()[1])
        try:
            self.unix = listen_unix(unix_socket) if unix_socket is not None else None
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
        self.request_timeout = request_timeout
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="widetable-worker")
        self.bigtable = None
        if bigtable_port is not None:
            from .bigtable import BigtableServer  # grpc loads only when the port is served
            try:
                self.bigtable = BigtableServer(db, self.pool, bigtable_host, bigtable_port,
                                               bigtable_certfile, bigtable_keyfile, bigtable_token,
                                               capacity)
            except BaseException:
                self._close_listeners()
                self.pool.shutdown(wait=False)
                raise
        self.core = Dispatcher(db, self.pool, busy_poll, max_connections)
        upgrades = {native_wire.API: native.upgrade(self.core)}
        self.service = TablestoreService(self.core, keys, instance, capacity, access_log, upgrades)
        self._connections: set = self.core.open
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
        return self.core.draining

    def serve_forever(self) -> None:
        """Serve on this thread until ``drain()`` is called (from another thread)."""
        # What the process made to start (modules, the store's catalog, descriptors) lives
        # as long as it does: out of the collector's sight, a full collection no longer
        # walks it (one took ~30 ms, a tenth of a ms per 100-row MutateRows amortized).
        gc.freeze()
        if self.bigtable is not None:
            threading.Thread(target=self.bigtable.serve_forever, name="widetable-bigtable",
                             daemon=True).start()
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                runner.run(self._serve())
        finally:
            self._finished.set()

    def drain(self, grace: float = 30.0) -> None:
        """Stop accepting, finish in-flight requests (up to ``grace`` s), close the store.

        Returns once the store is closed. Any thread but the loop's."""
        stopping = None
        if self.bigtable is not None:  # drains beside the Tablestore side, in the same grace
            stopping = threading.Thread(target=self.bigtable.stop, args=(grace,),
                                        name="widetable-bigtable-stop")
            stopping.start()
        with self._lock:
            self.core.draining = True
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
        if stopping is not None:
            stopping.join()
        if self.core.jobs:
            log.warning("closing the store with %d requests still running", self.core.jobs)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.db.close()

    # -- on the loop --------------------------------------------------------------------

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.core.draining:
                self._close_listeners()
                return
            self._loop, self._wake = loop, asyncio.Event()
        self.core.start(loop)
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
        return Connection(self.service, self.core, self._connections, MAX_BODY)

    @property
    def _sweep_every(self) -> float:
        return min(1.0, self.idle_timeout / 4, self.request_timeout / 4)

    def _sweep(self) -> None:
        """Close connections silent for ``idle_timeout`` seconds, and those holding part
        of a request that began ``request_timeout`` seconds ago."""
        now = time.monotonic()
        idle_since, started_before = now - self.idle_timeout, now - self.request_timeout
        for conn in list(self._connections):
            if conn.expired(idle_since, started_before):
                if conn.busy is False and conn.last_active >= idle_since:
                    log.info("closing %s: its request did not arrive within %g s",
                             conn.peer, self.request_timeout)
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
            if not (self._connections or self.core.jobs) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL)
        for conn in list(self._connections):
            if conn.transport is not None:
                conn.transport.abort()
