"""widetable's own protocol, for ``widetable.connect``: MessagePack frames on an upgraded connection.

Why a second protocol. A Tablestore request costs the server ~150 µs of CPU in
pure Python (HTTP framing, MD5, HMAC signatures both ways, protobuf, PlainBuffer)
against ~10 µs for the store's own work, and the client as much again. This
protocol keeps what a data call needs: a length, the call's arguments, and the
answer, each one MessagePack array. MessagePack is also the store's row format
(``table/rowcodec.py``) and keeps the five attribute types apart, so values
cross the wire as they are. Tablestore's protocol stays on the same port for
the official SDKs, and for everything ``widetable.connect`` does not send here
(catalog, indexes, transactions' start and end, values MessagePack cannot carry).

Handshake. The client sends a signed Tablestore request ``POST /WidetableNative``
with ``Upgrade: widetable-native/4``, ``Connection: Upgrade`` and an empty body.
The service checks it like any API (identity, instance, date, signature, MD5)
and answers ``101 Switching Protocols``, signed like any answer: each side then
knows that the other holds the access key. From then on the connection carries
frames, and is trusted as the identity checked at the upgrade, as a TLS session
or a database connection is. A server without this protocol (the Tablestore
service) answers the upgrade with an error, and the client stays on HTTP.

Frames, both ways: a 4-byte little-endian length, then that many bytes of one
MessagePack array (at most 5 MB, as a Tablestore body)::

    request := [op, arg, ...]             op and arguments: CALLS below
    answer  := [0, result] | [1, code, message]

``INF_MIN`` and ``INF_MAX`` are MessagePack extension types 1 and 2 (empty); a
condition or a filter travels as the bytes of its Tablestore protobuf message
(``Condition``, ``Filter``), decoded by the same code as on the HTTP path. A
row is ``[0, pk, columns, timestamps, versions]``, or, for a read without options
of a table without TTL, the row's stored bytes as they are (``[1, pk, latest,
timestamps, history]``, ``table/rowcodec.py``; the client drops ``history``,
which such a read does not return). A read that returns exactly the stored rows
costs the server no decoding and no encoding: a range page's answer is its
rows' bytes joined between a head and the next start key. The first element
tells the two row forms apart, so the client decodes a whole page in one typed
call (``client/native.py``). A client asking for another version of this
protocol is answered ``OTSUnsupportOperation`` and goes on over Tablestore's. A write result ``[pk,
increments]``, a batch's row result ``[table, pk, row, error]`` (read) or
``[table, op, pk, increments, error]`` (write), ``error`` being ``[code,
message]`` or nil. The stream calls (``stream/api.py``) answer its results as
arrays of their fields in order: a stream ``[id, table, created_at]``; a
description ``[id, table, status, retention, shards, lagging]``, a shard
``[id, parents, children, start, end, closed]``; a page of records ``[records,
next iterator]``, a record ``[sequence, shard, operation, pk, columns, ts]``, a
column ``[name, kind, value, timestamp]``; they run in the pool, as does
DESCRIBE_TABLE, whose answer is ``Database.describe_table``'s description as a
map of its fields (partitions with their load, split history, each index's
lag). Requests on a connection are answered in order, one at a time;
pipelined frames wait. Where a call runs (the loop, or the worker pool) follows
the Tablestore service's rules (``service.py``). A frame that is not a call
gets ``OTSParameterInvalid``; one over the size limit also closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

import msgpack
import msgspec
from google.protobuf.message import DecodeError

from ..db import Database
from ..errors import ParameterInvalid, WidetableError
from ..keys import codec
from ..table.batch import MAX_BATCH_GET, MAX_BATCH_WRITE, _check_count, parse_write_item
from ..table.filters import Condition
from ..table.table import Table
from . import convert, rows
from .batch import _in_transaction
from .errors import wire_message
from .http import FramedConnection
from .proto import pb

log = logging.getLogger("widetable.server")

API = "WidetableNative"  # the path of the upgrade request, signed as an API name
UPGRADE = "widetable-native/4"  # /2: rows carry their form first; /3: stream calls; /4: describe
HEADER = struct.Struct("<I")
MAX_FRAME = 5 * 2**20
EXT_INF_MIN, EXT_INF_MAX = 1, 2
INLINE_RANGE_LIMIT = 100  # rows of a range small enough to run on the loop (both protocols)
INLINE_FRAME = 64 * 1024  # bytes of the largest request run on the loop (both protocols)

GET_ROW, GET_RANGE, PUT_ROW, UPDATE_ROW, DELETE_ROW, BATCH_GET_ROW, BATCH_WRITE_ROW = range(1, 8)
LIST_STREAM, DESCRIBE_STREAM, GET_SHARD_ITERATOR, GET_STREAM_RECORD, DESCRIBE_TABLE = range(8, 13)
STREAM_CALLS = frozenset({LIST_STREAM, DESCRIBE_STREAM, GET_SHARD_ITERATOR, GET_STREAM_RECORD})


_INF_EXT = (msgpack.ExtType(EXT_INF_MIN, b""), msgpack.ExtType(EXT_INF_MAX, b""))


def _wire(value: object) -> object:
    if value is codec.INF_MIN:
        return _INF_EXT[0]
    if value is codec.INF_MAX:
        return _INF_EXT[1]
    return value


def wire_bound(bound: object) -> object:
    """A range bound with its infinities as MessagePack extension types (1, 2)."""
    if type(bound) is tuple:
        return tuple(map(_wire, bound))
    if type(bound) is dict:
        return {k: _wire(v) for k, v in bound.items()}
    return _wire(bound)


def ext_hook(code: int, data: memoryview | bytes) -> object:
    if code == EXT_INF_MIN:
        return codec.INF_MIN
    if code == EXT_INF_MAX:
        return codec.INF_MAX
    raise ValueError(f"unknown MessagePack extension type {code}")


def unpack(data: bytes) -> Any:
    """A frame's array; arrays come back as tuples (keys are tuples), maps as dicts."""
    return msgpack.unpackb(data, use_list=False, ext_hook=ext_hook, strict_map_key=False)


