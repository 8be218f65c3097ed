"""HTTP/1.1 framing for ``widetable serve``: one :class:`Connection` (an asyncio
``Protocol``) per client connection, all on the server's event-loop thread.

What a request may look like; anything else is answered (400, 413, 431, or
505 for HTTP/2 and later) and the connection closed::

    request      = request-line *( header CRLF ) CRLF body
    request-line = method SP target SP ( "HTTP/1.1" | "HTTP/1.0" ) CRLF
    header       = name ":" [ SP / HTAB ] value [ SP / HTAB ]
                   ; name without surrounding space, no folded (obsolete) lines, no bare LF
    body         = exactly Content-Length bytes (0 if absent); chunked is refused,
                   as are repeated Content-Length headers that differ

* Limits: the request line and headers 64 KiB and 100 headers (431), the body
  5 MB (413, refused from ``Content-Length`` before any of it is read).
* Keep-alive: HTTP/1.1 unless ``Connection: close``; HTTP/1.0 only with
  ``Connection: keep-alive``. A connection's requests are answered in order,
  one at a time; pipelined requests wait in its buffer.
* A request whose body has not all arrived with its head is checked from its head
  first (``Service.admit``: method, identity, signature; the signature covers the
  body's MD5): a refused one is answered and the connection closed, its body
  unread. ``Expect: 100-continue`` gets ``100 Continue`` only after that check.
* A client that half-closes (shuts down its sending side) still gets, over
  plain TCP, an answer to every whole request it sent before; then the
  connection closes.
* Back pressure: reading pauses while a request is served and more than
  256 KiB wait behind it, or while the transport's write buffer is full.

The connection knows nothing of Tablestore: it hands each :class:`Request` to
its ``Service`` (``handle``; a framing error goes to ``reject``) and sends the
bytes the service gives :meth:`Connection.respond`.
"""

from __future__ import annotations

import time
from typing import Protocol

from ..core.connection import FramedConnection
from ..core.dispatch import Dispatcher

MAX_HEAD = 65536  # bytes of the request line and headers
MAX_HEADERS = 100
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Request:
    """One parsed request; ``headers`` by lower-cased name (the first of repeated names)."""

    __slots__ = ("body", "headers", "keep_alive", "method", "target", "verified", "version")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str],
                 keep_alive: bool) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.keep_alive = keep_alive
        self.body = b""
        self.verified = None  # who signed it, once checked before its body was read


class BadRequest(Exception):
    """A request refused before it is handed on (it cannot be framed, or its head fails
    the service's checks): its status and why. The connection closes after it."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code  # the Tablestore error code, if not the status's usual one


class Service(Protocol):
    def admit(self, request: Request) -> None:
        """Check a request's head before its body is read; raise BadRequest to refuse it."""

    def handle(self, conn: Connection, request: Request) -> None:
        """Answer ``request`` with one ``conn.respond``, now or later (from the loop thread)."""

    def reject(self, conn: Connection, error: BadRequest) -> None:
        """Answer a request that could not be framed (``conn.respond(..., close=True)``)."""


def parse_head(head: str) -> Request:
    """The request line and headers (``head``, latin-1, without the final CRLF CRLF)."""
    lines = head.split("\r\n")
    count = len(lines) - 1
    if head.count("\n") != count:
        raise BadRequest(400, "a bare LF in the request head; lines end with CRLF")
    if count > MAX_HEADERS:
        raise BadRequest(431, f"more than {MAX_HEADERS} headers")
    method, target, version, keep_alive = _request_line(lines[0])
    headers: dict[str, str] = {}
    for line in lines[:0:-1]:  # last to first: the first of repeated names wins
        name, colon, value = line.partition(":")
        if not colon or not name or name.strip() != name:  # also a folded line: " name"
            raise BadRequest(400, f"bad header line {line[:64]!r}")
        name, value = name.lower(), value.strip(" \t")
        if name == "content-length":
            later = headers.get(name)
            if later is not None and later != value:
                # Which one frames the body? A proxy in front may have picked the other,
                # and the rest of the body would then run as a request of its own
                # (request smuggling): refuse, and close (RFC 9112 section 6.3).
                raise BadRequest(400, f"conflicting Content-Length values {value[:32]!r} "
                                      f"and {later[:32]!r}")
        headers[name] = value
    connection = headers.get("connection")
    if connection is not None:
        connection = connection.lower()
        if connection == "close":
            keep_alive = False
        elif connection == "keep-alive":
            keep_alive = True
    return Request(method, target, version, headers, keep_alive)


