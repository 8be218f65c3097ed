"""widetable's own protocol on the server: the calls, and the connection that serves them.

The protocol (handshake, frames, the calls and their answers) is described in
``wire/native.py``, the codec the client shares. A connection arrives here
upgraded from the Tablestore HTTP protocol (``switch``, which the server hands
that protocol as the upgrade of ``wire.native.API``). Where a call runs (the
loop, or the worker pool) follows the one rule of ``server/core/dispatch.py``.
A frame that is not a call gets ``OTSParameterInvalid``; one over the size limit
also closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgpack
from google.protobuf.message import DecodeError

from ...db import Database
from ...errors import ParameterInvalid, WidetableError
from ...table.batch import MAX_BATCH_GET, MAX_BATCH_WRITE, _check_count, parse_write_item
from ...table.filters import Condition
from ...table.table import Table
from ...wire import convert
from ...wire.errors import INTERNAL_ERROR, NO_PERMISSION, internal_message, wire_message
from ...wire.native import (
    ANSWER_ROW,
    BATCH_GET_ROW,
    BATCH_WRITE_ROW,
    DELETE_ROW,
    DESCRIBE_STREAM,
    DESCRIBE_TABLE,
    GET_RANGE,
    GET_ROW,
    GET_SHARD_ITERATOR,
    GET_STREAM_RECORD,
    HEADER,
    LIST_STREAM,
    MAX_FRAME,
    PUT_ROW,
    STREAM_CALLS,
    UPDATE_ROW,
    UPGRADE,
    _answers,
    frame,
    unpack,
)
from ...wire.proto import pb
from ..core import dispatch
from ..core.auth import Verified
from ..core.calls import in_transaction, target
from ..core.connection import FramedConnection, Upgrade

log = logging.getLogger("widetable.server")


def row_out(row) -> list | None:
    if row is None:
        return None
    return [ANSWER_ROW, row.primary_key, row.columns, row._stamps, row._versions]


class Pieces(list):
    """A result already encoded, in pieces to join after the answer's ``[0,``: a stored
    row, or the stored rows of a range page, copied once, into the frame."""


def _array_head(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 65536:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _stored_page_out(blobs: list[bytes], nxt: tuple | None) -> Pieces:
    """``[[row, ...], next]`` of a page of stored rows, as pieces."""
    out = Pieces((b"\x92" + _array_head(len(blobs)),))
    out += blobs
    out.append(_answers.encode(nxt))
    return out


def _result_out(result) -> list:
    incs = result.increments
    return [result.primary_key, dict(incs) if incs else None]


def _filter(data: bytes | None) -> object:
    return None if data is None else convert.decode_filter(_bytes(data, "filter"))


def _condition(data: bytes | None) -> Condition | None:
    if data is None:
        return None
    try:
        message = pb.Condition.FromString(_bytes(data, "condition"))
    except DecodeError as exc:
        raise ParameterInvalid(f"malformed condition: {exc}") from None
    return convert.decode_condition(message)


def _bytes(data: object, what: str) -> bytes:
    if type(data) is not bytes:
        raise ParameterInvalid(f"the {what} must travel as protobuf bytes")
    return data


def _get_row(db: Database, name, pk, columns, max_versions, time_range, filter, txn) -> object:
    table, reader = target(db, name, txn)
    if (reader is table and type(table) is Table and table.plain_reads and columns is None
            and max_versions is None and time_range is None and filter is None):
        blob = table.stored_row(pk)
        return None if blob is None else Pieces((blob,))
    return row_out(reader.get_row(pk, columns=columns, max_versions=max_versions,
                                  time_range=time_range, filter=_filter(filter)))


def _get_range(db: Database, name, start, end, direction, limit, columns, max_versions,
               time_range, filter, txn) -> object:
    table, reader = target(db, name, txn)
    if (reader is table and type(table) is Table and table.plain_reads and columns is None
            and max_versions is None and time_range is None and filter is None):
        return _stored_page_out(*table.stored_range(start, end, direction, limit))
    page = reader.get_range(start, end, direction, limit=limit, columns=columns,
                            max_versions=max_versions, time_range=time_range,
                            filter=_filter(filter))
    return [[row_out(r) for r in page.rows], page.next_start_primary_key]


def _put_row(db: Database, name, pk, columns, condition, txn) -> object:
    _, writer = target(db, name, txn)
    return _result_out(writer.put_row(pk, columns, _condition(condition)))


def _update_row(db: Database, name, pk, put, delete_version, delete_column, increment,
                condition, txn) -> object:
    _, writer = target(db, name, txn)
    return _result_out(writer.update_row(pk, put, delete_version, delete_column, increment,
                                         _condition(condition)))


def _delete_row(db: Database, name, pk, condition, txn) -> object:
    _, writer = target(db, name, txn)
    return _result_out(writer.delete_row(pk, _condition(condition)))


def _error_out(error: Exception | None) -> list | None:
    if error is None:
        return None
    if isinstance(error, WidetableError):
        return [error.code, wire_message(error)]
    request_id = dispatch.new_request_id()
    log.error("internal error in a batch row (request %s)", request_id, exc_info=error)
    return [INTERNAL_ERROR, internal_message(request_id)]


def _batch_get_row(db: Database, items) -> object:
    # The items are looked into (for a filter) before the library checks them: check
    # their count and type first, as the library would, so that a frame whose items
    # are not an array is answered OTSParameterInvalid rather than an internal error.
    _check_count(items, MAX_BATCH_GET, "batch_get_row")
    requests = []
    for item in items:
        if type(item) is tuple and len(item) == 3 and type(item[2]) is dict and "filter" in item[2]:
            opts = dict(item[2])
            opts["filter"] = _filter(opts["filter"])
            item = (item[0], item[1], opts)
        requests.append(item)
    return [[r.table, r.primary_key, row_out(r.row), _error_out(r.error)]
            for r in db.batch_get_row(requests)]


def _batch_write_row(db: Database, items, txn) -> object:
    _check_count(items, MAX_BATCH_WRITE, "batch_write_row")  # before looking into the items
    requests = []
    for item in items:
        if type(item) is tuple and len(item) == 5:
            item = (*item[:4], _condition(item[4]))
        requests.append(item)
    if txn:
        parsed = [parse_write_item(item) for item in requests]
        out = []
        for (name, op, pk, _, _), (result, error) in zip(
                parsed, in_transaction(db, txn, parsed)):
            if result is None:
                out.append([name, op, pk if type(pk) is tuple else (pk,), None, _error_out(error)])
            else:
                out.append([name, op, result.primary_key, dict(result.increments) or None, None])
        return out
    out = []
    for r in db.batch_write_row(requests):
        result = r._result
        incs = dict(result.increments) if result is not None and result.increments else None
        out.append([r.table, r.operation, r.primary_key, incs, _error_out(r.error)])
    return out


def _list_stream(db: Database, table) -> object:
    return [[s.stream_id, s.table, s.created_at] for s in db.list_stream(table)]


def _describe_stream(db: Database, stream_id) -> object:
    d = db.describe_stream(stream_id)
    return [d.stream_id, d.table, d.status, d.retention,
            [[s.shard_id, s.parents, s.children, s.start, s.end, s.closed] for s in d.shards],
            d.lagging_consumers]


def _get_shard_iterator(db: Database, stream_id, shard_id, position) -> object:
    return db.get_shard_iterator(stream_id, shard_id, position)


def _get_stream_record(db: Database, iterator, limit) -> object:
    page = db.get_stream_record(iterator, limit)
    return [[[r.sequence, r.shard, r.operation, r.primary_key,
              [[c.name, c.kind, c.value, c.timestamp] for c in r.columns], r.timestamp]
             for r in page.records], page.next_iterator]


def _describe_table(db: Database, name) -> object:
    return db.describe_table(name)  # a dataclass: a map of its fields, nested ones too


CALLS: dict[int, tuple[Callable, int]] = {  # op -> (call, its argument count)
    GET_ROW: (_get_row, 7),
    GET_RANGE: (_get_range, 10),
    PUT_ROW: (_put_row, 5),
    UPDATE_ROW: (_update_row, 8),
    DELETE_ROW: (_delete_row, 4),
    BATCH_GET_ROW: (_batch_get_row, 1),
    BATCH_WRITE_ROW: (_batch_write_row, 2),
    LIST_STREAM: (_list_stream, 1),
    DESCRIBE_STREAM: (_describe_stream, 1),
    GET_SHARD_ITERATOR: (_get_shard_iterator, 3),
    GET_STREAM_RECORD: (_get_stream_record, 2),
    DESCRIBE_TABLE: (_describe_table, 1),
}
ROW_WRITES = frozenset({PUT_ROW, UPDATE_ROW, DELETE_ROW})
TRANSACTION_ARG = {GET_ROW: 7, GET_RANGE: 10, PUT_ROW: 5, UPDATE_ROW: 8, DELETE_ROW: 4,
                   BATCH_WRITE_ROW: 2}  # index of the transaction id in the request


_OK = b"\x92\x00"  # MessagePack: an array of 2, then 0


def execute(db: Database, request: tuple) -> bytes:
    """Run one decoded request: its answer frame. Any thread."""
    try:
        call = CALLS[request[0]][0]
        result = call(db, *request[1:])
        if type(result) is Pieces:  # stored rows: [0, ...] written around their bytes
            return b"".join([HEADER.pack(sum(map(len, result)) + 2), _OK, *result])
        return frame((0, result))
    except WidetableError as exc:
        return frame((1, exc.code, wire_message(exc)))
    except Exception:  # a bug: answer it (its text to the log only), keep serving
        request_id = dispatch.new_request_id()
        log.exception("internal error serving native call %r (request %s)", request[0],
                      request_id)
        return frame((1, INTERNAL_ERROR, internal_message(request_id)))


def check(data: bytes) -> tuple:
    """The request in a frame's bytes, checked for its shape; ParameterInvalid if not a call."""
    try:
        request = unpack(data)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError) as exc:
        raise ParameterInvalid(f"malformed widetable-native frame: {exc}") from None
    if type(request) is not tuple or not request or type(request[0]) is not int:
        raise ParameterInvalid("a widetable-native request is an array [op, arg, ...]")
    spec = CALLS.get(request[0])
    if spec is None:
        raise ParameterInvalid(f"unknown widetable-native call {request[0]}")
    if len(request) != spec[1] + 1:
        raise ParameterInvalid(f"widetable-native call {request[0]} takes {spec[1]} arguments, "
                               f"got {len(request) - 1}")
    return request