pack = msgpack.Packer().pack
"""A request's bytes. msgpack packs only MessagePack's own types (range bounds
go through ``wire_bound`` first): anything else fails here, in the client, and
travels over Tablestore's protocol, whose checks name it. (msgspec would turn a
UUID or a Decimal into a string the server then accepts.) The Packer has no
``default`` hook: packing then runs in C from start to end, so no other
thread can run in the middle of it, and one Packer (and its buffer) serves
every thread."""


def _answer_hook(obj: object) -> msgspec.msgpack.Ext:
    if obj is codec.INF_MIN:
        return msgspec.msgpack.Ext(EXT_INF_MIN, b"")
    if obj is codec.INF_MAX:
        return msgspec.msgpack.Ext(EXT_INF_MAX, b"")
    raise TypeError(f"cannot send {type(obj).__name__} values")


_answers = msgspec.msgpack.Encoder(enc_hook=_answer_hook)
read_answer = msgspec.msgpack.Decoder(ext_hook=ext_hook).decode
"""An answer frame's array (arrays as lists). Answers carry only values the store
holds, so msgspec, twice as fast as msgpack here, encodes and decodes them."""


def frame(value: object) -> bytes:
    """An answer as a frame: its length, then its MessagePack."""
    data = _answers.encode(value)
    return HEADER.pack(len(data)) + data


# -- the calls -------------------------------------------------------------------------


ANSWER_ROW = 0  # the first element of a row that is not a stored row (whose first is FORMAT)


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
    table, reader = rows.target(db, name, txn)
    if (reader is table and type(table) is Table and table.plain_reads and columns is None
            and max_versions is None and time_range is None and filter is None):
        blob = table.stored_row(pk)
        return None if blob is None else Pieces((blob,))
    return row_out(reader.get_row(pk, columns=columns, max_versions=max_versions,
                                  time_range=time_range, filter=_filter(filter)))


def _get_range(db: Database, name, start, end, direction, limit, columns, max_versions,
               time_range, filter, txn) -> object:
    table, reader = rows.target(db, name, txn)
    if (reader is table and type(table) is Table and table.plain_reads and columns is None
            and max_versions is None and time_range is None and filter is None):
        return _stored_page_out(*table.stored_range(start, end, direction, limit))
    page = reader.get_range(start, end, direction, limit=limit, columns=columns,
                            max_versions=max_versions, time_range=time_range,
                            filter=_filter(filter))
    return [[row_out(r) for r in page.rows], page.next_start_primary_key]


