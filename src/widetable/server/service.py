"""The Tablestore service behind each connection: request checks, dispatch, signed answers.

Every API is ``POST /<ApiName>`` with a protobuf body. A request is checked
in this order, and the first failure answers it without touching the store:
framing (``http.py``: request line, headers, ``Content-Length`` at most 5 MB);
method; identity, instance, date (within 15 minutes) and signature (403
``OTSAuthFailed``); the body's MD5 (``x-ots-contentmd5``); the API name; the
protobuf and PlainBuffer (400 ``OTSParameterInvalid``). Then the library runs
it; a :class:`~widetable.WidetableError` becomes its code's status and an
``Error`` body. Every answer carries ``x-ots-contentmd5``, ``x-ots-requestid``,
``x-ots-date``, ``x-ots-contenttype``, and, once the caller is known,
``Authorization: OTS <id>:<signature>``; it goes out in one write.

Where a request runs. Checks and decoding run inline on the event loop's
thread, and so do the single-row APIs, ListTable, DescribeTable and small
GetRanges: a GetRow is ~10 µs of store work, less than handing it to a thread
would cost (~20 µs of CPU measured, and GIL handoffs). Requests that can wait
or run long go to the worker pool, so that the loop keeps reading and serving
other connections meanwhile (the GIL runs one thread's Python at a time, but a
pool thread yields it at least every 5 ms, the interpreter's switch interval):

* anything with a ``transaction_id`` (the store waits up to 50 ms on a row lock
  a transaction holds), and Start/Commit/AbortTransaction;
* table DDL, CreateIndex (it backfills) and ComputeSplitPointsBySize;
* BatchGetRow and BatchWriteRow (up to 100 / 200 rows: milliseconds), and any
  request whose body is over 64 KiB;
* a GetRange without a limit or with one over 100 rows (up to 5000 rows / 4 MB);
* the Stream APIs (``streams.py``), as over the native protocol: GetStreamRecord
  scans the change log (up to 1000 records) and, on a closed shard, first waits
  for writes still on their way into it; DescribeStream walks the shard history;
* a plain PutRow, UpdateRow or DeleteRow while any local transaction is open
  (``Database.transactions_open()``): such a write waits up to 50 ms when it
  meets the partition key a transaction holds, before failing with
  ``OTSRowOperationConflict``. With no transaction open no write can wait, and
  they run inline.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future
from http import HTTPStatus
from typing import Any

from google.protobuf.message import DecodeError

from ..db import Database
from ..errors import WidetableError
from . import batch, native, rows, streams, tables, txn
from .auth import DateClock, KeyStore, Verified, content_md5
from .busypoll import BusyPoll
from .errors import (
    METHOD_NOT_ALLOWED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_OPERATION,
    error_body,
    status_of,
    wire_message,
)
from .http import BadRequest, Connection, Request
from .proto import message

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
}
_REQUEST_CLASSES: dict[str, Any] = {api: message(f"{api}Request") for api in HANDLERS}
UPGRADE_TO_NATIVE = object()  # what decode() gives for the upgrade to widetable's own protocol

# APIs of the service that widetable does not serve yet: a clear error, not a 404.
LATER = {
    "Search": "search indexes", "ParallelScan": "search indexes",
    "ComputeSplits": "search indexes (use ComputeSplitPointsBySize for tables)",
    "ListSearchIndex": "search indexes", "CreateSearchIndex": "search indexes",
    "UpdateSearchIndex": "search indexes", "DeleteSearchIndex": "search indexes",
    "DescribeSearchIndex": "search indexes", "SQLQuery": "SQL",
}

# Served by the worker pool: they may wait on locks or run long (see the module docstring).
POOLED = frozenset({
    "CreateTable", "UpdateTable", "DeleteTable", "CreateIndex", "DropIndex",
    "ComputeSplitPointsBySize", "StartLocalTransaction", "CommitTransaction", "AbortTransaction",
    "BatchGetRow", "BatchWriteRow",
    "ListStream", "DescribeStream", "GetShardIterator", "GetStreamRecord",
})
WITH_TRANSACTION = frozenset({"GetRow", "PutRow", "UpdateRow", "DeleteRow", "GetRange"})
ROW_WRITES = frozenset({"PutRow", "UpdateRow", "DeleteRow"})
# rows of a GetRange small enough to run on the loop, and bytes of the largest request
# body run there: one rule for both protocols
INLINE_RANGE_LIMIT, INLINE_BODY = native.INLINE_RANGE_LIMIT, native.INLINE_FRAME

_STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n" for s in HTTPStatus}
_FRAMING_CODES = {413: REQUEST_TOO_LARGE, 405: METHOD_NOT_ALLOWED}
_FIXED_HEADERS = "x-ots-contenttype: protocol buffer\r\n"
_BODY_HEADERS = "Content-Type: application/x-protobuf\r\nContent-Length: "
_CLOSE = "Connection: close\r\n"


def pooled(api: str, request, size: int, transactions_open: bool = False) -> bool:
    """Whether ``request`` (of ``size`` bytes) may wait or run long, and so goes to the pool."""
    if api in POOLED or size > INLINE_BODY:
        return True
    if api in WITH_TRANSACTION and request.transaction_id:
        return True
    if api in ROW_WRITES and transactions_open:
        return True
    return api == "GetRange" and not 0 < request.limit <= INLINE_RANGE_LIMIT


class TablestoreService:
    """Answers each framed request of every connection. Runs on the loop thread; only
    :meth:`_execute` runs on pool threads."""

    def __init__(self, db: Database, keys: KeyStore, instance: str, capacity: int | None,
                 pool: Executor, access_log: bool = False, busy_poll: int = 0) -> None:
        """``busy_poll``: microseconds the loop polls for the next request after an
        answer (``busypoll.py``; 0: it sleeps at once)."""
        self.db = db
        self.keys = keys
        self.instance = instance
        self.capacity = capacity
        self.pool = pool
        self.access_log = access_log
        self.draining = False
        self.jobs = 0  # requests on the pool, not answered yet
        self.loop: asyncio.AbstractEventLoop | None = None  # set before the first request
        self.poll = BusyPoll(busy_poll, lambda: self.jobs)  # its loop is set with ``loop``
        self._clock = DateClock()
        self._ids = itertools.count(1)
        self._id_prefix = os.urandom(4).hex() + "-"

    # -- the request path ---------------------------------------------------------------

    def handle(self, conn: Connection, request: Request) -> None:
        close = not request.keep_alive
        if request.method != "POST":
            body = error_body(METHOD_NOT_ALLOWED, "use POST /<ApiName>")
            return self._answer(conn, request, 405, "", body, None, True)
        api = request.target.split("?", 1)[0].lstrip("/")
        verified: Verified | None = None
        try:
            verified = self.keys.verify(api, request.headers, self.instance)
            if content_md5(request.body) != request.headers["x-ots-contentmd5"]:
                raise WidetableError("x-ots-contentmd5 does not match the body's MD5",
                                     "OTSParameterInvalid")
            message = decode(api, request.body)
        except WidetableError as exc:
            status, body = status_of(exc.code), error_body(exc.code, wire_message(exc))
            signed = None if exc.code == "OTSAuthFailed" else verified
            return self._answer(conn, request, status, api, body, signed, close)
        except Exception as exc:  # a bug: answer 500, keep serving
            log.exception("internal error checking %s", api[:64])
            body = error_body("OTSInternalServerError", f"internal error: {exc}")
            return self._answer(conn, request, 500, api, body, verified, close)
        if message is UPGRADE_TO_NATIVE:
            return self._upgrade(conn, request, verified, close)
        if pooled(api, message, len(request.body), self.db.transactions_open()):
            self._submit(conn, request, api, message, verified, close)
        else:
            status, body = self._execute(api, message)
            self._answer(conn, request, status, api, body, verified, close)

    def reject(self, conn: Connection, error: BadRequest) -> None:
        code = _FRAMING_CODES.get(error.status, "OTSParameterInvalid")
        self._answer(conn, None, error.status, "", error_body(code, error.message), None, True)

    def _submit(self, conn: Connection, request: Request, api: str, message,
                verified: Verified, close: bool) -> None:
        self.jobs += 1
        loop = self.loop
        assert loop is not None, "the server sets the loop before serving"

        def finish(future: Future) -> None:
            self.jobs -= 1
            status, body = future.result()
            self._answer(conn, request, status, api, body, verified, close)

        def done(future: Future) -> None:  # on the pool thread
            try:
                loop.call_soon_threadsafe(finish, future)
            except RuntimeError:  # the loop has stopped: drain's grace ran out
                log.warning("%s finished after the server stopped; not answered", api)

        self.pool.submit(self._execute, api, message).add_done_callback(done)

    def _execute(self, api: str, message) -> tuple[int, bytes]:
        """Run one decoded request against the store: ``(status, body)``. Any thread."""
        response: Any
        try:
            if api == "CreateTable":
                response = tables.create_table(self.db, message, self.capacity)
            else:
                response = HANDLERS[api](self.db, message)
            return 200, response.SerializeToString()
        except WidetableError as exc:
            return status_of(exc.code), error_body(exc.code, wire_message(exc))
        except Exception as exc:  # a bug: answer 500, keep serving
            log.exception("internal error serving %s", api)
            return 500, error_body("OTSInternalServerError", f"internal error: {exc}")

    # -- the answer ---------------------------------------------------------------------

    def _answer(self, conn: Connection, request: Request | None, status: int, api: str,
                body: bytes, verified: Verified | None, close: bool) -> None:
        """Status line, headers (signed if ``verified``) and body, in one write."""
        close = close or self.draining
        head = (f"{self._head(status, api, content_md5(body), verified)}"
                f"{_BODY_HEADERS}{len(body)}\r\n{_CLOSE if close else ''}\r\n")
        if self.access_log:
            self._log(conn, request, status, len(body))
        conn.respond(head.encode("latin-1") + body, close)

    def _head(self, status: int, api: str, md5: str, verified: Verified | None) -> str:
        """The status line and the x-ots-* headers (with ``Authorization`` if ``verified``)."""
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

    def _upgrade(self, conn: Connection, request: Request, verified: Verified, close: bool) -> None:
        """Answer a signed ``POST /WidetableNative`` with ``101`` and switch the connection
        to widetable's own protocol (``native.py``)."""
        asked = request.headers.get("upgrade", "").lower()
        if asked != native.UPGRADE and asked.startswith(native.UPGRADE.split("/")[0] + "/"):
            # Another version of the protocol (a client of another release): it is not
            # served here, and the client goes on over Tablestore's protocol.
            body = error_body("OTSUnsupportOperation",
                              f"this server speaks {native.UPGRADE}, not {asked}")
            return self._answer(conn, request, 400, native.API, body, verified, close)
        if asked != native.UPGRADE or close or self.draining:
            body = error_body("OTSParameterInvalid",
                              f"{native.API} switches protocols: send it with "
                              f"'Upgrade: {native.UPGRADE}' and 'Connection: Upgrade'")
            return self._answer(conn, request, 400, native.API, body, verified, close)
        head = (f"{self._head(101, native.API, content_md5(b''), verified)}"
                f"Upgrade: {native.UPGRADE}\r\nConnection: Upgrade\r\n\r\n")
        if self.access_log:
            self._log(conn, request, 101, 0)
        native.switch(conn, self, conn.hand_off(head.encode("latin-1")))

    @staticmethod
    def _log(conn: Connection, request: Request | None, status: int, size: int) -> None:
        line = f"{request.method} {request.target[:128]}" if request is not None else "-"
        log.info('%s "%s" %d %d', conn.peer, line, status, size)


def decode(api: str, body: bytes):
    """The request message of ``api`` in ``body``; OTSUnsupportOperation or
    OTSParameterInvalid if there is no such API or the body is not one."""
    cls = _REQUEST_CLASSES.get(api)
    if cls is None:
        if api == native.API:
            if body:
                raise WidetableError(f"{api} has no body", "OTSParameterInvalid")
            return UPGRADE_TO_NATIVE
        if api in LATER:
            raise WidetableError(f"{api} is not supported yet: widetable does not serve "
                                 f"{LATER[api]}", UNSUPPORTED_OPERATION)
        raise WidetableError(f"unknown API {api[:64]!r}", UNSUPPORTED_OPERATION)
    try:
        return cls.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise WidetableError(f"malformed {api} request body: {exc}", "OTSParameterInvalid") from None
