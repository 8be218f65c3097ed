"""gRPC over an HTTP/2 connection (gRPC's "PROTOCOL-HTTP2" rules), server side, for
unary and server-streaming methods.

A request is a POST of ``content-type: application/grpc``, its path the method, its
body one length-prefixed message (a flag byte, 0 for uncompressed, and a 4-byte
big-endian length). The answer is HEADERS (``:status 200``), length-prefixed messages as
DATA, and trailers with ``grpc-status`` and a percent-encoded ``grpc-message``; a call
that fails before it answers anything gets one HEADERS frame ("trailers-only").

* ``grpc-timeout``: the call is answered DEADLINE_EXCEEDED when it runs out (a call
  running on the pool goes on there, its answer dropped); a stream's source is closed;
* RST_STREAM from the client cancels the call the same way;
* ``grpc-encoding`` other than ``identity`` is UNIMPLEMENTED (clients send none unless
  asked to compress), and so is a compressed message;
* a request message over ``max_message`` bytes is RESOURCE_EXHAUSTED as soon as its
  length prefix arrives; an answer message over it is RESOURCE_EXHAUSTED too.

The methods come from a ``Service`` (``service.method(path)``); see ``Method``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from . import frames as F
from .connection import PULL_BUDGET, Connection, Stream
from .headers import RESPONSE, grpc_status, http_status, literal, timeout_seconds

log = logging.getLogger("widetable.server.http2")

OK, CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, \
    UNAUTHENTICATED = 0, 1, 4, 8, 12, 13, 14, 16
FLUSH_AT = 64 * 1024  # a streamed message this big is written at once, not with the rest
_OK_TRAILERS = grpc_status(OK)
_UNPULLED = object()  # the next message was not pulled yet
_ONLY = RESPONSE  # a trailers-only answer starts as every answer does
_IDENTITY = literal(b"grpc-accept-encoding", b"identity")
# headers a request may not carry (RFC 9113 §8.2.2: connection-specific)
_CONNECTION_SPECIFIC = frozenset({b"connection", b"keep-alive", b"proxy-connection",
                                  b"transfer-encoding", b"upgrade"})


@dataclass(frozen=True, slots=True)
class Method:
    """One method: ``parse(message bytes)`` -> the request (an exception becomes its
    status); ``run(request)`` -> the answer's message bytes (``streaming``: an iterable
    of them, pulled as the client takes them); ``pooled(request)``: true if it runs on
    the worker pool rather than the event loop (a streamed answer's first message is then
    made there, and the rest pulled on the loop as the client takes them)."""

    streaming: bool
    parse: Callable[[bytes], Any]
    run: Callable[[Any], Any]
    pooled: Callable[[Any], bool] | None = None


class Service(Protocol):
    def method(self, path: str) -> Method | None: ...

    def authorized(self, authorization: bytes | None) -> bool: ...

    def status(self, exc: BaseException) -> tuple[int, str]:
        """``(grpc status code, message)`` of a call's failure."""
        ...


class Head(NamedTuple):
    """What a request's headers say, checked once per header block."""

    path: str
    malformed: str  # why the headers break HTTP/2's rules ("" if they do not)
    http_status: int  # a non-gRPC request's answer (415, 405), 0 if none
    timeout: float | None
    encoding: bytes | None
    authorization: bytes | None


def parse_head(headers: list[tuple[bytes, bytes]]) -> Head:
    path = method = scheme = ctype = encoding = auth = None
    timeout: float | None = None
    regular, malformed = False, ""
    for name, value in headers:
        if name[:1] == b":":
            if regular:
                malformed = "a pseudo-header follows a regular header"
            elif name == b":path":
                path = value
            elif name == b":method":
                method = value
            elif name == b":scheme":
                scheme = value
            elif name != b":authority":
                malformed = f"pseudo-header {name[:40]!r} is not a request's"
            continue
        regular = True
        if name == b"content-type":
            ctype = value
        elif name == b"grpc-timeout":
            timeout = timeout_seconds(value)
            if timeout is None:
                malformed = f"grpc-timeout {value[:20]!r} is not a timeout"
        elif name == b"grpc-encoding":
            encoding = value
        elif name == b"authorization":
            auth = value
        elif name == b"te":
            if value != b"trailers":
                malformed = "te other than trailers"
        elif name in _CONNECTION_SPECIFIC or name.lower() != name:
            malformed = f"header {name[:40]!r} is not allowed in HTTP/2"
    if not malformed and (path is None or method is None or scheme is None or not path):
        malformed = "a request without :method, :scheme or :path"
    status = 0
    if method != b"POST":
        status = 405
    elif ctype is None or not (ctype == b"application/grpc" or ctype.startswith(
            (b"application/grpc+", b"application/grpc;"))):
        status = 415
    return Head((path or b"").decode("latin-1"), malformed, status, timeout, encoding, auth)


