"""The client side of widetable's own protocol (``wire/native.py``), for ``widetable.connect``.

Each thread has its own connection, upgraded once with a signed request; a
data call is then one frame out and one frame back. :class:`NativeChannel`
raises :class:`Unsendable` for a call it cannot carry (a value MessagePack has
no type for, a filter or condition that is not one): the caller then sends it
over Tablestore's protocol, whose checks name what is wrong. A server that
refuses the upgrade (the Tablestore service) turns the channel off for good,
through ``on_refused``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from time import perf_counter
from typing import Any

import msgspec

from .. import errors as errs
from ..descriptions import IndexDescription, LoopState, TableDescription
from ..errors import NotSupported, WidetableError
from ..partition.manager import PartitionInfo
from ..partition.meta import PartitionEvent
from ..partition.retry import RETRYABLE
from ..stream.api import ShardInfo, StreamDescription, StreamInfo, StreamRecords
from ..stream.log import StreamColumn, StreamRecord
from ..table.filters import as_condition
from ..table.row import BatchGetResult, BatchWriteResult, RangeResult, Row, WriteResult
from ..table.rowcodec import FORMAT
from ..table.schema import TableOptions
from ..wire import convert
from ..wire.busypoll import PREEMPTED, QUIET
from ..wire.native import (
    ANSWER_ROW,
    API,
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
    UPDATE_ROW,
    UPGRADE,
    ext_hook,
    pack,
    read_answer,
    wire_bound,
)
from ..wire.proto import pb
from . import idempotent as idem
from .transport import (
    ThreadConnections,
    Transport,
    _Closed,
    _Connection,
    _NotSent,
    _Protocol,
    error_of,
    peer_closed,
    unreachable,
)

# Codes with which a server refuses the upgrade: it does not know the API, speaks another
# version of the protocol, or (a widetable server of an earlier release, which answered
# another version so) takes the upgrade request itself for a malformed one.
_NOT_SERVED = frozenset({"OTSUnsupportOperation", "OTSInvalidAPI", "OTSParameterInvalid"})
_UPGRADE_HEADERS = f"Upgrade: {UPGRADE}\r\nConnection: Upgrade\r\n".encode()
MAX_ANSWER = 4 * MAX_FRAME  # bytes of one answer (a range page is at most 4 MB of rows)
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)  # none on Windows: no busy polling there


class Unsendable(Exception):
    """This call cannot travel over the native protocol; send it over Tablestore's."""


def _filter(f: object) -> bytes | None:
    if f is None:
        return None
    if not convert.is_filter(f):
        raise Unsendable("not a filter")
    return convert.encode_filter(f)


def _condition(condition: object) -> bytes | None:
    try:
        condition = as_condition(condition)
    except WidetableError:
        raise Unsendable("not a condition") from None
    if condition is None:
        return None
    msg = pb.Condition()
    convert.encode_condition(msg, condition)
    return msg.SerializeToString()


def _plain_item(item: object, key: int) -> None:
    """A batch item travels if its table is a name and its key (``item[key]``) not a
    list (MessagePack would not tell a list from a tuple); else Tablestore's path
    handles it."""
    if not isinstance(item, (list, tuple)) or len(item) <= key:
        return  # the server rejects it as the embedded store does
    if type(item[0]) is not str or type(item[key]) is list:
        raise Unsendable("a batch item to send over Tablestore's protocol")


class _Stored(msgspec.Struct, array_like=True, tag=FORMAT, gc=False):
    """A row as stored, ``[FORMAT, pk, latest, timestamps, history]`` (``rowcodec``)."""

    primary_key: tuple
    columns: dict
    stamps: Any
    history: Any = None


class _Built(msgspec.Struct, array_like=True, tag=ANSWER_ROW, gc=False):
    """A row the server built, ``[0, pk, columns, timestamps, versions]``."""

    primary_key: tuple
    columns: dict
    stamps: Any
    versions: Any = None


# An answer's rows decode in one call into these shapes (their first element tells
# which), then become Rows: a stored row without its history, which a read without
# options does not return. (Decoding into Row subclasses would save the second step,
# but their msgspec encoding would differ from a Row's.)
_decode_range = msgspec.msgpack.Decoder(
    tuple[int, tuple[list[_Stored | _Built], tuple | None]], ext_hook=ext_hook).decode
