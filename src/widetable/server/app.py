"""The HTTP server: Tablestore's wire protocol over a threaded ``http.server``.

Every API is ``POST /<ApiName>`` with a protobuf body. A request is checked
in this order, and the first failure answers it without touching the store:
method and path; ``Content-Length`` (at most 5 MB); identity, instance, date
(within 15 minutes) and signature (403 ``OTSAuthFailed``); the body's MD5
(``x-ots-contentmd5``); the protobuf and PlainBuffer (400
``OTSParameterInvalid``). Then the library runs it; a
:class:`~widetable.WidetableError` becomes its code's status and an
``Error`` body. Every response carries ``x-ots-contentmd5``,
``x-ots-requestid``, ``x-ots-date``, ``x-ots-contenttype``, and, once the
caller is known, ``Authorization: OTS <id>:<signature>``.

One thread serves each connection (HTTP/1.1 keep-alive). ``drain()`` stops
accepting, lets in-flight requests finish, closes idle connections, and
closes the store.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError

from ..db import Database
from ..errors import WidetableError
from . import batch, rows, tables, txn
from .auth import KeyStore, Verified, content_md5, sign_response
from .errors import (
    METHOD_NOT_ALLOWED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_OPERATION,
    error_body,
    status_of,
    wire_message,
)
from .proto import message

log = logging.getLogger("widetable.server")

MAX_BODY = 5 * 2**20
DEFAULT_INSTANCE = "widetable"
IDLE_TIMEOUT = 60.0  # seconds a keep-alive connection may sit idle
POLL = 0.25  # seconds between checks for draining while a connection is idle

HANDLERS: dict[str, tuple[str, Callable]] = {
    "CreateTable": ("CreateTableRequest", tables.create_table),
    "ListTable": ("ListTableRequest", tables.list_table),
    "DescribeTable": ("DescribeTableRequest", tables.describe_table),
    "UpdateTable": ("UpdateTableRequest", tables.update_table),
    "DeleteTable": ("DeleteTableRequest", tables.delete_table),
    "ComputeSplitPointsBySize": (
        "ComputeSplitPointsBySizeRequest", tables.compute_split_points_by_size
    ),
    "CreateIndex": ("CreateIndexRequest", tables.create_index),
    "DropIndex": ("DropIndexRequest", tables.drop_index),
    "GetRow": ("GetRowRequest", rows.get_row),
    "PutRow": ("PutRowRequest", rows.put_row),
    "UpdateRow": ("UpdateRowRequest", rows.update_row),
    "DeleteRow": ("DeleteRowRequest", rows.delete_row),
    "GetRange": ("GetRangeRequest", rows.get_range),
    "BatchGetRow": ("BatchGetRowRequest", batch.batch_get_row),
    "BatchWriteRow": ("BatchWriteRowRequest", batch.batch_write_row),
    "StartLocalTransaction": ("StartLocalTransactionRequest", txn.start_local_transaction),
    "CommitTransaction": ("CommitTransactionRequest", txn.commit_transaction),
    "AbortTransaction": ("AbortTransactionRequest", txn.abort_transaction),
}
_REQUEST_CLASSES = {api: message(name) for api, (name, _) in HANDLERS.items()}

# APIs of the service that widetable does not serve yet: a clear error, not a 404.
LATER = {
    "Search": "search indexes", "ParallelScan": "search indexes",
    "ComputeSplits": "search indexes (use ComputeSplitPointsBySize for tables)",
    "ListSearchIndex": "search indexes", "CreateSearchIndex": "search indexes",
    "UpdateSearchIndex": "search indexes", "DeleteSearchIndex": "search indexes",
    "DescribeSearchIndex": "search indexes", "SQLQuery": "SQL",
    "ListStream": "streams", "DescribeStream": "streams", "GetShardIterator": "streams",
    "GetStreamRecord": "streams",
}


MAX_LINE = 65536  # bytes of one header line, as http.client allows
MAX_HEADERS = 100
_STATUS_LINES = {
    s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode("latin-1") for s in HTTPStatus
}


class Headers(dict):
    """A request's headers by lower-cased name (the first of repeated names wins)."""

    def get(self, name: str, default=None):  # type: ignore[override]
        return dict.get(self, name.lower(), default)