def _prepended(head: tuple, source) -> Iterator:
    """``head``'s messages, then ``source``'s; closing it closes ``source``."""
    try:
        yield from head
        yield from source
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


class Call:
    """A stream's call: its method, the request as it arrives, its deadline, the answer's
    source (a streamed method's messages) and its end."""

    __slots__ = ("method", "head", "body", "size", "deadline", "timer", "source", "done",
                 "trailers")

    def __init__(self, head: Head) -> None:
        self.head = head
        self.method: Method | None = None
        self.body: list[bytes] = []
        self.size = 0
        self.deadline: float | None = None
        self.timer = None
        self.source: Iterator | None = None
        self.done = False  # answered, cancelled or expired: nothing more happens
        self.trailers: bytes | None = None  # to send once the queued messages are out


class GrpcConnection(Connection):
    """An HTTP/2 connection serving ``service``'s methods (``pool``: where pooled ones
    run; ``max_message``: the largest message either way)."""

    def __init__(self, service: Service, pool: Executor, max_message: int, connections: set,
                 jobs: list) -> None:
        super().__init__(connections)
        self.service = service
        self.pool = pool
        self.max_message = max_message
        self.jobs = jobs  # [calls on the pool], shared by the server's connections

    parse_head = staticmethod(parse_head)

    # -- the request ----------------------------------------------------------------------

    def open_stream(self, s: Stream, head: Head) -> None:
        if head.malformed:
            self.reset_stream(s, F.PROTOCOL_ERROR)
            return
        call = s.call = Call(head)
        if head.http_status:
            self.send_headers(s, http_status(head.http_status), end_stream=True)
            call.done = True
            return
        if head.timeout is not None:
            call.deadline = self.loop.time() + head.timeout  # type: ignore[union-attr]
        if head.encoding is not None and head.encoding != b"identity":
            self._fail(s, UNIMPLEMENTED, f"grpc-encoding {head.encoding[:40].decode('latin-1')!r} "
                       "is not supported (only identity)", _IDENTITY)
            return
        method = self.service.method(head.path)
        if method is None:
            self._fail(s, UNIMPLEMENTED, f"method {head.path[:200]!r} is not served here")
            return
        if not self.service.authorized(head.authorization):
            self._fail(s, UNAUTHENTICATED, "missing or wrong bearer token")
            return
        call.method = method

    def stream_data(self, s: Stream, data: bytes) -> None:
        call = s.call
        if call is None or call.done:
            return
        call.body.append(data)
        call.size += len(data)
        if call.size >= 5 and len(call.body) <= 2:  # the length prefix is in: check it early
            first = call.body[0] if len(call.body[0]) >= 5 else b"".join(call.body)
            length = int.from_bytes(first[1:5], "big")
            if length > self.max_message:
                self._fail(s, RESOURCE_EXHAUSTED, f"Received message larger than max ({length} "
                           f"vs. {self.max_message})")
        elif call.size > self.max_message + 5:
            self._fail(s, RESOURCE_EXHAUSTED, f"Received message larger than max (over "
                       f"{self.max_message})")

    def stream_ended(self, s: Stream) -> None:
        call = s.call
        if call is None or call.done:
            return
        body = call.body[0] if len(call.body) == 1 else b"".join(call.body)
        call.body = []
        if len(body) < 5:
            self._fail(s, UNIMPLEMENTED if not body else INTERNAL,
                       "the request holds no message" if not body else "a truncated message")
            return
        if body[0] != 0:
            self._fail(s, INTERNAL if body[0] > 1 else UNIMPLEMENTED,
                       f"message flag {body[0]}: compressed messages are not supported")
            return
        length = int.from_bytes(body[1:5], "big")
        if length != len(body) - 5:
            self._fail(s, INTERNAL, "a truncated message" if length > len(body) - 5 else
                       "more than one request message")
            return
        self._run(s, call, body[5:])

    def stream_reset(self, s: Stream) -> None:
        call = s.call
        if call is not None and not call.done:
            self._finish(call)

    # -- running it -----------------------------------------------------------------------

    def _run(self, s: Stream, call: Call, payload: bytes) -> None:
        method = call.method
        assert method is not None
        try:
            request = method.parse(payload)
            if method.pooled is not None and method.pooled(request):
                self._submit(s, call, request)
                return
            answer = method.run(request)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            self._fail(s, *self.service.status(exc))
            return
        self._answer(s, call, answer)

    def _submit(self, s: Stream, call: Call, request) -> None:
        method, loop = call.method, self.loop
        run = ((lambda: _primed(method.run(request))) if method.streaming  # type: ignore[union-attr]
               else (lambda: method.run(request)))  # type: ignore[union-attr]
        self._arm(s, call)
        self.jobs[0] += 1

        def landed(future: Future) -> None:
            self.jobs[0] -= 1
            if call.done or self.closed:
                return
            try:
                answer = future.result()
            except Exception as exc:  # noqa: BLE001
                self._fail(s, *self.service.status(exc))
            else:
                self._answer(s, call, answer)
            self.flush()

        def done(future: Future) -> None:  # on the pool thread
            try:
                loop.call_soon_threadsafe(landed, future)  # type: ignore[union-attr]
            except RuntimeError:  # the loop has closed: the server stopped
                pass

        try:
            self.pool.submit(run).add_done_callback(done)
        except RuntimeError:  # the pool has shut down
            self.jobs[0] -= 1
            self._fail(s, UNAVAILABLE, "the server is stopping")

    def _answer(self, s: Stream, call: Call, answer) -> None:
        if not call.method.streaming:  # type: ignore[union-attr]
            if not self._one(s, call, answer):
                call.source = iter((answer,))
                self.refill(s)
        else:
            self._stream(s, call, answer)
        if not call.done:
            self._arm(s, call)

    def _stream(self, s: Stream, call: Call, answer) -> None:
        """A streamed answer. One of a single small message (a ReadRows of a row) goes out
        as a unary answer does; the rest through ``refill``."""
        source, first, error = iter(answer), None, None
        try:
            first = next(source, None)
            if first is None:
                self._finish(call)
                self.end_stream(s, _ONLY + _OK_TRAILERS)
                return
            second = next(source, None) if len(first) < FLUSH_AT else _UNPULLED
        except Exception as exc:  # noqa: BLE001
            if first is None:
                self._close_source_of(source)
                self._fail(s, *self.service.status(exc))
                return
            error, second = exc, None
        if second is None and error is None and self._one(s, call, first):
            return
        if error is not None:
            call.trailers = grpc_status(*self.service.status(error))
        head = (first,) if second is None or second is _UNPULLED else (first, second)
        call.source = _prepended(head, () if error is not None else source)
        self.refill(s)

    def _one(self, s: Stream, call: Call, message: bytes) -> bool:
        """Answer ``message`` and OK in one go (HEADERS, DATA, trailers) if it fits the
        windows and a frame; False (nothing done) if not."""
        n = len(message) + 5
        if n > s.window or n > self.window or n > self.peer_frame or s.headers_sent:
            return False
        if n - 5 > self.max_message:
            return False  # refill answers RESOURCE_EXHAUSTED
        sid = s.id
        self._out.append(b"".join((
            F.frame_header(F.HEADERS, F.END_HEADERS, sid, len(RESPONSE)), RESPONSE,
            F.frame_header(F.DATA, 0, sid, n), b"\x00", (n - 5).to_bytes(4, "big"), message,
            F.frame_header(F.HEADERS, F.END_HEADERS | F.END_STREAM, sid, len(_OK_TRAILERS)),
            _OK_TRAILERS)))
        s.window -= n
        self.window -= n
        s.headers_sent = True
        self._finish(call)
        self._closed_locally(s)
        return True

    def refill(self, s: Stream) -> None:
        """Send the source's next messages while the windows and the transport allow,
        then the trailers once it is done."""
        call = s.call
        if call is None or call.done:
            return
        sent = 0
        while True:
            if call.source is None:
                trailers = call.trailers or _OK_TRAILERS
                self._finish(call)
                if s.headers_sent:
                    self.end_stream(s, trailers)
                else:
                    self.end_stream(s, _ONLY + trailers)
                return
            if self.wait_for_room(s):
                return
            if sent >= PULL_BUDGET:  # let the loop serve others, then go on
                self.loop.call_soon(self._refill_later, s)  # type: ignore[union-attr]
                return
            try:
                message = next(call.source)
            except StopIteration:
                call.source = None
                continue
            except Exception as exc:  # noqa: BLE001
                self._close_source(call)
                call.trailers = grpc_status(*self.service.status(exc))
                continue
            if len(message) > self.max_message:
                self._close_source(call)
                call.trailers = grpc_status(RESOURCE_EXHAUSTED, f"Sent message larger than "
                                            f"max ({len(message)} vs. {self.max_message})")
                continue
            if not s.headers_sent:
                self.send_headers(s, RESPONSE)
            sent += len(message) + 5
            if not self.send_data(s, b"\x00" + len(message).to_bytes(4, "big") + message):
                return  # resumed by a WINDOW_UPDATE (``Connection._resume``)
            if len(message) >= FLUSH_AT:
                self.flush()  # the transport sees it now, and says when its buffer is full

    def _refill_later(self, s: Stream) -> None:
        if not self.closed and not s.local_closed:
            self.refill(s)
            self.flush()

    # -- the end --------------------------------------------------------------------------

    def _arm(self, s: Stream, call: Call) -> None:
        """Start the deadline's timer (only calls that outlive one ``data_received``
        need one)."""
        if call.deadline is not None and call.timer is None:
            call.timer = self.loop.call_at(call.deadline, self._expire, s)  # type: ignore[union-attr]

    def _expire(self, s: Stream) -> None:
        call = s.call
        call.timer = None
        if call.done or self.closed:
            return
        if s.offset:  # part of a message is out: the stream cannot end with a status
            self._finish(call)
            self.reset_stream(s, F.CANCEL)
        else:
            s.pending = b""
            self._fail(s, DEADLINE_EXCEEDED, "Deadline Exceeded")
        self.flush()

    def _fail(self, s: Stream, code: int, message: str, extra: bytes = b"") -> None:
        """End the call with a status (trailers-only if nothing was answered yet)."""
        call = s.call
        if call is not None:
            self._finish(call)
        if s.local_closed:
            return
        trailers = grpc_status(code, message) + extra
        self.end_stream(s, trailers if s.headers_sent else _ONLY + trailers)

    def _finish(self, call: Call) -> None:
        call.done = True
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        if call.source is not None:
            self._close_source(call)

    @classmethod
    def _close_source(cls, call: Call) -> None:
        source, call.source = call.source, None
        cls._close_source_of(source)

    @staticmethod
    def _close_source_of(source) -> None:
        close = getattr(source, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - a source that fails to close: nothing to answer
                log.exception("closing a streamed answer failed")


def _primed(answer) -> Iterator:
    """On the pool: a streamed answer with its first message made (the costly start: a
    query's planning and first batch); the rest is pulled on the loop, within the
    client's windows, so an answer of any size is never held whole. Closing it closes
    the answer."""
    source = iter(answer)
    try:
        first = next(source)
    except StopIteration:
        return iter(())
    except BaseException:
        GrpcConnection._close_source_of(source)
        raise
    return _then(first, source)


def _then(first: bytes, source: Iterator) -> Iterator:
    try:
        yield first
        yield from source
    finally:
        GrpcConnection._close_source_of(source)
