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
descriptor pool, upb classes). The transport is ``server/http2`` (gRPC over HTTP/2 on
uvloop): nothing here imports grpc.

Threads. The server runs its own event loop on the thread that calls
``serve_forever()``; requests are handled on that loop (see data.py for what runs on the
worker pool). Security: it binds loopback by default. Bigtable's emulator mode sends no
credentials, so the port is unauthenticated unless a shared ``token`` is set, which every
call must then carry as ``authorization: Bearer <token>`` metadata (give a client
credentials holding it, over TLS: ``certfile``/``keyfile``).
"""

from __future__ import annotations

from concurrent.futures import Executor

from ..http2 import GrpcServer, tls_context
from .admin import TableAdminService
from .data import DataService
from .service import Registry

MAX_MESSAGE = 256 * 2**20 + 2**20  # a request may carry a 256 MiB row, plus its framing


class BigtableServer:
    """Serves ``db.bigtable`` over gRPC. Bound at construction (port 0 picks a free one;
    OSError if it cannot bind); ``serve_forever()`` on one thread, ``stop()`` from another."""

    def __init__(self, db, pool: Executor, host: str = "127.0.0.1", port: int = 0,
                 certfile: str | None = None, keyfile: str | None = None,
                 token: str | None = None, capacity: int | None = None) -> None:
        """``pool``: where calls that may run long go (table DDL, big MutateRows).
        ``capacity``: operations per second per partition set on tables created here
        (None: left as the store's default)."""
        if (certfile is None) != (keyfile is None):
            raise ValueError("TLS needs both a certificate and a key")
        self.db = db
        self.host = host
        self.tls = certfile is not None
        self.token = token is not None
        registry = Registry(token)
        DataService(db.bigtable).register(registry)
        TableAdminService(db, capacity).register(registry)
        ctx = tls_context(certfile, keyfile) if certfile is not None else None  # type: ignore[arg-type]
        self._server = GrpcServer(registry, pool, host, port, ctx, MAX_MESSAGE,
                                  "Bigtable's gRPC API")
        self.port = self._server.port

    @property
    def endpoint(self) -> str:
        """``host:port``, as BIGTABLE_EMULATOR_HOST takes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve on this thread until ``stop()``."""
        self._server.serve_forever()

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting and finish in-flight calls (up to ``grace`` seconds). Any thread
        but the server's; returns once it has stopped."""
        self._server.stop(grace)


__all__ = ["BigtableServer"]