def _now_header() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a response goes out in one write; no delay for it
    server_version = "widetable"
    sys_version = ""
    server: WidetableServer

    def log_message(self, format: str, *args) -> None:
        if self.server.access_log:
            log.info("%s %s", self.address_string(), format % args)

    # -- connection loop: wait for each request, or for the server to drain ----

    def handle(self) -> None:
        self.close_connection = False
        self.server.track(self.connection, True)
        try:
            while not self.close_connection:
                if not self._wait_for_request():
                    break
                self.handle_one_request()
        finally:
            self.server.track(self.connection, False)

    def _wait_for_request(self) -> bool:
        sock = self.connection
        deadline = time.monotonic() + IDLE_TIMEOUT
        while True:
            if isinstance(sock, ssl.SSLSocket) and sock.pending():
                return True
            try:
                ready, _, _ = select.select([sock], [], [], POLL)
            except (OSError, ValueError):
                return False
            if ready:
                return True
            if self.server.draining or time.monotonic() > deadline:
                return False

    # -- request line and headers --------------------------------------------------

    def parse_request(self) -> bool:
        """``BaseHTTPRequestHandler.parse_request`` with a lean header reader: the
        standard one runs every request's headers through the ``email`` parser."""
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            try:
                if not version.startswith("HTTP/"):
                    raise ValueError
                parts = version.split("/", 1)[1].split(".")
                if len(parts) != 2 or not all(p.isdigit() and len(p) <= 10 for p in parts):
                    raise ValueError
                number = int(parts[0]), int(parts[1])
            except (ValueError, IndexError):
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version[:64]!r})")
                return False
            if number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
                                f"Invalid HTTP version ({version[:64]})")
                return False
            if number >= (1, 1):
                self.close_connection = False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({requestline[:64]!r})")
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command[:32]!r})")
                return False
        self.command, self.path = command, path
        headers = Headers()
        readline = self.rfile.readline
        while True:
            line = readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            if len(headers) >= MAX_HEADERS:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
                return False
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or line[0] in b" \t":
                self.close_connection = True  # no "name: value", or an obsolete folded line
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad header line")
                return False
            headers.setdefault(name.decode("iso-8859-1").lower(),
                               value.strip(b" \t\r\n").decode("iso-8859-1"))
        self.headers = headers  # type: ignore[assignment]
        conntype = headers.get("connection", "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        if (headers.get("expect", "").lower() == "100-continue"
                and self.request_version >= "HTTP/1.1"):
            return self.handle_expect_100()
        return True

    # -- requests ---------------------------------------------------------------

    def do_POST(self) -> None:
        server = self.server
        with server.in_flight():
            self._serve()
        if server.draining:
            self.close_connection = True

    def _reject_method(self) -> None:
        self.close_connection = True
        self._respond(405, "", error_body(METHOD_NOT_ALLOWED, "use POST /<ApiName>"), None)

    do_GET = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _reject_method

    def _serve(self) -> None:
        api = self.path.split("?", 1)[0].lstrip("/")
        verified: Verified | None = None
        try:
            body = self._read_body()
            headers = self.headers
            verified = self.server.keys.verify(api, headers, self.server.instance)
            if content_md5(body) != headers.get("x-ots-contentmd5"):
                raise WidetableError(
                    "x-ots-contentmd5 does not match the body's MD5", "OTSParameterInvalid"
                )
            out = self._dispatch(api, body)
            self._respond(200, api, out, verified)
        except WidetableError as exc:
            status = status_of(exc.code)
            self._respond(status, api, error_body(exc.code, wire_message(exc)),
                          verified if status != 403 or exc.code != "OTSAuthFailed" else None)
        except Exception as exc:  # a bug: answer 500, keep serving
            log.exception("internal error serving %s", api)
            self._respond(500, api, error_body("OTSInternalServerError", f"internal error: {exc}"),
                          verified)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise WidetableError("chunked bodies are not accepted; send Content-Length",
                                 "OTSParameterInvalid")
        raw = self.headers.get("Content-Length", "0")
        try:
            length = int(raw)
        except ValueError:
            self.close_connection = True
            raise WidetableError(f"Content-Length {raw[:32]!r} is not a number",
                                 "OTSParameterInvalid") from None
        if length < 0:
            self.close_connection = True
            raise WidetableError("Content-Length is negative", "OTSParameterInvalid")
        if length > MAX_BODY:
            self.close_connection = True  # the body is never read
            raise WidetableError(f"the request body of {length} bytes is over the "
                                 f"{MAX_BODY} byte limit", REQUEST_TOO_LARGE)
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            raise WidetableError("the request body ended early", "OTSParameterInvalid")
        return body

    def _dispatch(self, api: str, body: bytes) -> bytes:
        entry = HANDLERS.get(api)
        if entry is None:
            if api in LATER:
                raise WidetableError(f"{api} is not supported yet: widetable does not serve "
                                     f"{LATER[api]}", UNSUPPORTED_OPERATION)
            raise WidetableError(f"unknown API {api[:64]!r}", UNSUPPORTED_OPERATION)
        try:
            request = _REQUEST_CLASSES[api].FromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise WidetableError(f"malformed {api} request body: {exc}", "OTSParameterInvalid") from None
        if api == "CreateTable":
            response = tables.create_table(self.server.db, request, self.server.capacity)
        else:
            response = entry[1](self.server.db, request)
        return response.SerializeToString()

    def _respond(self, status: int, api: str, body: bytes, verified: Verified | None) -> None:
        ots = {
            "x-ots-contentmd5": content_md5(body),
            "x-ots-requestid": self.server.request_id(),
            "x-ots-date": _now_header(),
            "x-ots-contenttype": "protocol buffer",
        }
        lines = [f"{k}: {v}\r\n" for k, v in ots.items()]
        if verified is not None:
            signature = sign_response(verified.signing_key, api, ots)
            lines.append(f"Authorization: OTS {verified.access_key_id}:{signature}\r\n")
        lines.append(f"Server: widetable\r\nDate: {self.date_time_string()}\r\n"
                     f"Content-Type: application/x-protobuf\r\nContent-Length: {len(body)}\r\n")
        if self.close_connection or self.server.draining:
            lines.append("Connection: close\r\n")
            self.close_connection = True
        lines.append("\r\n")
        if self.server.access_log:
            self.log_request(status, len(body))
        # Status line, headers and body in one write: one segment for a small response.
        head = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} Unknown\r\n".encode()
        try:
            self.wfile.write(b"".join((head, "".join(lines).encode("latin-1"), body)))
        except OSError:
            self.close_connection = True  # the client went away


