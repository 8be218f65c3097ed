"""The Tablestore service behind each connection: request checks, dispatch, signed answers.

Every API is ``POST /<ApiName>`` with a protobuf body (and ``GET /health`` is
answered unsigned, ``core/health.py``). A request is checked
in this order, and the first failure answers it without touching the store:
framing (``http.py``: request line, headers, ``Content-Length`` at most 5 MB);
method; identity, instance, date (within 15 minutes) and signature (403
``OTSAuthFailed``); the body's MD5 (``x-ots-contentmd5``); a read-only key's
write or DDL (403 ``OTSNoPermissionAccess``); the API name; the protobuf and
PlainBuffer (400 ``OTSParameterInvalid``). A request whose body is still on its
way is checked up to its signature from its head alone (``admit``), before a
byte of the body is read (the signature covers the body's MD5); a 500 names a
request id and no more (the log has the rest). Then the library runs
it; a :class:`~widetable.WidetableError` becomes its code's status and an
``Error`` body. Every answer carries ``x-ots-contentmd5``, ``x-ots-requestid``,
``x-ots-date``, ``x-ots-contenttype``, and, once the caller is known,
``Authorization: OTS <id>:<signature>``; it goes out in one write.

Where a request runs (inline on the loop, or on the worker pool) follows the
server's one rule (``server/core/dispatch.py``): each API's kind is in ``KINDS``.
A signed ``POST`` of an API the server was given as an upgrade (``upgrades``:
``WidetableNative``, widetable's own protocol) is answered ``101`` and the
connection handed to that protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from google.protobuf.message import DecodeError

from ...db import Database
from ...errors import WidetableError
from ...wire.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NO_PERMISSION,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_OPERATION,
    error_body,
    internal_message,
    status_of,
    wire_message,
)
from ...wire.proto import check_text, message
from ...wire.signing import DateClock, content_md5
from ..core import dispatch, health
from ..core.auth import KeyStore, Verified
from ..core.connection import Upgrade
from ..core.dispatch import Dispatcher
from . import batch, rows, search, sql, streams, tables, txn
from .http import BadRequest, Connection, Request

log = logging.getLogger("widetable.server")

# API -> its handler; the request message of API ``X`` is ``XRequest``.
HANDLERS: dict[str, Callable] = {
    "CreateTable": tables.create_table,
    "ListTable": tables.list_table,
    "DescribeTable": tables.describe_table,
    "UpdateTable": tables.update_table,
    "DeleteTable": tables.delete_table,
    "ComputeSplitPointsBySize": tables.compute_split_points_by_size,
    "CreateIndex": tables.create_index,
    "DropIndex": tables.drop_index,
    "GetRow": rows.get_row,
    "PutRow": rows.put_row,
    "UpdateRow": rows.update_row,
    "DeleteRow": rows.delete_row,
    "GetRange": rows.get_range,
    "BatchGetRow": batch.batch_get_row,
    "BatchWriteRow": batch.batch_write_row,
    "StartLocalTransaction": txn.start_local_transaction,
    "CommitTransaction": txn.commit_transaction,
    "AbortTransaction": txn.abort_transaction,
    "ListStream": streams.list_stream,
    "DescribeStream": streams.describe_stream,
    "GetShardIterator": streams.get_shard_iterator,
    "GetStreamRecord": streams.get_stream_record,
    "CreateSearchIndex": search.create_search_index,
    "DescribeSearchIndex": search.describe_search_index,
    "ListSearchIndex": search.list_search_index,
    "UpdateSearchIndex": search.update_search_index,
    "DeleteSearchIndex": search.delete_search_index,
    "Search": search.search,
    "ComputeSplits": search.compute_splits,
    "ParallelScan": search.parallel_scan,
    "SQLQuery": sql.sql_query,
}
_REQUEST_CLASSES: dict[str, Any] = {api: message(f"{api}Request") for api in HANDLERS}
UPGRADE = object()  # what decode() gives for an upgrade to another protocol

# APIs of the service that widetable does not serve yet: a clear error, not a 404.
LATER: dict[str, str] = {}

# Each API's kind of call, for the server's rule of where it runs (``core/dispatch.py``).
KINDS: dict[str, int] = dict.fromkeys(HANDLERS, dispatch.INLINE)
KINDS.update(dict.fromkeys((
    "ComputeSplitPointsBySize", "BatchGetRow",
    # GetStreamRecord scans the change log (up to 1000 records) and, on a closed shard,
    # first waits for writes still on their way into it; DescribeStream walks the history
    "ListStream", "DescribeStream", "GetShardIterator", "GetStreamRecord",
    # search-index calls read tantivy shards and the base table, or run DDL
    "CreateSearchIndex", "DescribeSearchIndex", "ListSearchIndex", "UpdateSearchIndex",
    "DeleteSearchIndex", "Search", "ComputeSplits", "ParallelScan",
    "SQLQuery",  # plans, scans and runs DuckDB: seconds at most (its timeout)
), dispatch.POOLED))
KINDS.update(dict.fromkeys((  # these may hold row locks while they run
    "CreateTable", "UpdateTable", "DeleteTable", "CreateIndex", "DropIndex",
    "StartLocalTransaction", "CommitTransaction", "AbortTransaction", "BatchWriteRow",
), dispatch.POOLED_WRITE))
KINDS.update(dict.fromkeys(("PutRow", "UpdateRow", "DeleteRow"), dispatch.ROW_WRITE))
KINDS["GetRange"] = dispatch.RANGE
WITH_TRANSACTION = frozenset({"GetRow", "PutRow", "UpdateRow", "DeleteRow", "GetRange"})
# What a read-only access key may not call (403 OTSNoPermissionAccess): writes and DDL.
WRITES = frozenset({
    "CreateTable", "UpdateTable", "DeleteTable", "CreateIndex", "DropIndex",
    "PutRow", "UpdateRow", "DeleteRow", "BatchWriteRow",
    "StartLocalTransaction", "CommitTransaction",
    "CreateSearchIndex", "UpdateSearchIndex", "DeleteSearchIndex",
})
# APIs that read or write by what they carry: a read-only key's call runs with the key's
# id, and the library refuses what writes (SQLQuery: mapping DDL and COPY, not SELECT).
PER_STATEMENT = frozenset({"SQLQuery"})
HEALTH_PATH = health.PATH

_STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n" for s in HTTPStatus}
_FRAMING_CODES = {413: REQUEST_TOO_LARGE, 405: METHOD_NOT_ALLOWED}
_FIXED_HEADERS = "x-ots-contenttype: protocol buffer\r\n"
_BODY_HEADERS = "Content-Type: application/x-protobuf\r\nContent-Length: "
_CLOSE = "Connection: close\r\n"


def pooled(api: str, request, size: int, writes_wait: object = False) -> bool:
    """Whether ``request`` (of ``size`` bytes) may wait or run long, and so goes to the
    pool; ``writes_wait``: whether a row write may wait (``core/dispatch.py``)."""
    kind = KINDS[api]
    return dispatch.pooled(kind, size, api in WITH_TRANSACTION and request.transaction_id,
                           request.limit if kind == dispatch.RANGE else None, writes_wait)


class TablestoreService:
    """Answers each framed request of every connection. Runs on the loop thread; only
    :meth:`_execute` runs on pool threads."""

    def __init__(self, core: Dispatcher, keys: KeyStore, instance: str, capacity: int | None,
                 access_log: bool = False, upgrades: dict[str, Upgrade] | None = None) -> None:
        """``upgrades``: API path -> the protocol a signed ``POST`` of it switches to."""
        self.core = core
        self.db: Database = core.db
        self.keys = keys
        self.instance = instance
        self.capacity = capacity
        self.access_log = access_log
        self.upgrades = dict(upgrades or {})
        self._clock = DateClock()
        self._ids = core.request_ids  # shared with every protocol (``core.request_id``)
        self._id_prefix = core.id_prefix

    # -- the request path ---------------------------------------------------------------

    def admit(self, request: Request) -> None:
        """Check a request from its head alone, before its body is read (``http.py`` calls
        this when the body has not all arrived): the method, then identity, instance,
        date and signature. The signature covers ``x-ots-contentmd5``, the body's MD5,
        which ``handle`` checks once the body is there. Raises :class:`BadRequest`
        (the connection then closes, its body unread)."""
        if request.method != "POST":
            raise BadRequest(405, "use POST /<ApiName>", METHOD_NOT_ALLOWED)
        api = request.target.split("?", 1)[0].lstrip("/")
        try:
            request.verified = self.keys.verify(api, request.headers, self.instance)
        except WidetableError as exc:
            raise BadRequest(status_of(exc.code), wire_message(exc), exc.code) from None

    def handle(self, conn: Connection, request: Request) -> None:
        close = not request.keep_alive
        if request.method != "POST":
            if request.method == "GET" and request.target == HEALTH_PATH:
                return self._health(conn, request, close)
            body = error_body(METHOD_NOT_ALLOWED, "use POST /<ApiName>")
            return self._answer(conn, request, 405, "", body, None, True)
        api = request.target.split("?", 1)[0].lstrip("/")
        verified = request.verified
        try:
            if verified is None:
                verified = self.keys.verify(api, request.headers, self.instance)
            if content_md5(request.body) != request.headers["x-ots-contentmd5"]:
                raise WidetableError("x-ots-contentmd5 does not match the body's MD5",
                                     "OTSParameterInvalid")
            if verified.read_only and api in WRITES:
                raise WidetableError(f"access key {verified.access_key_id!r} is read-only: "
                                     f"it may not call {api}", NO_PERMISSION)
            message = decode(api, request.body, self.upgrades)
        except WidetableError as exc:
            status, body = status_of(exc.code), error_body(exc.code, wire_message(exc))
            signed = None if exc.code == "OTSAuthFailed" else verified
            return self._answer(conn, request, status, api, body, signed, close)
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, answered 500
            status, body, request_id = self._internal_error("checking", api)
            return self._answer(conn, request, status, api, body, verified, close, request_id)
        if message is UPGRADE:
            return self._upgrade(conn, request, api, verified, close)
        if pooled(api, message, len(request.body),
                  self.core.writers or self.db.transactions_open()):
            self._submit(conn, request, api, message, verified, close)
        else:
            reader = verified.access_key_id if verified.read_only else None
            status, body, request_id = self._execute(api, message, reader)
            self._answer(conn, request, status, api, body, verified, close, request_id)

    def reject(self, conn: Connection, error: BadRequest) -> None:
        code = error.code or _FRAMING_CODES.get(error.status, "OTSParameterInvalid")
        self._answer(conn, None, error.status, "", error_body(code, error.message), None, True)

    def _submit(self, conn: Connection, request: Request, api: str, message,
                verified: Verified, close: bool) -> None:
        def finish(answer: tuple[int, bytes, str | None]) -> None:
            self._answer(conn, request, answer[0], api, answer[1], verified, close, answer[2])

        reader = verified.access_key_id if verified.read_only else None
        self.core.submit(self._execute, (api, message, reader), finish, api, KINDS[api])

    def _execute(self, api: str, message, reader: str | None = None,
                 ) -> tuple[int, bytes, str | None]:
        """Run one decoded request against the store: ``(status, body, request id)``,
        the id given only to a 500 (it names it). ``reader``: the id of the read-only key
        that sent it (None: the key may write). Any thread."""
        response: Any
        try:
            if api == "CreateTable":
                response = tables.create_table(self.db, message, self.capacity)
            elif api in PER_STATEMENT:
                response = HANDLERS[api](self.db, message, reader)
            else:
                response = HANDLERS[api](self.db, message)
            return 200, response.SerializeToString(), None
        except WidetableError as exc:
            return status_of(exc.code), error_body(exc.code, wire_message(exc)), None
        except DecodeError as exc:  # a message inside a bytes field (a search query, ...)
            bad = WidetableError(f"malformed {api} request body: {exc}", "OTSParameterInvalid")
            return status_of(bad.code), error_body(bad.code, wire_message(bad)), None
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, answered 500
            return self._internal_error("serving", api)

    def _internal_error(self, doing: str, api: str) -> tuple[int, bytes, str]:
        """A 500 for the exception being handled: its text and traceback go to the log
        under a new request id; the answer names only that id."""
        request_id = self.core.request_id()
        log.exception("internal error %s %s (request %s)", doing, api[:64], request_id)
        return 500, error_body(INTERNAL_ERROR, internal_message(request_id)), request_id

    def _health(self, conn: Connection, request: Request, close: bool) -> None:
        status, body = health.answer(self.core)
        head = (f"{_STATUS_LINES[status]}Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{_CLOSE if close else ''}\r\n")
        if self.access_log:
            self._log(conn, request, status, len(body))
        conn.respond(head.encode("latin-1") + body, close or self.core.draining)

    # -- the answer ---------------------------------------------------------------------

    def _answer(self, conn: Connection, request: Request | None, status: int, api: str,
                body: bytes, verified: Verified | None, close: bool,
                request_id: str | None = None) -> None:
        """Status line, headers (signed if ``verified``) and body, in one write."""
        close = close or self.core.draining
        head = (f"{self._head(status, api, content_md5(body), verified, request_id)}"
                f"{_BODY_HEADERS}{len(body)}\r\n{_CLOSE if close else ''}\r\n")
        if self.access_log:
            self._log(conn, request, status, len(body))
        conn.respond(head.encode("latin-1") + body, close)

    def _head(self, status: int, api: str, md5: str, verified: Verified | None,
              request_id: str | None = None) -> str:
        """The status line and the x-ots-* headers (with ``Authorization`` if ``verified``)."""
        if request_id is None:
            request_id = f"{self._id_prefix}{next(self._ids):012x}"
        date, http_date = self._clock.now()
        if verified is None:
            authorization = ""
        else:
            signature = verified.hmac_sha1.sign(
                f"x-ots-contentmd5:{md5}\nx-ots-contenttype:protocol buffer\n"
                f"x-ots-date:{date}\nx-ots-requestid:{request_id}\n/{api}")
            authorization = f"Authorization: OTS {verified.access_key_id}:{signature}\r\n"
        status_line = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} Unknown\r\n"
        return (f"{status_line}x-ots-contentmd5: {md5}\r\nx-ots-requestid: {request_id}\r\n"
                f"x-ots-date: {date}\r\n{_FIXED_HEADERS}{authorization}Date: {http_date}\r\n")

    def _upgrade(self, conn: Connection, request: Request, api: str, verified: Verified,
                 close: bool) -> None:
        """Answer a signed ``POST /<api>`` of an upgrade with ``101`` and hand the
        connection to that protocol (``Upgrade: <name>/<version>``)."""
        upgrade = self.upgrades[api]
        asked = request.headers.get("upgrade", "").lower()
        if asked != upgrade.token and asked.startswith(upgrade.token.split("/")[0] + "/"):
            # Another version of the protocol (a client of another release): it is not
            # served here, and the client goes on over Tablestore's protocol.
            body = error_body("OTSUnsupportOperation",
                              f"this server speaks {upgrade.token}, not {asked}")
            return self._answer(conn, request, 400, api, body, verified, close)
        if asked != upgrade.token or close or self.core.draining:
            body = error_body("OTSParameterInvalid",
                              f"{api} switches protocols: send it with "
                              f"'Upgrade: {upgrade.token}' and 'Connection: Upgrade'")
            return self._answer(conn, request, 400, api, body, verified, close)
        head = (f"{self._head(101, api, content_md5(b''), verified)}"
                f"Upgrade: {upgrade.token}\r\nConnection: Upgrade\r\n\r\n")
        if self.access_log:
            self._log(conn, request, 101, 0)
        upgrade.switch(conn, verified, conn.hand_off(head.encode("latin-1")))

    @staticmethod
    def _log(conn: Connection, request: Request | None, status: int, size: int) -> None:
        line = f"{request.method} {request.target[:128]}" if request is not None else "-"
        log.info('%s "%s" %d %d', conn.peer, line, status, size)


def decode(api: str, body: bytes, upgrades: dict | frozenset = frozenset()):
    """The request message of ``api`` in ``body`` (``UPGRADE`` for an API in ``upgrades``);
    OTSUnsupportOperation or OTSParameterInvalid if there is no such API or the body is
    not one."""
    cls = _REQUEST_CLASSES.get(api)
    if cls is None:
        if api in upgrades:
            if body:
                raise WidetableError(f"{api} has no body", "OTSParameterInvalid")
            return UPGRADE
        if api in LATER:
            raise WidetableError(f"{api} is not supported yet: widetable does not serve "
                                 f"{LATER[api]}", UNSUPPORTED_OPERATION)
        raise WidetableError(f"unknown API {api[:64]!r}", UNSUPPORTED_OPERATION)
    try:
        msg = cls.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise WidetableError(f"malformed {api} request body: {exc}", "OTSParameterInvalid") from None
    check_text(msg)
    return msg