def _put_row(db: Database, name, pk, columns, condition, txn) -> object:
    _, writer = rows.target(db, name, txn)
    return _result_out(writer.put_row(pk, columns, _condition(condition)))


def _update_row(db: Database, name, pk, put, delete_version, delete_column, increment,
                condition, txn) -> object:
    _, writer = rows.target(db, name, txn)
    return _result_out(writer.update_row(pk, put, delete_version, delete_column, increment,
                                         _condition(condition)))


def _delete_row(db: Database, name, pk, condition, txn) -> object:
    _, writer = rows.target(db, name, txn)
    return _result_out(writer.delete_row(pk, _condition(condition)))


def _error_out(error: Exception | None) -> list | None:
    if error is None:
        return None
    if isinstance(error, WidetableError):
        return [error.code, wire_message(error)]
    return ["OTSInternalServerError", f"internal error: {error}"]


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
                parsed, _in_transaction(db, txn, parsed)):
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
    except Exception as exc:  # a bug: answer it, keep serving
        log.exception("internal error serving native call %r", request[0])
        return frame((1, "OTSInternalServerError", f"internal error: {exc}"))


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


def pooled(request: tuple, size: int, transactions_open: bool) -> bool:
    """Whether a call may wait or run long, and so goes to the pool (``service.py``'s rules)."""
    op = request[0]
    if op in (BATCH_GET_ROW, BATCH_WRITE_ROW, DESCRIBE_TABLE) or op in STREAM_CALLS or size > INLINE_FRAME:
        return True
    txn = TRANSACTION_ARG.get(op)
    if txn is not None and request[txn]:
        return True
    if op in ROW_WRITES and transactions_open:
        return True
    if op == GET_RANGE:
        limit = request[5]
        return not (type(limit) is int and 0 < limit <= INLINE_RANGE_LIMIT)
    return False


# -- the connection --------------------------------------------------------------------


class NativeConnection(FramedConnection):
    """One upgraded connection: frames in, answers out, one call at a time, in order.

    It takes the place, in the server's connection set, of the HTTP connection it
    replaced, for the idle sweep and the drain."""

    def __init__(self, service, transport: asyncio.Transport, connections: set, peer: str) -> None:
        super().__init__(service, connections)
        self.db: Database = service.db
        self.poll = service.poll
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
        self._buffer = buffer[end:] if len(buffer) > end else b""
        self._serve(data)
        return True

    def _serve(self, data: bytes | memoryview) -> None:
        try:
            request = check(data)
        except WidetableError as exc:
            self._write(frame((1, exc.code, wire_message(exc))))
            return
        db = self.db
        if not pooled(request, len(data), db.transactions_open()):
            self._write(execute(db, request))
            return
        self.busy = True
        service = self.service
        service.jobs += 1
        loop = service.loop

        def finish(answer: bytes) -> None:
            service.jobs -= 1
            self.busy = False
            self.last_active = time.monotonic()
            self._write(answer)
            if not self._pumping:
                self._pump()

        def done(future) -> None:  # on the pool thread
            try:
                loop.call_soon_threadsafe(finish, future.result())
            except RuntimeError:  # the loop has stopped: drain's grace ran out
                log.warning("a native call finished after the server stopped; not answered")

        service.pool.submit(execute, db, request).add_done_callback(done)

    def _write(self, answer: bytes) -> None:
        transport = self.transport
        if self.closing or transport is None or transport.is_closing():
            self.closing = True
            return
        transport.write(answer)
        if self.service.draining:
            self.close()
        else:
            self.poll.answered()

    def _refuse(self, message: str) -> None:
        self._write(frame((1, "OTSParameterInvalid", message)))
        self._buffer = b""
        self.close()


def switch(conn, service, leftover: bytes | bytearray) -> None:
    """Give an HTTP connection that has just been answered ``101`` to the native protocol;
    ``leftover``: bytes it had received after the upgrade request."""
    transport = conn.transport
    native = NativeConnection(service, transport, conn.connections, conn.peer)
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