def _request_line(line: str) -> tuple[str, str, str, bool]:
    """``(method, target, version, keep-alive by default)`` of a request line."""
    words = line.split(" ")
    if len(words) != 3 or not words[0] or not words[1]:
        raise BadRequest(400, f"bad request line {line[:64]!r}")
    method, target, version = words
    if version == "HTTP/1.1":
        return method, target, version, True
    if version == "HTTP/1.0":
        return method, target, version, False
    if version.startswith("HTTP/") and version[5:6].isdigit() and version[5:6] != "0":
        raise BadRequest(505, f"HTTP version {version[:16]!r} is not supported; use HTTP/1.1")
    raise BadRequest(400, f"bad request line {line[:64]!r}")


def body_length(headers: dict[str, str], limit: int) -> int:
    """The body's length from ``Content-Length`` (0 without one), at most ``limit``."""
    if "transfer-encoding" in headers:
        raise BadRequest(400, "chunked bodies are not accepted; send Content-Length")
    raw = headers.get("content-length")
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest(400, f"Content-Length {raw[:32]!r} is not a number")
    length = int(raw)
    if length > limit:
        raise BadRequest(413, f"the request body of {length} bytes is over the {limit} byte limit")
    return length


class Connection(FramedConnection):
    """One client connection: frames HTTP requests, hands them to the service, writes answers."""

    def __init__(self, service: Service, core: Dispatcher, connections: set[Connection],
                 max_body: int) -> None:
        super().__init__(service, core, connections)
        self.max_body = max_body
        self._pending: tuple[Request, int, int] | None = None  # a head whose body is arriving
        self._tls = False

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        self._tls = transport.get_extra_info("sslcontext") is not None
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer) or "unix"
        if not self.core.room():
            # Over the cap: refused at once, before a byte is read; the SDKs retry it.
            self.busy = True
            self.service.reject(self, BadRequest(
                503, f"the server has its maximum of {self.core.max_connections} "
                     f"connections open; retry later", "OTSServerBusy"))
            return
        self.connections.add(self)

    def eof_received(self) -> bool | None:
        # Not busy and not paused for writing: every whole request received has been
        # answered, and what is left in the buffer can no longer become one.
        if (self.busy or self._write_paused) and not self._tls:  # TLS cannot stay half-open
            self._eof = True
            return True  # keep the transport open to answer what came before; close after
        return None

    # -- requests ---------------------------------------------------------------------

    def _take(self) -> bool:
        try:
            request = self._next()
        except BadRequest as error:
            self.busy = True
            self._buffer = b""
            self.service.reject(self, error)
            return False
        if request is None:
            return False
        self.busy = True
        self.service.handle(self, request)
        return True

    def _next(self) -> Request | None:
        """The next whole request in the buffer, or None until more bytes arrive."""
        buffer = self._buffer
        if self._pending is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD:
                    raise BadRequest(431, f"the request head is over {MAX_HEAD} bytes")
                if b"\n\n" in buffer:  # a head ended by bare LFs: no CRLF CRLF will come
                    raise BadRequest(400, "a bare LF in the request head; lines end with CRLF")
                return None
            if end > MAX_HEAD:
                raise BadRequest(431, f"the request head is over {MAX_HEAD} bytes")
            request = parse_head(buffer[:end].decode("latin-1"))
            start = end + 4
            total = start + body_length(request.headers, self.max_body)
            if len(buffer) < total:
                # The body is still on its way: check who sent it before reading it, and
                # only then invite it (``100 Continue``). A request that arrived whole is
                # checked in ``handle``, as reading its body cost nothing more.
                self.service.admit(request)
                self._pending = (request, start, total)
                if request.headers.get("expect", "").lower() == "100-continue":
                    self.transport.write(CONTINUE)  # type: ignore[union-attr]
                return None
        else:
            request, start, total = self._pending
            if len(buffer) < total:
                return None
            self._pending = None
        request.body = bytes(buffer[start:total])
        if len(buffer) > total:
            self._buffer = buffer[total:]
            self.started = time.monotonic()  # the next request's deadline starts now
        else:
            self._buffer = b""
        return request

    def respond(self, data: bytes, close: bool = False) -> None:
        """Write one whole answer; then close, or frame the next buffered request."""
        self.last_active = time.monotonic()
        transport = self.transport
        if self.closing or transport is None or transport.is_closing():
            self.closing = True
            return
        transport.write(data)
        if close or self.core.draining:
            self.close()
            return
        self.core.poll.answered()
        self.busy = False
        if not self._pumping:  # else the pump that framed this request goes on after it
            self._pump()

    def hand_off(self, answer: bytes) -> bytes | bytearray:
        """Write ``answer`` (a ``101 Switching Protocols``) and stop framing HTTP: the
        caller gives the transport another protocol. Returns the bytes received
        after the upgrade request, which belong to that protocol. Reading or writing
        may be paused (back pressure); that protocol takes the pause over, as nothing
        here will resume it (the new protocol's ``Upgrade.switch``)."""
        self.last_active = time.monotonic()
        self.transport.write(answer)  # type: ignore[union-attr]
        self.busy = True  # for good: nothing more is framed here
        leftover, self._buffer = self._buffer, b""
        return leftover
