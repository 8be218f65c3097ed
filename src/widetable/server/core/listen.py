"""The listening sockets and the event loop's implementation: TCP (optionally TLS), and
a unix socket for local clients."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import stat
from collections.abc import Callable

BACKLOG = 128


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop if it is installed (its loop costs less per request than
    asyncio's pure-Python one), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def listen_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=BACKLOG)


def listen_unix(path: str) -> socket.socket:
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


def tls_context(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    if certfile is None:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile, keyfile)
    return ctx
