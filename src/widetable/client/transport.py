"""The client's HTTP side: signed Tablestore requests over keep-alive connections.

One connection per thread, reused while the server keeps it open. The HTTP/1.1
exchange is written here rather than with ``http.client``: a request goes out
in one ``sendall`` (``http.client`` sends headers and body apart), and a
response's head is read in as few ``recv`` calls as it arrives in (usually one,
body included) and split once, instead of line by line through the ``email``
parser. Bodies come with ``Content-Length`` or chunked, or run to the close.

Requests are signed with V2 (HMAC-SHA1); responses are checked for their MD5
and their ``Authorization`` signature. What does not change between requests
is made once: the request head's fixed lines per API, the HMAC key state, the
date string per second. Throttling errors (``OTSServerBusy``,
``OTSPartitionUnavailable``) are retried with backoff and jitter by the
partition layer's :class:`~widetable.partition.retry.Retrier`.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import threading
import weakref
from urllib.parse import urlsplit

from .. import errors as errs
from ..errors import WidetableError
from ..partition.retry import Retrier
from ..wire.proto import pb
from ..wire.signing import DateClock, canonical_headers, content_md5, hmac_of
from . import idempotent as idem

API_VERSION = "2015-12-31"
_CLASSES: dict[str, type[WidetableError]] = {
    cls.code: cls
    for cls in (
        errs.ParameterInvalid, errs.InvalidPK, errs.ObjectNotExist, errs.ObjectAlreadyExist,
        errs.ConditionCheckFail, errs.OutOfColumnCountLimit, errs.OutOfRowSizeLimit,
        errs.ServerBusy, errs.PartitionUnavailable, errs.RowOperationConflict,
        errs.SessionNotExist, errs.NotSupported, errs.TrimmedDataAccess,
    )
}


def error_of(code: str, message: str) -> WidetableError:
    """The library's error class for ``code`` (WidetableError for codes it has no class for)."""
    cls = _CLASSES.get(code)
    if cls is None:
        return WidetableError(message, code)
    return cls(message)


MAX_LINE = 65536  # bytes of a response head (status line and headers), and of a chunk line
MAX_HEADERS = 100
_RECV = 65536  # bytes asked of one recv: recv allocates this much first, and allocations
# past malloc's mmap threshold (128 KiB) cost a mmap and a munmap (~18 µs) per call


class _Closed(Exception):
    """The server closed the connection before answering (a stale keep-alive connection)."""


class _NotSent(_Closed):
    """The request could not be sent whole: the server never had all of it, so it ran nothing."""


class _Protocol(Exception):
    """The response is not HTTP/1.x as this client reads it."""


def peer_closed(conn: _Connection) -> bool:
    """Whether an idle kept-alive connection has something to read: its server closed it
    (or, with TLS, sent its close notice), since nothing else comes unasked. A request
    about to go out on it would be lost, so it is dropped first: that request then
    provably never left. One ``poll`` of the socket, with no wait."""
    sock = conn.sock
    if sock is None:
        return True
    if conn._buf:
        return True
    try:
        ready = _poll_in(sock.fileno())
    except (OSError, ValueError):
        return True
    return ready


if hasattr(select, "poll"):
    def _poll_in(fd: int) -> bool:
        p = select.poll()
        p.register(fd, select.POLLIN)
        return bool(p.poll(0))
else:  # pragma: no cover - Windows
    def _poll_in(fd: int) -> bool:
        return bool(select.select([fd], [], [], 0)[0])


