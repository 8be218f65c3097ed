"""Bigtable's gRPC API over the store: ``widetable serve --bigtable-port PORT``.

The official ``google-cloud-bigtable`` client works unchanged against it with
``BIGTABLE_EMULATOR_HOST=host:port`` (data client, sync and async, and the classic
``google.cloud.bigtable.Client``'s table admin).

* ``service.py``: resource names, status answers, the shared token, handler registration;
* ``data.py``: ReadRows, MutateRow(s), CheckAndMutateRow, ReadModifyWriteRow,
  SampleRowKeys, PingAndWarm;
* ``admin.py``: CreateTable ... DropRowRange, consistency tokens; instance admin as
  Google's emulator answers it (UNIMPLEMENTED).

The messages are Bigtable's own protocol definitions, from ``wire/bigtable`` (a private
descriptor pool, upb classes); only this package imports grpc on the server side.

Threads. The server runs grpc's asyncio server on its own event loop, on the thread that
calls ``serve_forever()``; requests are handled on that loop (see data.py for what runs
on the worker pool). Security: it binds loopback by default. Bigtable's emulator mode
sends no credentials, so the port is unauthenticated unless a shared ``token`` is set,
which every call must then carry as ``authorization: Bearer <token>`` metadata (give a
client credentials holding it, over TLS: ``certfile``/``keyfile``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Executor

import grpc

from .admin import TableAdminService
from .data import DataService
from .service import Registry

log = logging.getLogger("widetable.server.bigtable")

MAX_MESSAGE = 256 * 2**20 + 2**20  # a request may carry a 256 MiB row, plus its framing
OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE),
           ("grpc.max_send_message_length", MAX_MESSAGE),
           ("grpc.so_reuseport", 0)]


class BigtableServer:
    """Serves ``db.bigtable`` over gRPC. Bound at construction (port 0 picks a free one;
    OSError if it cannot bind); ``serve_forever()`` on one thread, ``stop()`` from another."""

    def __init__(self, db, pool: Executor, host: str = "127.0.0.1", port: int = 0,
                 certfile: str | None = None, keyfile: str | None = None,
                 token: str | None = None, capacity: int | None = None) -> None:
        """``pool``: where calls that may run long go (table DDL, big MutateRows).
        ``capacity``: operations per second per partition set on tables created here
        (None: left as the store's default).

        grpc's asyncio server, not its threaded one: measured here, the threaded server
        spent as much CPU per call or more (its threads contend for the GIL)."""
        if (certfile is None) != (keyfile is None):
            raise ValueError("TLS needs both a certificate and a key")
        self.db = db
        self.host = host
        self.tls = certfile is not None
        self.token = token is not None
        bt = db.bigtable
        registry = Registry(token, pool)
        DataService(bt).register(registry)
        TableAdminService(db, capacity).register(registry)
        self._loop = asyncio.new_event_loop()
        self._stopped = threading.Event()
        self._done = asyncio.Event()
        self._lock = threading.Lock()
        self._state = "bound"  # -> "serving" -> "stopped"
        self._grace = 5.0
        creds = None
        if certfile is not None:
            with open(certfile, "rb") as c, open(keyfile, "rb") as k:  # type: ignore[arg-type]
                creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        try:
            self._server, self.port = self._loop.run_until_complete(
                self._bind(registry, host, port, creds))
        except BaseException:
            self._loop.close()
            raise

    @staticmethod
    async def _bind(registry: Registry, host: str, port: int, creds):
        server = grpc.aio.server(options=OPTIONS)
        server.add_generic_rpc_handlers(registry.handlers())
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = (server.add_secure_port(address, creds) if creds is not None
                     else server.add_insecure_port(address))
        except RuntimeError as exc:
            raise OSError(f"cannot listen for Bigtable's gRPC API on {address}: {exc}") from None
        if not bound:
            raise OSError(f"cannot listen for Bigtable's gRPC API on {address}")
        return server, bound

    @property
    def endpoint(self) -> str:
        """``host:port``, as BIGTABLE_EMULATOR_HOST takes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve on this thread until ``stop()``."""
        with self._lock:
            if self._state != "bound":
                return
            self._state = "serving"
        try:
            self._loop.run_until_complete(self._run())
        finally:
            self._loop.close()
            self._stopped.set()

    async def _run(self) -> None:
        await self._server.start()
        await self._done.wait()
        await self._server.stop(self._grace)

    async def _close_unserved(self) -> None:
        await self._server.start()
        await self._server.stop(0)

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting and finish in-flight calls (up to ``grace`` seconds). Any thread
        but the server's; returns once it has stopped."""
        with self._lock:
            state, self._state = self._state, "stopped"
            self._grace = grace
        if state == "stopped":
            self._stopped.wait()
            return
        if state == "bound":  # never served: close the listener here (grpc closes the
            # listening socket of a server it started; one never started keeps it open)
            self._loop.run_until_complete(self._close_unserved())
            self._loop.close()
            self._stopped.set()
            return
        try:
            self._loop.call_soon_threadsafe(self._done.set)
        except RuntimeError:
            pass  # the loop has already closed
        self._stopped.wait()


__all__ = ["BigtableServer"]
