"""The client's HTTP side: signed Tablestore requests over keep-alive connections.

One connection per thread, reused while the server keeps it open. The HTTP/1.1
exchange is written here rather than with ``http.client``: a request goes out
in one ``sendall`` (``http.client`` sends headers and body apart), and the
response's headers are split on CRLF instead of going through the ``email``
parser. Bodies come with ``Content-Length`` or chunked, or run to the close. Requests are signed with V2 (HMAC-SHA1); responses are checked for
their MD5 and their ``Authorization`` signature. Throttling errors
(``OTSServerBusy``, ``OTSPartitionUnavailable``) are retried with backoff and
jitter by the partition layer's :class:`~widetable.partition.retry.Retrier`.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from urllib.parse import urlsplit

from .. import errors as errs
from ..errors import WidetableError
from ..partition.retry import Retrier
from ..server.auth import content_md5, sign_response, sign_v2
from ..server.proto import pb

API_VERSION = "2015-12-31"
_CLASSES: dict[str, type[WidetableError]] = {
    cls.code: cls
    for cls in (
        errs.ParameterInvalid, errs.InvalidPK, errs.ObjectNotExist, errs.ObjectAlreadyExist,
        errs.ConditionCheckFail, errs.OutOfColumnCountLimit, errs.OutOfRowSizeLimit,
        errs.ServerBusy, errs.PartitionUnavailable, errs.RowOperationConflict,
        errs.SessionNotExist, errs.NotSupported,
    )
}


def error_of(code: str, message: str) -> WidetableError:
    """The library's error class for ``code`` (WidetableError for codes it has no class for)."""
    cls = _CLASSES.get(code)
    if cls is None:
        return WidetableError(message, code)
    return cls(message)


MAX_LINE = 65536
MAX_HEADERS = 100


class _Closed(Exception):
    """The server closed the connection before answering (a stale keep-alive connection)."""


class _Protocol(Exception):
    """The response is not HTTP/1.x as this client reads it."""


class _Connection:
    """One keep-alive HTTP/1.1 connection: ``exchange`` sends a request and reads its answer."""

    __slots__ = ("_authority", "_host", "_port", "_rfile", "_timeout", "_tls", "sock")

    def __init__(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None,
                 authority: str) -> None:
        self._host, self._port, self._timeout, self._tls = host, port, timeout, tls
        self._authority = authority
        self.sock: socket.socket | None = None
        self._rfile = None

    def _open(self) -> None:
        sock = socket.create_connection((self._host, self._port), self._timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._rfile = sock.makefile("rb")

    def close(self) -> None:
        sock, rfile = self.sock, self._rfile
        self.sock = self._rfile = None
        if rfile is not None:
            rfile.close()
        if sock is not None:
            sock.close()

    def exchange(self, path: str, headers: dict[str, str], body: bytes
                 ) -> tuple[int, str, dict[str, str], bytes]:
        """``(status, reason, headers by lower-cased name, body)`` of one POST."""
        if self.sock is None:
            self._open()
        first = (f"POST {path} HTTP/1.1\r\nHost: {self._authority}\r\n"
                 f"Content-Length: {len(body)}\r\nContent-Type: application/x-protobuf\r\n")
        head = "".join([first, *[f"{k}: {v}\r\n" for k, v in headers.items()], "\r\n"])
        head = head.encode("latin-1")
        self.sock.sendall(head + body)  # type: ignore[union-attr]
        rfile = self._rfile
        while True:
            line = rfile.readline(MAX_LINE + 1)  # type: ignore[union-attr]
            if not line:
                raise _Closed
            version, _, rest = line.decode("iso-8859-1").rstrip("\r\n").partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
                raise _Protocol(f"bad status line {line[:64]!r}")
            status = int(code)
            got = self._headers()
            if status >= 200:
                break  # 1xx (100 Continue): informational, the answer follows
        close = got.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        if "chunked" in got.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in got:
            try:
                length = int(got["content-length"])
            except ValueError:
                raise _Protocol(f"bad Content-Length {got['content-length'][:32]!r}") from None
            data = rfile.read(length) if length > 0 else b""  # type: ignore[union-attr]
            if len(data) != length:
                raise _Protocol("the response body ended early")
        else:
            data = rfile.read()  # type: ignore[union-attr]  # to the close
            close = True
        if close:
            self.close()
        return status, reason, got, data

    def _headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        readline = self._rfile.readline  # type: ignore[union-attr]
        for _ in range(MAX_HEADERS + 1):
            line = readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                raise _Protocol("a response header line is too long")
            if line in (b"\r\n", b"\n"):
                return out
            if not line:
                raise _Protocol("the response ended inside its headers")
            name, colon, value = line.partition(b":")
            if not colon:
                raise _Protocol(f"bad response header line {line[:64]!r}")
            out.setdefault(name.strip().decode("iso-8859-1").lower(),
                           value.strip().decode("iso-8859-1"))
        raise _Protocol("too many response headers")

    def _chunked(self) -> bytes:
        rfile = self._rfile
        parts = []
        while True:
            line = rfile.readline(MAX_LINE + 1)  # type: ignore[union-attr]
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Protocol(f"bad chunk size line {line[:32]!r}") from None
            if size == 0:
                while rfile.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):  # type: ignore[union-attr]
                    pass  # trailers
                return b"".join(parts)
            chunk = rfile.read(size + 2)  # type: ignore[union-attr]
            if len(chunk) != size + 2:
                raise _Protocol("the response body ended early")
            parts.append(chunk[:size])