# Each call's kind, for the server's rule of where it runs (``core/dispatch.py``).
KINDS = {GET_ROW: dispatch.INLINE, GET_RANGE: dispatch.RANGE,
         PUT_ROW: dispatch.ROW_WRITE, UPDATE_ROW: dispatch.ROW_WRITE, DELETE_ROW: dispatch.ROW_WRITE,
         BATCH_GET_ROW: dispatch.POOLED, BATCH_WRITE_ROW: dispatch.POOLED_WRITE,
         DESCRIBE_TABLE: dispatch.POOLED, **dict.fromkeys(STREAM_CALLS, dispatch.POOLED)}
RANGE_LIMIT_ARG = 5  # index of a GET_RANGE's limit in the request
WRITES = frozenset({PUT_ROW, UPDATE_ROW, DELETE_ROW, BATCH_WRITE_ROW})  # refused to read-only keys


def pooled(request: tuple, size: int, writes_wait: object) -> bool:
    """Whether a call may wait or run long, and so goes to the pool; ``writes_wait``:
    whether a row write may wait (``core/dispatch.py``)."""
    op = request[0]
    kind = KINDS[op]
    txn = TRANSACTION_ARG.get(op)
    return dispatch.pooled(kind, size, txn is not None and request[txn],
                           request[RANGE_LIMIT_ARG] if kind == dispatch.RANGE else None,
                           writes_wait)


