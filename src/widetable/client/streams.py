"""The change stream over Tablestore's protocol: ListStream, DescribeStream,
GetShardIterator and GetStreamRecord (``server/tablestore/streams.py`` serves them).

``RemoteDatabase`` uses these when the server does not speak widetable's own
protocol, which carries the embedded results exactly. They read a widetable
server's streams: shard ids are widetable's shard numbers and iterators its own
(the Tablestore service's opaque ones are refused with ``OTSNotSupported`` /
``OTSParameterInvalid``). Tablestore's messages carry less, so here:

* a shard's key range is not known (``start`` and ``end`` are None), and a shard
  is closed exactly when it has children (splits and merges close shards);
* ``lagging_consumers`` is empty;
* an iterator starts at ``TRIM_HORIZON`` only (GetShardIterator has no position);
* a record's sequence number and commit time come from its sequence info
  (``epoch`` and ``row_index`` hold the sequence's two halves, the timestamp is
  in microseconds), and its shard from the iterator it was read with.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import NotSupported, ObjectNotExist, ParameterInvalid, WidetableError, describe
from ..stream import api as stream_api
from ..stream.api import ShardInfo, StreamDescription, StreamInfo, StreamRecords
from ..stream.log import StreamColumn, StreamRecord
from ..wire import plainbuffer
from ..wire.proto import enum_value, pb

_OPERATIONS = {enum_value("ActionType", n): op for n, op in (
    ("PUT_ROW", "PUT"), ("UPDATE_ROW", "UPDATE"), ("DELETE_ROW", "DELETE"))}
_KINDS = {None: "PUT", plainbuffer.DELETE_ONE_VERSION: "DELETE_ONE_VERSION",
          plainbuffer.DELETE_ALL_VERSION: "DELETE_ALL_VERSIONS"}

Call = Callable[[str, object], bytes]  # RemoteDatabase._call: (API, request) -> response body


def list_stream(call: Call, table: str | None) -> list[StreamInfo]:
    req = pb.ListStreamRequest()
    if table is not None:
        if not isinstance(table, str):
            raise ParameterInvalid(f"table must be a name, got {describe(table)}")
        req.table_name = table
    resp = pb.ListStreamResponse.FromString(call("ListStream", req))
    return [StreamInfo(s.stream_id, s.table_name, s.creation_time / 1e6) for s in resp.streams]


def describe_stream(call: Call, stream_id: str) -> StreamDescription:
    if not isinstance(stream_id, str):
        raise ParameterInvalid(f"stream_id must be a string, got {describe(stream_id)}")
    shards: list = []
    table, retention, start = "", 0, None
    while True:  # the shards come in pages
        req = pb.DescribeStreamRequest(stream_id=stream_id)
        if start is not None:
            req.inclusive_start_shard_id = start
        resp = pb.DescribeStreamResponse.FromString(call("DescribeStream", req))
        table, retention = resp.table_name, resp.expiration_time * 3600
        shards += resp.shards
        if not resp.HasField("next_shard_id") or not resp.next_shard_id:
            break
        start = resp.next_shard_id
    try:
        parents = {int(s.shard_id): tuple(int(p) for p in (s.parent_id, s.parent_sibling_id) if p)
                   for s in shards}
    except ValueError:
        raise NotSupported(
            f"stream {stream_id!r} has shard ids that are not widetable's shard numbers: "
            "widetable.connect reads the streams of widetable servers") from None
    children: dict[int, list[int]] = {}
    for shard, ps in parents.items():
        for p in ps:
            children.setdefault(p, []).append(shard)
    return StreamDescription(stream_id, table, "active", retention, [
        ShardInfo(shard, ps, tuple(children.get(shard, ())), None, None, shard in children)
        for shard, ps in sorted(parents.items())
    ])


def get_shard_iterator(call: Call, stream_id: str, shard_id: int, position: object) -> str:
    if not isinstance(stream_id, str):
        raise ObjectNotExist(f"stream {describe(stream_id)} does not exist")
    if position != "TRIM_HORIZON":
        raise NotSupported(
            f"position {describe(position)}: over Tablestore's protocol a shard iterator starts "
            "at TRIM_HORIZON; widetable's own protocol (a widetable server) takes LATEST and "
            "sequence numbers")
    if type(shard_id) is not int:
        raise ParameterInvalid(f"shard_id must be an int, got {describe(shard_id)}")
    req = pb.GetShardIteratorRequest(stream_id=stream_id, shard_id=str(shard_id))
    return pb.GetShardIteratorResponse.FromString(call("GetShardIterator", req)).shard_iterator


def get_stream_record(call: Call, iterator: str, limit: int = 100) -> StreamRecords:
    if not isinstance(iterator, str):
        raise ParameterInvalid(f"invalid shard iterator {describe(iterator)}")
    shard = stream_api.decode_iterator(iterator)[1]  # widetable's iterators name their shard
    if type(limit) is not int or not -2**31 <= limit < 2**31:
        # Not an int32, so it cannot travel. The store looks at the iterator's stream
        # before the limit: ask with limit 0 so the server does so (a stream turned off
        # or made anew answers OTSObjectNotExist), then refuse this limit.
        try:
            call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=iterator, limit=0))
        except ParameterInvalid:
            pass
        raise ParameterInvalid(f"limit must be 1-1000 records, got {describe(limit)}")
    req = pb.GetStreamRecordRequest(shard_iterator=iterator, limit=limit)
    resp = pb.GetStreamRecordResponse.FromString(call("GetStreamRecord", req))
    records = [_record(r, shard) for r in resp.stream_records]
    nxt = resp.next_shard_iterator if resp.HasField("next_shard_iterator") else None
    return StreamRecords(records, nxt or None)


def _record(msg, shard: int) -> StreamRecord:
    row = plainbuffer.decode_row(msg.record)
    seq = row.sequence
    if seq is None:
        raise WidetableError("a stream record without its sequence info")
    epoch, ts_us, index = seq
    columns = tuple(StreamColumn(c.name, _KINDS.get(c.op, "PUT"), c.value, c.timestamp)
                    for c in row.cells)
    return StreamRecord((epoch << 32) | index, shard, _OPERATIONS[msg.action_type],
                        tuple(v for _, v in row.primary_key), columns, ts_us // 1000)