_decode_row = msgspec.msgpack.Decoder(tuple[int, _Stored | _Built | None], ext_hook=ext_hook).decode
_OK = b"\x92\x00"  # an answer [0, result]; anything else is an error, read generically


def _shape_row(s: _Stored | _Built) -> Row:
    if type(s) is _Stored:
        return Row(s.primary_key, s.columns, s.stamps)  # no history: a plain read has none
    return Row(s.primary_key, s.columns, s.stamps, s.versions)


def _range_answer(data: bytes | memoryview) -> object:
    if data[:2] != _OK:
        return read_answer(data)
    rows, nxt = _decode_range(data)[1]
    return 0, (list(map(_shape_row, rows)), nxt)


def _description_answer(data: bytes | memoryview) -> object:
    """A description as ``Database.describe_table`` makes it: the server sends its fields as
    maps, rebuilt here with each value of the type it was sent as (a partition option may
    be an int or a float, which a typed decode would force to its annotation)."""
    answer = read_answer(data)
    if answer[0] != 0:
        return answer
    d = answer[1]
    try:
        d["primary_key"] = [tuple(c) for c in d["primary_key"]]
        d["defined_columns"] = [tuple(c) for c in d["defined_columns"]]
        d["options"] = TableOptions(**d["options"])
        d["partitions"] = [PartitionInfo(**p) for p in d["partitions"]]
        d["split_history"] = [
            PartitionEvent(**{**e, "parents": tuple(e["parents"]), "children": tuple(e["children"])})
            for e in d["split_history"]]
        d["indexes"] = [IndexDescription(**{**i, "primary_key": tuple(i["primary_key"]),
                                            "defined_columns": tuple(i["defined_columns"]),
                                            "base_key": tuple(i.get("base_key", ()))})
                        for i in d["indexes"]]
        d["background"] = [LoopState(**b) for b in d.get("background", ())]
        return 0, TableDescription(**d)
    except (TypeError, KeyError, AttributeError) as exc:
        raise _Protocol(f"a table description of another shape: {exc}") from None


def _row_answer(data: bytes | memoryview) -> object:
    if data[:2] != _OK:
        return read_answer(data)
    s = _decode_row(data)[1]
    return 0, None if s is None else _shape_row(s)


def _row(row: list | None) -> Row | None:
    """A row of a generically decoded answer (a batch's): a stored row, whose history
    a read without options does not return, or one the server built."""
    if row is None:
        return None
    if row[0] == FORMAT:
        return Row(tuple(row[1]), row[2], row[3])
    return Row(tuple(row[1]), row[2], row[3], row[4])


def _written(result: list) -> WriteResult:
    pk, increments = result
    return WriteResult(tuple(pk)) if increments is None else WriteResult(tuple(pk), increments)


def _error(error: tuple | None) -> WidetableError | None:
    return None if error is None else error_of(*error)