# -- the connection --------------------------------------------------------------------


class NativeConnection(FramedConnection):
    """One upgraded connection: frames in, answers out, one call at a time, in order.

    It takes the place, in the server's connection set, of the HTTP connection it
    replaced, for the idle sweep and the drain."""

    def __init__(self, core: dispatch.Dispatcher, transport: asyncio.Transport,
                 connections: set, peer: str, verified: Verified) -> None:
        super().__init__(None, core, connections)
        self.access_key_id = verified.access_key_id
        self.read_only = verified.read_only  # its writes are refused (OTSNoPermissionAccess)
        self.db: Database = core.db
        self.poll = core.poll
        self.transport = transport
        self.peer = peer

    def data_received(self, data: bytes) -> None:
        if not (self._buffer or self.busy or self._write_paused or self.closing):
            size = len(data) - 4  # usually one whole call arrives alone: serve it as it is
            if size >= 0 and HEADER.unpack_from(data)[0] == size <= MAX_FRAME:
                self.poll.arrived()  # as FramedConnection.data_received tells it
                self.last_active = time.monotonic()
                self._serve(memoryview(data)[4:])
                return
        super().data_received(data)

    def eof_received(self) -> bool | None:
        return None  # the client is done: close (an unanswered call has no one to read it)

    def _take(self) -> bool:
        buffer = self._buffer
        if len(buffer) < 4:
            return False
        size = HEADER.unpack_from(buffer)[0]
        if size > MAX_FRAME:
            self._refuse(f"a frame of {size} bytes is over the {MAX_FRAME} byte limit")
            return False
        end = 4 + size
        if len(buffer) < end:
            return False
        data = bytes(buffer[4:end])
        if len(buffer) > end:
            self._buffer = buffer[end:]
            self.started = time.monotonic()  # the next frame's deadline starts now
        else:
            self._buffer = b""
        self._serve(data)
        return True

    def _serve(self, data: bytes | memoryview) -> None:
        try:
            request = check(data)
        except WidetableError as exc:
            self._write(frame((1, exc.code, wire_message(exc))))
            return
        if self.read_only and request[0] in WRITES:
            message = f"access key {self.access_key_id!r} is read-only: it may not write"
            self._write(frame((1, NO_PERMISSION, message)))
            return
        db = self.db
        if not pooled(request, len(data), self.core.writers or db.transactions_open()):
            self._write(execute(db, request))
            return
        self.busy = True
        self.core.submit(execute, (db, request), self._finish, "a native call",
                         KINDS[request[0]])

    def _finish(self, answer: bytes) -> None:
        self.busy = False
        self.last_active = time.monotonic()
        self._write(answer)
        if not self._pumping:
            self._pump()

    def _write(self, answer: bytes) -> None:
        transport = self.transport
        if self.closing or transport is None or transport.is_closing():
            self.closing = True
            return
        transport.write(answer)
        if self.core.draining:
            self.close()
        else:
            self.poll.answered()

    def _refuse(self, message: str) -> None:
        self._write(frame((1, "OTSParameterInvalid", message)))
        self._buffer = b""
        self.close()