def _kernel_timeout(sock: socket.socket, timeout: float | None) -> None:
    """Make ``sock`` blocking, with its timeout kept by the kernel (SO_RCVTIMEO,
    SO_SNDTIMEO). A Python timeout would ``poll`` before every send and receive:
    two more system calls, and two more GIL handoffs, per call. A call that times
    out raises ``BlockingIOError`` (see ``unreachable``)."""
    sock.settimeout(None)
    if timeout is None:  # no limit: wait as long as it takes
        return
    seconds = int(timeout)
    tv = struct.pack("ll", seconds, int((timeout - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def unreachable(endpoint: str, exc: OSError, timeout: float) -> WidetableError:
    """The error for a failed exchange with ``endpoint``."""
    if isinstance(exc, (BlockingIOError, TimeoutError)):
        what = f"no answer within {timeout:g} s"
    else:
        what = str(exc)
    return WidetableError(f"cannot reach {endpoint}: {what}", errs.INTERNAL_SERVER_ERROR)


class _Connection:
    """One keep-alive HTTP/1.1 connection: ``exchange`` sends a request and reads its answer."""

    __slots__ = ("_authority", "_buf", "_host", "_port", "_timeout", "_tls", "quiet", "recv_view",
                 "rtt", "sock")

    def __init__(self, host: str, port: int | None, timeout: float,
                 tls: ssl.SSLContext | None, authority: str) -> None:
        """``port`` None: ``host`` is the path of a unix socket."""
        self._host, self._port, self._timeout, self._tls = host, port, timeout, tls
        self._authority = authority
        self.sock: socket.socket | None = None
        self._buf = bytearray()  # bytes received and not read yet
        self.recv_view: memoryview | None = None  # widetable's own protocol's receive buffer
        self.rtt = 0.0  # seconds until an answer's first bytes, a moving average (own protocol)
        self.quiet = 0.0  # no busy polling for answers until then (``perf_counter``)

    def _open(self) -> None:
        if self._port is None:  # a unix socket's path
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self._timeout)
                sock.connect(self._host)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((self._host, self._port), self._timeout)
        try:
            if self._port is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
            else:
                _kernel_timeout(sock, self._timeout)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._buf = bytearray()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def exchange(self, request: bytes) -> tuple[int, str, dict[str, str], bytes]:
        """``(status, reason, headers by lower-cased name, body)`` of one request
        (its head and body, as one buffer)."""
        if self.sock is None:
            self._open()
        try:
            self.sock.sendall(request)  # type: ignore[union-attr]
        except OSError as exc:  # the server did not take it all: it never ran
            raise _NotSent(exc) from None
        while True:
            status, reason, version, got = self._head()
            if status >= 200 or status == 101 and "upgrade" in got:
                break  # other 1xx (100 Continue): informational, the answer follows
        if status == 101:  # the connection now speaks the protocol the request asked for
            return status, reason, got, b""
        close = got.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        if "chunked" in got.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in got:
            try:
                length = int(got["content-length"])
            except ValueError:
                raise _Protocol(f"bad Content-Length {got['content-length'][:32]!r}") from None
            data = self._read(length) if length > 0 else b""
        else:
            data = self._read_to_close()
            close = True
        if close:
            self.close()
        return status, reason, got, data

    def _more(self) -> bool:
        chunk = self.sock.recv(_RECV)  # type: ignore[union-attr]
        if not chunk:
            return False
        self._buf += chunk
        return True

    def _head(self) -> tuple[int, str, str, dict[str, str]]:
        """The next status line and headers (names lower-cased; the first of a repeated
        name wins)."""
        buf = self._buf
        start = 0
        while True:
            end = buf.find(b"\r\n\r\n", start)
            if end >= 0:
                skip = 4
                break
            end = buf.find(b"\n\n", start)  # bare LF line ends, as http.client allows
            if end >= 0:
                skip = 2
                break
            if len(buf) > MAX_LINE:
                raise _Protocol("the response head is too long")
            start = max(0, len(buf) - 3)
            if not self._more():
                if not buf:
                    raise _Closed
                raise _Protocol("the response ended inside its headers")
        lines = buf[:end].decode("iso-8859-1").split("\n")
        del buf[:end + skip]
        if len(lines) > MAX_HEADERS + 1:
            raise _Protocol("too many response headers")
        version, _, rest = lines[0].rstrip("\r").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise _Protocol(f"bad status line {lines[0][:64]!r}")
        got: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise _Protocol(f"bad response header line {line[:64]!r}")
            got.setdefault(name.strip().lower(), value.strip())
        return int(code), reason, version, got

    def _read(self, n: int) -> bytes:
        buf = self._buf
        while len(buf) < n:
            if not self._more():
                raise _Protocol("the response body ended early")
        if len(buf) == n:
            self._buf = bytearray()
            return bytes(buf)
        data = bytes(buf[:n])
        del buf[:n]
        return data

    def _readline(self) -> bytes:
        buf = self._buf
        while True:
            end = buf.find(b"\n")
            if end >= 0:
                line = bytes(buf[:end + 1])
                del buf[:end + 1]
                return line
            if len(buf) > MAX_LINE:
                raise _Protocol("a chunk line is too long")
            if not self._more():
                line = bytes(buf)
                buf.clear()
                return line

    def _read_to_close(self) -> bytes:
        while self._more():
            pass
        data = bytes(self._buf)
        self._buf = bytearray()
        return data

    def _chunked(self) -> bytes:
        parts = []
        while True:
            line = self._readline()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Protocol(f"bad chunk size line {line[:32]!r}") from None
            if size == 0:
                while self._readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self._read(size + 2)[:size])


class _Held:
    """A thread's connection, held in its thread-local: when the thread ends, the
    holder goes, and its finalizer closes the connection."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn


class ThreadConnections:
    """One connection per thread (``get`` / ``keep``), and all of them for ``close``. A
    thread's connection is closed and let go when the thread ends."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: set[_Connection] = set()
        self._lock = threading.Lock()

    def get(self) -> _Connection | None:
        held = getattr(self._local, "held", None)
        return None if held is None else held.conn

    def keep(self, conn: _Connection) -> None:
        """``conn`` is this thread's connection from now on."""
        held = _Held(conn)
        weakref.finalize(held, self._release, conn)
        self._local.held = held
        with self._lock:
            self._all.add(conn)

    def _release(self, conn: _Connection) -> None:
        conn.close()
        with self._lock:
            self._all.discard(conn)

    def drop(self, conn: _Connection) -> None:
        """Close this thread's ``conn``; the thread's next call opens another."""
        self._local.held = None
        self._release(conn)

    def __len__(self) -> int:
        return len(self._all)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


class Transport:
    """Sends one API call and returns the response body, or raises its WidetableError."""

    def __init__(self, endpoint: str, access_key_id: str, access_key_secret: str,
                 instance: str, timeout: float = 30.0, retrier: Retrier | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        try:
            parts = urlsplit(endpoint)
            parts.port  # noqa: B018 - raises ValueError for a port that is not one
        except (ValueError, TypeError, AttributeError):
            parts = None
        unix = (parts is not None and parts.scheme == "unix" and not parts.netloc
                and parts.path.startswith("/"))
        if parts is None or not unix and (parts.scheme not in ("http", "https") or not parts.hostname):
            raise errs.ParameterInvalid(f"endpoint {endpoint!r} must look like http://host:port "
                                        "or unix:///path/of/the/socket")
        self.endpoint = endpoint
        self._https = parts.scheme == "https"
        self._port: int | None
        if unix:  # HTTP over the server's unix socket (widetable serve --socket)
            self._host, self._port, self._authority = parts.path, None, "localhost"
        else:
            self._host = parts.hostname
            self._port = parts.port or (443 if self._https else 80)
            default_port = 443 if self._https else 80
            host = f"[{self._host}]" if ":" in self._host else self._host
            self._authority = host if self._port == default_port else f"{host}:{self._port}"
        self._id = access_key_id.strip()
        self._instance = instance.strip()
        self._hmac = hmac_of(access_key_secret.encode("utf-8"), "sha1")  # requests, answers
        self._clock = DateClock()
        self._heads: dict[str, tuple[str, str]] = {}  # api -> fixed head lines, signed text
        self._timeout = timeout
        self._ssl = (ssl_context or ssl.create_default_context()) if self._https else None
        self._conns = ThreadConnections()
        self.retrier = retrier or Retrier()

    def call(self, api: str, request, idempotent: bool | None = None) -> bytes:
        """POST ``request`` (a message, or its serialized bytes) to ``/api``; throttling
        errors are retried. ``idempotent``: whether the call may run twice (None: as the
        API is, ``idempotent.IDEMPOTENT_APIS``); a call that may not and loses its
        connection after it was sent raises ``OutcomeUnknown`` (client/idempotent.py)."""
        body = request if type(request) is bytes else request.SerializeToString()
        if idempotent is None:
            idempotent = api in idem.IDEMPOTENT_APIS
        return self.retrier.call(self._send, api, body, idempotent)

    def _connection(self) -> _Connection:
        conn = self._conns.get()
        if conn is None:
            conn = _Connection(self._host, self._port, self._timeout, self._ssl, self._authority)
            self._conns.keep(conn)
        return conn

    def _request(self, api: str, body: bytes) -> bytes:
        """The request's head (with its V2 signature) and body, as one buffer.

        The signed text is ``auth.string_to_sign``: the path, then every x-ots-* header
        but the signature as ``name:value``, sorted, each ending in a newline.
        """
        fixed = self._heads.get(api)
        if fixed is None:
            fixed = self._heads[api] = (
                (f"POST /{api} HTTP/1.1\r\nHost: {self._authority}\r\n"
                 f"Content-Type: application/x-protobuf\r\nx-ots-apiversion: {API_VERSION}\r\n"
                 f"x-ots-accesskeyid: {self._id}\r\nx-ots-instancename: {self._instance}\r\n"),
                (f"/{api}\nPOST\n\nx-ots-accesskeyid:{self._id}\nx-ots-apiversion:{API_VERSION}\n"
                 "x-ots-contentmd5:"),
            )
        md5 = content_md5(body)
        date = self._clock.now()[0]
        signature = self._hmac.sign(
            f"{fixed[1]}{md5}\nx-ots-date:{date}\nx-ots-instancename:{self._instance}\n")
        head = (f"{fixed[0]}Content-Length: {len(body)}\r\nx-ots-date: {date}\r\n"
                f"x-ots-contentmd5: {md5}\r\nx-ots-signature: {signature}\r\n\r\n")
        return head.encode("latin-1") + body

    def _send(self, api: str, body: bytes, idempotent: bool = True) -> bytes:
        request = self._request(api, body)
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            if reused and not idempotent and peer_closed(conn):
                conn.close()  # closed while idle: this request would be lost unsent
                reused = False
            try:
                if conn.sock is None:
                    conn._open()
            except OSError as exc:
                conn.close()
                raise unreachable(self.endpoint, exc, self._timeout) from None
            try:
                status, reason, got, data = conn.exchange(request)
                break
            except _NotSent:  # the server never had the whole request: safe to send again
                conn.close()
                if not reused or attempt:
                    raise WidetableError(f"the server at {self.endpoint} closed the connection",
                                         errs.INTERNAL_SERVER_ERROR) from None
            except (_Closed, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not idempotent:
                    raise idem.outcome_unknown(api, self.endpoint,
                                               "the server closed the connection") from None
                if not reused or attempt:
                    raise WidetableError(f"the server at {self.endpoint} closed the connection",
                                         errs.INTERNAL_SERVER_ERROR) from None
            except _Protocol as exc:
                conn.close()
                raise WidetableError(f"{api}: the server at {self.endpoint} answered outside "
                                     f"HTTP/1.1: {exc}", errs.INTERNAL_SERVER_ERROR) from None
            except OSError as exc:
                conn.close()
                if not idempotent:
                    raise idem.outcome_unknown(
                        api, self.endpoint, unreachable(self.endpoint, exc, self._timeout).message
                    ) from None
                raise unreachable(self.endpoint, exc, self._timeout) from None
        if got.get("x-ots-contentmd5") != content_md5(data):
            raise WidetableError(f"{api}: the response's MD5 does not match its body",
                                 errs.INTERNAL_SERVER_ERROR)
        if 200 <= status < 300:
            self._check_signature(api, got)
            return data
        try:
            error = pb.Error.FromString(data)
        except Exception:  # noqa: BLE001 - any undecodable body is the same failure
            raise WidetableError(f"{api}: HTTP {status} {reason}",
                                 errs.INTERNAL_SERVER_ERROR) from None
        raise error_of(error.code, error.message)

    def _check_signature(self, api: str, headers: dict[str, str]) -> None:
        """``Authorization: OTS <id>:<signature>`` over the response's x-ots-* headers
        (``auth.sign_response``)."""
        signature = self._hmac.sign(f"{canonical_headers(headers)}\n/{api}")
        expected = f"OTS {self._id}:{signature}"
        if headers.get("authorization", "") != expected:
            raise WidetableError(f"{api}: the response is not signed by the server holding "
                                 "this access key", errs.INTERNAL_SERVER_ERROR)

    def close(self) -> None:
        self._conns.close()