class NativeChannel:
    """Data calls over upgraded connections, one per thread; throttling errors are retried."""

    def __init__(self, transport: Transport, on_refused: Callable[[], None] | None,
                 busy_poll: int = 0) -> None:
        """``on_refused``: called once if the server refuses the upgrade (None: raise
        ``OTSUnsupportOperation`` instead). ``busy_poll``: microseconds to poll for an
        answer before sleeping, while answers come that fast (see ``_send``)."""
        self._spin = busy_poll / 1e6 if _DONTWAIT else 0.0
        self._waiting: set[_Connection] = set()  # connections waiting for a polled answer
        self._transport = transport
        self._on_refused = on_refused
        self._retrier = transport.retrier
        self._conns = ThreadConnections()

    # -- the calls -------------------------------------------------------------------

    def get_row(self, table, pk, columns, max_versions, time_range, filter, txn) -> Row | None:
        if filter is not None:
            filter = _filter(filter)
        return self.call((GET_ROW, table, pk, columns, max_versions, time_range, filter, txn),
                         _row_answer, True)

    def get_range(self, table, start, end, direction, limit, columns, max_versions, time_range,
                  filter, txn) -> RangeResult:
        rows, nxt = self.call((GET_RANGE, table, wire_bound(start), wire_bound(end), direction,
                               limit, columns, max_versions, time_range, _filter(filter), txn),
                              _range_answer, True)
        return RangeResult(rows, nxt)

    def put_row(self, table, pk, columns, condition, txn) -> WriteResult:
        return _written(self.call((PUT_ROW, table, pk, columns, _condition(condition), txn),
                                  read_answer, idem.write("put", pk, None, condition)))

    def update_row(self, table, pk, put, delete_version, delete_column, increment, condition,
                   txn) -> WriteResult:
        return _written(self.call((UPDATE_ROW, table, pk, put, delete_version, delete_column,
                                   increment, _condition(condition), txn), read_answer,
                                  not increment and idem.blind(condition)))

    def delete_row(self, table, pk, condition, txn) -> WriteResult:
        return _written(self.call((DELETE_ROW, table, pk, _condition(condition), txn),
                                  read_answer, idem.blind(condition)))

    # -- the change stream (answers: wire/native.py's docstring) -------------------------

    def describe_table(self, name) -> TableDescription:
        return self.call((DESCRIBE_TABLE, name), _description_answer, True)

    def list_stream(self, table) -> list[StreamInfo]:
        return [StreamInfo(*s) for s in self.call((LIST_STREAM, table), read_answer, True)]

    def describe_stream(self, stream_id) -> StreamDescription:
        sid, table, status, retention, shards, lagging = self.call((DESCRIBE_STREAM, stream_id),
                                                                   read_answer, True)
        return StreamDescription(sid, table, status, retention, [
            ShardInfo(shard, tuple(parents), tuple(children), start, end, closed)
            for shard, parents, children, start, end, closed in shards
        ], list(lagging))

    def get_shard_iterator(self, stream_id, shard_id, position) -> str:
        return self.call((GET_SHARD_ITERATOR, stream_id, shard_id, position), read_answer, True)

    def get_stream_record(self, iterator, limit) -> StreamRecords:
        records, nxt = self.call((GET_STREAM_RECORD, iterator, limit), read_answer, True)
        return StreamRecords([
            StreamRecord(seq, shard, op, tuple(pk),
                         tuple(StreamColumn(*c) for c in columns), ts)
            for seq, shard, op, pk, columns, ts in records
        ], nxt)

    def batch_get_row(self, requests: object) -> list[BatchGetResult]:
        if not isinstance(requests, (list, tuple)):
            raise Unsendable("not a list")
        items = []
        for item in requests:
            _plain_item(item, 1)
            if (isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[2], dict)
                    and item[2].get("filter") is not None):
                opts = dict(item[2])
                opts["filter"] = _filter(opts["filter"])
                item = (item[0], item[1], opts)
            items.append(item)
        return [BatchGetResult(table, tuple(pk), _row(row), _error(error))
                for table, pk, row, error in self.call((BATCH_GET_ROW, items), read_answer, True)]

    def batch_write_row(self, requests: object, txn: str | None) -> list[BatchWriteResult]:
        if not isinstance(requests, (list, tuple)):
            raise Unsendable("not a list")
        items = []
        for item in requests:
            _plain_item(item, 2)
            if isinstance(item, (list, tuple)) and len(item) == 5 and item[4] is not None:
                item = (*item[:4], _condition(item[4]))
            items.append(item)
        out = []
        for table, op, pk, incs, error in self.call((BATCH_WRITE_ROW, items, txn), read_answer,
                                                    idem.batch(requests)):
            pk = tuple(pk)
            out.append(BatchWriteResult(table, op, pk, None if incs is None else WriteResult(pk, incs),
                                        _error(error)))
        return out

    # -- frames ----------------------------------------------------------------------

    def call(self, request: tuple, decode: Callable = read_answer,
             idempotent: bool = False) -> object:
        """Send one call, return its result or raise its error; ``decode`` reads the answer
        frame (typed decoders read an error answer generically). ``idempotent``: whether
        the call may run twice; one that may not and loses its connection after it was
        sent raises ``OutcomeUnknown`` (client/idempotent.py)."""
        try:
            payload = pack(request)
        except (TypeError, ValueError, OverflowError) as exc:
            raise Unsendable(str(exc)) from None
        if len(payload) > MAX_FRAME:
            raise Unsendable("over the frame limit")  # Tablestore's path names the limit
        data = HEADER.pack(len(payload)) + payload
        try:
            return self._send(data, decode, idempotent)
        except WidetableError as exc:
            if exc.code not in RETRYABLE:
                raise
        return self._retrier.call(self._send, data, decode, idempotent)  # throttled: again

    def _send(self, data: bytes, decode: Callable = read_answer,
              idempotent: bool = True) -> object:
        conn = self._conns.get()
        reused = conn is not None and conn.sock is not None
        if reused and not idempotent and peer_closed(conn):  # type: ignore[arg-type]
            self._conns.drop(conn)  # closed while idle: this call would be lost unsent
            reused = False
        if not reused:
            conn = self._connect()
        waiting = self._waiting
        sent = False
        try:
            if self._spin and conn._tls is None:
                # Busy polling: while answers come back within the window (the server is
                # on this machine and fast), poll for this one instead of sleeping at
                # once: a thread woken from sleep costs more than the answer takes. Only
                # a call that waits alone polls: calls of other threads need the GIL
                # that each poll takes.
                waiting.add(conn)
                start = perf_counter()
                try:
                    conn.sock.sendall(data)  # type: ignore[union-attr]
                except OSError as exc:  # the server never had all of the frame: it ran nothing
                    raise _NotSent(exc) from None
                sent = True
                answer = _read_frame(conn, decode, self._spin if len(waiting) == 1 else 0.0,
                                     start)
            else:
                try:
                    conn.sock.sendall(data)  # type: ignore[union-attr]
                except OSError as exc:  # a frame runs only once it has arrived whole
                    raise _NotSent(exc) from None
                sent = True
                answer = _read_frame(conn, decode)
        except (_Closed, ConnectionResetError, BrokenPipeError):
            self._conns.drop(conn)
            if sent and not idempotent:  # it may have run before the connection dropped
                raise idem.outcome_unknown(_api_of(data), self._transport.endpoint,
                                           "the server closed the connection") from None
            if not reused:  # a fresh connection closed at once: not a stale one
                raise WidetableError(f"the server at {self._transport.endpoint} closed the "
                                     "connection", errs.INTERNAL_SERVER_ERROR) from None
            return self._send(data, decode, idempotent)  # closed while idle: a fresh one
        except _Protocol as exc:
            self._conns.drop(conn)
            raise WidetableError(f"the server at {self._transport.endpoint} broke widetable's "
                                 f"protocol: {exc}", errs.INTERNAL_SERVER_ERROR) from None
        except OSError as exc:
            self._conns.drop(conn)
            error = unreachable(self._transport.endpoint, exc, self._transport._timeout)
            if sent and not idempotent:
                raise idem.outcome_unknown(_api_of(data), self._transport.endpoint,
                                           error.message) from None
            raise error from None
        finally:
            waiting.discard(conn)
        if answer[0] == 0:
            return answer[1]
        raise error_of(answer[1], answer[2])

    def _connect(self) -> _Connection:
        """A new connection for this thread, upgraded."""
        t = self._transport
        conn = _Connection(t._host, t._port, t._timeout, t._ssl, t._authority)
        head = t._request(API, b"")  # signed now: the date is part of the signature
        line = head.index(b"\r\n") + 2
        upgrade = head[:line] + _UPGRADE_HEADERS + head[line:]
        try:
            status, reason, got, body = conn.exchange(upgrade)
        except (_Closed, _Protocol) as exc:
            conn.close()
            raise WidetableError(f"cannot reach {t.endpoint}: {exc}",
                                 errs.INTERNAL_SERVER_ERROR) from None
        except OSError as exc:
            conn.close()
            raise unreachable(t.endpoint, exc, t._timeout) from None
        if status != 101:
            conn.close()
            self._refused(status, reason, body)
        t._check_signature(API, got)
        self._conns.keep(conn)
        return conn

    def _refused(self, status: int, reason: str, body: bytes) -> None:
        try:
            error = pb.Error.FromString(body)
            code, message = error.code, error.message
        except Exception:  # noqa: BLE001 - any undecodable body is the same refusal
            code, message = "", f"HTTP {status} {reason}"
        if code and code not in _NOT_SERVED and status != 404:
            raise error_of(code, message)  # e.g. OTSAuthFailed: the same on every path
        if self._on_refused is None:
            raise NotSupported(f"the server at {self._transport.endpoint} does not speak "
                               f"widetable's own protocol: {message}")
        self._on_refused()
        raise Unsendable("the server does not speak widetable's own protocol")

    def close(self) -> None:
        self._conns.close()


