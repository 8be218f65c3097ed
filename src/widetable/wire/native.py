"""widetable's own protocol, for ``widetable.connect``: MessagePack frames on an upgraded connection.

This module is the protocol's codec, shared by the client (``client/native.py``) and
the server (``server/native/``).

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
the server's one rule (``server/core/dispatch.py``). A frame that is not a call
gets ``OTSParameterInvalid``; one over the size limit also closes the connection.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import msgspec

from ..keys import codec

API = "WidetableNative"  # the path of the upgrade request, signed as an API name
UPGRADE = "widetable-native/4"  # /2: rows carry their form first; /3: stream calls; /4: describe
HEADER = struct.Struct("<I")
MAX_FRAME = 5 * 2**20
EXT_INF_MIN, EXT_INF_MAX = 1, 2

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