class Transport:
    """Sends one API call and returns the response body, or raises its WidetableError."""

    def __init__(self, endpoint: str, access_key_id: str, access_key_secret: str,
                 instance: str, timeout: float = 30.0, retrier: Retrier | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errs.ParameterInvalid(f"endpoint {endpoint!r} must look like http://host:port")
        self.endpoint = endpoint
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        default_port = 443 if self._https else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = host if self._port == default_port else f"{host}:{self._port}"
        self._id = access_key_id
        self._secret = access_key_secret
        self._key = access_key_secret.encode("utf-8")
        self._instance = instance
        self._timeout = timeout
        self._ssl = (ssl_context or ssl.create_default_context()) if self._https else None
        self._local = threading.local()
        self._all: list[_Connection] = []
        self._lock = threading.Lock()
        self.retrier = retrier or Retrier()

    def call(self, api: str, request) -> bytes:
        """POST ``request`` to ``/api``; throttling errors are retried."""
        body = request.SerializeToString()
        return self.retrier.call(self._send, api, body)

    def _connection(self) -> _Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _Connection(self._host, self._port, self._timeout, self._ssl, self._authority)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _headers(self, api: str, body: bytes) -> dict[str, str]:
        now = datetime.datetime.now(datetime.UTC)
        headers = {
            "x-ots-date": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "x-ots-apiversion": API_VERSION,
            "x-ots-accesskeyid": self._id,
            "x-ots-instancename": self._instance,
            "x-ots-contentmd5": content_md5(body),
        }
        headers["x-ots-signature"] = sign_v2(self._secret, api, headers)
        return headers

    def _send(self, api: str, body: bytes) -> bytes:
        headers = self._headers(api, body)
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                status, reason, got, data = conn.exchange("/" + api, headers, body)
                break
            except (_Closed, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not reused or attempt:
                    raise WidetableError(f"the server at {self.endpoint} closed the connection",
                                         errs.INTERNAL_SERVER_ERROR) from None
            except _Protocol as exc:
                conn.close()
                raise WidetableError(f"{api}: the server at {self.endpoint} answered outside "
                                     f"HTTP/1.1: {exc}", errs.INTERNAL_SERVER_ERROR) from None
            except OSError as exc:
                conn.close()
                raise WidetableError(f"cannot reach {self.endpoint}: {exc}",
                                     errs.INTERNAL_SERVER_ERROR) from None
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
        auth = headers.get("authorization", "")
        ots = {k: v for k, v in headers.items() if k.startswith("x-ots-")}
        expected = f"OTS {self._id}:{sign_response(self._key, api, ots)}"
        if auth != expected:
            raise WidetableError(f"{api}: the response is not signed by the server holding "
                                 "this access key", errs.INTERNAL_SERVER_ERROR)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