def _api_of(frame: bytes) -> str:
    """The name of the call a request frame carries, for an error message."""
    try:
        op = msgspec.msgpack.decode(frame[HEADER.size:], ext_hook=ext_hook)[0]
    except Exception:  # noqa: BLE001 - a name for a message only
        return "the call"
    return _OP_NAMES.get(op, "the call")


_OP_NAMES = {GET_ROW: "GetRow", GET_RANGE: "GetRange", PUT_ROW: "PutRow",
             UPDATE_ROW: "UpdateRow", DELETE_ROW: "DeleteRow", BATCH_GET_ROW: "BatchGetRow",
             BATCH_WRITE_ROW: "BatchWriteRow"}

RECV_START = 64 * 1024  # bytes of a connection's receive buffer at first, reused for every answer
RECV_KEEP = 1024 * 1024  # the most it grows to, for larger answers; past that, one buffer each


def _recv_soon(conn: _Connection, view: memoryview, until: float) -> int:
    """``conn.sock.recv_into(view)``, polling (without sleeping) until ``until`` (a
    ``perf_counter`` time) before it waits as usual. Each poll releases the GIL. A
    gap between two polls (another thread took the CPU or the GIL) ends the polling,
    and the connection does not poll for QUIET seconds: the CPU is wanted elsewhere."""
    sock = conn.sock
    last = perf_counter()
    while True:
        try:
            return sock.recv_into(view, 0, _DONTWAIT)  # type: ignore[union-attr]
        except BlockingIOError:
            now = perf_counter()
            if now - last > PREEMPTED:
                conn.quiet = now + QUIET
            elif now < until:
                last = now
                continue
            return sock.recv_into(view)  # type: ignore[union-attr]