class _InFlight:
    __slots__ = ("server",)

    def __init__(self, server: WidetableServer) -> None:
        self.server = server

    def __enter__(self) -> None:
        with self.server._cond:
            self.server._busy += 1

    def __exit__(self, *exc: object) -> None:
        with self.server._cond:
            self.server._busy -= 1
            self.server._cond.notify_all()


class WidetableServer(ThreadingHTTPServer):
    """Serves one Database. ``serve_forever()`` in one thread, ``drain()`` from another."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, db: Database, keys: KeyStore, host: str = "127.0.0.1", port: int = 8080,
                 instance: str = DEFAULT_INSTANCE, certfile: str | None = None,
                 keyfile: str | None = None, access_log: bool = False,
                 capacity: int | None = None) -> None:
        """``capacity``: operations per second per partition, set on every table now and
        on tables created later (0 turns throttling off); None leaves tables as they are."""
        if capacity is not None and (type(capacity) is not int or capacity < 0):
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        if capacity is not None:
            tables.apply_capacity(db, capacity)  # before the port opens: no request sees the old
        super().__init__((host, port), Handler)
        self.db = db
        self.capacity = capacity
        self.keys = keys
        self.instance = instance
        self.access_log = access_log
        self.draining = False
        self.tls = certfile is not None
        if certfile is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)
        self._cond = threading.Condition()
        self._busy = 0
        self._connections: set = set()
        self._ids = itertools.count(1)
        self._id_prefix = os.urandom(4).hex()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def endpoint(self) -> str:
        host = self.server_address[0]
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def request_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids):012x}"

    def in_flight(self) -> _InFlight:
        return _InFlight(self)

    def track(self, conn: socket.socket, opened: bool) -> None:
        with self._cond:
            if opened:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)
            self._cond.notify_all()

    def handle_error(self, request, client_address) -> None:
        # A connection that broke mid-request (reset, TLS failure): log it, keep serving.
        log.debug("connection from %s failed", client_address, exc_info=True)  # noqa: LOG014

    def drain(self, grace: float = 30.0) -> None:
        """Stop accepting, finish in-flight requests (up to ``grace`` s), close the store."""
        self.draining = True
        self.shutdown()  # returns once serve_forever has stopped accepting
        deadline = time.monotonic() + grace
        with self._cond:
            while (self._busy or self._connections) and time.monotonic() < deadline:
                self._cond.wait(POLL)
        self.server_close()
        self.db.close()
