"""gRPC over HTTP/2 on the project's own event loop, for the gRPC APIs the server speaks
(Bigtable's, ``server/bigtable/``).

* ``frames.py``: HTTP/2's frames and numbers;
* ``headers.py``: HPACK (decoding with the connection's table; encoding without one);
* ``connection.py``: an HTTP/2 server connection: streams, flow control, GOAWAY;
* ``rpc.py``: gRPC's rules on top (messages, status trailers, deadlines, cancellation),
  and ``Method``, what a service gives for each of its methods;
* ``server.py``: the listener, TLS with ALPN ``h2``, the loop, the graceful stop.

Why not grpcio's server: measured here, grpcio 1.85's asyncio server spent 320-620 µs of
CPU per unary call (a trivial handler answering fixed bytes); this transport spends
tens (see bench/README.md, ``bench.bigtable_grpc``). Only this package imports ``hpack``.
"""

from .rpc import Method, Service
from .server import GrpcServer, tls_context

__all__ = ["GrpcServer", "Method", "Service", "tls_context"]