def _read_frame(conn: _Connection, decode: Callable = read_answer, spin: float = 0.0,
                sent: float = 0.0) -> list:
    """The next answer on ``conn``. An answer that fits the connection's receive buffer
    (which grows to RECV_KEEP bytes as answers need) is received into it and decoded
    there, with no allocation and no copy; a larger one is read on into one buffer of
    its size. ``spin``: seconds to poll for the answer's first bytes, counted from
    ``sent`` (``_recv_soon``), if the connection's answers have been arriving that
    fast (``conn.rtt``, which this call updates) and it has not lost its CPU while
    polling lately (``conn.quiet``)."""
    buf = conn._buf
    sock = conn.sock
    if not buf:
        view = conn.recv_view
        if view is None:
            view = conn.recv_view = memoryview(bytearray(RECV_START))
        if spin:
            if conn.rtt <= spin and sent >= conn.quiet:
                got = _recv_soon(conn, view, sent + spin)
            else:
                got = sock.recv_into(view)  # type: ignore[union-attr]
            conn.rtt += (perf_counter() - sent - conn.rtt) * 0.25  # a moving average
        else:
            got = sock.recv_into(view)  # type: ignore[union-attr]
        if not got:
            raise _Closed
        if got >= 4:
            size = HEADER.unpack_from(view)[0] + 4
            if len(view) < size <= RECV_KEEP:
                bigger = memoryview(bytearray(min(max(size, 2 * len(view)), RECV_KEEP)))
                bigger[:got] = view[:got]
                view = conn.recv_view = bigger
            if size <= len(view):
                while got < size:  # never past this frame: the buffer is reused
                    more = sock.recv_into(view[got:size])  # type: ignore[union-attr]
                    if not more:
                        raise _Protocol("the answer ended inside its frame")
                    got += more
                if got > size:  # bytes of a later frame: keep them
                    buf += view[size:got]
                return decode(view[4:size])
        buf += view[:got]
    while len(buf) < 4:
        if not conn._more():
            raise _Protocol("the answer ended inside its frame")
    size = HEADER.unpack_from(buf)[0] + 4
    if size > MAX_ANSWER + 4:
        raise _Protocol(f"an answer of {size} bytes is over the frame limit")
    if len(buf) >= size:
        data = bytes(buf[4:size])
        del buf[:size]
        return decode(data)
    whole = bytearray(size)  # every byte buffered belongs to this answer
    have = len(buf)
    whole[:have] = buf
    buf.clear()
    view = memoryview(whole)
    while have < size:
        got = sock.recv_into(view[have:])  # type: ignore[union-attr]
        if not got:
            raise _Protocol("the answer ended inside its frame")
        have += got
    return decode(view[4:])
