"""A gRPC server on the project's own event loop: one listening socket (TLS optional,
ALPN ``h2``), HTTP/2 connections (``rpc.GrpcConnection``), a graceful stop.

Threads: ``serve_forever()`` runs its event loop (uvloop if installed) on the calling
thread; every connection's frames and the inline calls run there, the pooled calls on
``pool``. ``stop(grace)`` is called from another thread.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading

from ..core.listen import BACKLOG, listen_tcp, loop_factory
from .rpc import GrpcConnection, Service

log = logging.getLogger("widetable.server.http2")

POLL = 0.02  # seconds between checks while stopping


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server TLS context offering HTTP/2 (ALPN ``h2``), as gRPC clients require."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    ctx.set_alpn_protocols(["h2"])
    return ctx


class GrpcServer:
    """Serves ``service`` on ``host:port``. Bound at construction (port 0 picks a free one;
    OSError naming the address if it cannot bind); ``serve_forever()`` on one thread,
    ``stop()`` from another."""

    def __init__(self, service: Service, pool, host: str = "127.0.0.1", port: int = 0,
                 tls: ssl.SSLContext | None = None, max_message: int = 4 * 2**20,
                 what: str = "gRPC") -> None:
        self.service = service
        self.pool = pool
        self.tls = tls
        self.max_message = max_message
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.socket: socket.socket = listen_tcp(host, port)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen for {what} on {address}: "
                          f"{exc.strerror or exc}") from None
        self.port = self.socket.getsockname()[1]
        self.connections: set = set()
        self.jobs = [0]  # calls on the pool
        self._lock = threading.Lock()
        self._state = "bound"  # -> "serving" -> "stopped"
        self._grace = 5.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopped = threading.Event()

    def _connection(self) -> GrpcConnection:
        return GrpcConnection(self.service, self.pool, self.max_message, self.connections,
                              self.jobs)

    def serve_forever(self) -> None:
        """Serve on this thread until ``stop()``."""
        with self._lock:
            if self._state != "bound":
                return
            self._state = "serving"
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                runner.run(self._serve())
        finally:
            self.socket.close()
            self._stopped.set()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        with self._lock:
            stopping = self._state == "stopped"
            self._loop, self._wake = loop, wake
        if stopping:
            return
        server = await loop.create_server(self._connection, sock=self.socket, ssl=self.tls,
                                          backlog=BACKLOG)
        try:
            await wake.wait()
        finally:
            server.close()  # no new connections; the open ones go on
            await self._finish_in_flight(loop)

    async def _finish_in_flight(self, loop: asyncio.AbstractEventLoop) -> None:
        """GOAWAY on every connection; wait (up to the grace) for their streams to end;
        abort what is left."""
        deadline = loop.time() + self._grace
        for conn in list(self.connections):
            conn.goaway()
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(POLL)
        for conn in list(self.connections):
            conn.abort()
        if self.jobs[0]:
            log.warning("stopped with %d calls still running on the pool", self.jobs[0])

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight calls finish (up to ``grace`` seconds), then close
        every connection. Any thread but the server's; returns once it has stopped."""
        with self._lock:
            state, self._state = self._state, "stopped"
            self._grace = grace
            loop, wake = self._loop, self._wake
        if state == "bound":  # never served: close the listener here
            self.socket.close()
            self._stopped.set()
            return
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                pass  # the loop has already closed
        self._stopped.wait()