def upgrade(core: dispatch.Dispatcher) -> Upgrade:
    """The native protocol, as an upgrade of an HTTP connection (``POST /WidetableNative``)."""
    return Upgrade(UPGRADE, lambda conn, verified, leftover: switch(conn, core, verified, leftover))


def switch(conn, core: dispatch.Dispatcher, verified: Verified,
           leftover: bytes | bytearray) -> None:
    """Give an HTTP connection that has just been answered ``101`` to the native protocol,
    trusted as ``verified`` (who signed the upgrade); ``leftover``: bytes it had received
    after the upgrade request."""
    transport = conn.transport
    native = NativeConnection(core, transport, conn.connections, conn.peer, verified)
    # The transport's back pressure outlives the protocol: reading may have been paused
    # by the HTTP side (more than READ_AHEAD piled up behind a request on the pool, or
    # its write buffer was full), which will never resume it now that it is busy for
    # good. The native side takes the pause over and resumes reading as its own buffer
    # and write buffer allow; a paused write buffer resumes it through
    # ``resume_writing``, which the transport now calls on the native side.
    native._read_paused = conn._read_paused
    native._write_paused = conn._write_paused
    # A half-close that came while the upgrade waited: the native side answers the
    # frames sent before it, then closes (its own eof_received will not come again).
    native._eof = conn._eof
    conn.connections.discard(conn)
    conn.connections.add(native)
    transport.set_protocol(native)
    if leftover:
        native.data_received(bytes(leftover))
    native._pump()  # frames the rest and resumes reading unless a call is on the pool
