"""Stream APIs: ListStream, DescribeStream, GetShardIterator, GetStreamRecord.

They serve the library's stream API (``stream/api.py``) in Tablestore's messages:

* A stream id is widetable's (``"<table>/<table id>"``, ...) as it is; ``creation_time``
  is the table's creation time in microseconds. ListStream's ``table_name`` is an
  optional filter.
* DescribeStream: ``expiration_time`` is the retention in hours (rounded up), the
  status ``STREAM_ACTIVE``. A shard's id is the decimal string of widetable's shard
  (partition) number; ``parent_id`` is its first parent, ``parent_sibling_id`` the
  second (a merge has two). Shards come in id order, ``shard_limit`` at a time (all
  without it) from ``inclusive_start_shard_id`` (one of the stream's shards);
  ``next_shard_id`` is the first one left out.
* GetShardIterator starts at the shard's oldest record (TRIM_HORIZON: the message
  has no position).
* GetStreamRecord (``limit`` 100 unless given): each record is one PlainBuffer row
  with its header: the primary key, then for PUT_ROW every cell with its value and
  timestamp, for UPDATE_ROW each change (a put: value and timestamp; a deleted
  version: DELETE_ONE_VERSION and its timestamp; a deleted column:
  DELETE_ALL_VERSION), for DELETE_ROW nothing more. A row extension carries the
  record's sequence info, outside the row's checksum: ``epoch`` = seq >> 32,
  ``timestamp`` = the commit time in microseconds, ``row_index`` = seq & 0xFFFFFFFF,
  so that (epoch, timestamp, row_index) orders a shard's records as widetable's
  sequence numbers do. ``next_shard_iterator`` is absent once a closed shard is drained.

Errors are the library's, with their Tablestore codes (``OTSObjectNotExist`` for a
stream that does not exist, ``OTSParameterInvalid`` for a bad shard id, limit or
iterator).
"""

from __future__ import annotations

from ...db import Database
from ...errors import ObjectNotExist, ParameterInvalid, describe
from ...stream.log import StreamRecord
from ...wire import convert, plainbuffer
from ...wire.plainbuffer import Cell, PlainRow, SeqInfo
from ...wire.proto import enum_value, pb

DEFAULT_RECORD_LIMIT = 100
_ACTIVE = enum_value("StreamStatus", "STREAM_ACTIVE")
_ACTIONS = {op: enum_value("ActionType", f"{op}_ROW") for op in ("PUT", "UPDATE", "DELETE")}
_MAX_SHARD_DIGITS = 10  # shard ids are u32


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _shard_number(text: str, what: str) -> int:
    """The shard number a shard id string names: a decimal integer as ``DescribeStream``
    writes it (no sign, no leading zeros)."""
    if not (0 < len(text) <= _MAX_SHARD_DIGITS and text.isascii() and text.isdigit()
            and (text == "0" or text[0] != "0")):
        raise ParameterInvalid(f"{what} {describe(text)} is not a shard id "
                               "(the decimal shard number DescribeStream lists)")
    return int(text)


def list_stream(db: Database, req) -> object:
    name = req.table_name if req.HasField("table_name") else None
    resp = pb.ListStreamResponse()
    for s in db.list_stream(name):
        resp.streams.add(stream_id=s.stream_id, table_name=s.table,
                         creation_time=_micros(s.created_at))
    return resp


def describe_stream(db: Database, req) -> object:
    start = 0
    if req.HasField("inclusive_start_shard_id"):
        start = _shard_number(req.inclusive_start_shard_id, "inclusive_start_shard_id")
    limit = None
    if req.HasField("shard_limit"):
        if req.shard_limit <= 0:
            raise ParameterInvalid(f"shard_limit must be > 0, got {req.shard_limit}")
        limit = req.shard_limit
    d = db.describe_stream(req.stream_id)
    created = next((s.created_at for s in db.list_stream(d.table) if s.stream_id == d.stream_id),
                   None)
    if created is None:  # the stream was turned off (or made anew) meanwhile
        raise ObjectNotExist(f"stream {describe(req.stream_id)} does not exist")
    resp = pb.DescribeStreamResponse(
        stream_id=d.stream_id, table_name=d.table, creation_time=_micros(created),
        expiration_time=convert.retention_hours(d.retention), stream_status=_ACTIVE,
    )
    if start and not any(s.shard_id == start for s in d.shards):
        raise ParameterInvalid(
            f"inclusive_start_shard_id {describe(req.inclusive_start_shard_id)}: "
            f"stream {d.stream_id!r} has no such shard")
    shards = sorted((s for s in d.shards if s.shard_id >= start), key=lambda s: s.shard_id)
    if limit is not None and len(shards) > limit:
        resp.next_shard_id = str(shards[limit].shard_id)
        shards = shards[:limit]
    for s in shards:
        shard = resp.shards.add(shard_id=str(s.shard_id))
        if s.parents:
            shard.parent_id = str(s.parents[0])
        if len(s.parents) > 1:
            shard.parent_sibling_id = str(s.parents[1])
    return resp


def get_shard_iterator(db: Database, req) -> object:
    shard = _shard_number(req.shard_id, "shard_id")
    iterator = db.get_shard_iterator(req.stream_id, shard, "TRIM_HORIZON")
    return pb.GetShardIteratorResponse(shard_iterator=iterator)


def _key_names(db: Database, iterator: str) -> list[str]:
    """The primary-key column names of the table an iterator (already read) reads."""
    table = db.iterator_table(iterator)
    if table is None:  # deleted since the records were read
        raise ObjectNotExist(f"the stream of iterator {describe(iterator)} does not exist")
    return [column[0] for column in table.schema.primary_key]


def encode_record(names: list[str], record: StreamRecord) -> bytes:
    """One stream record as a PlainBuffer row with its header and sequence info."""
    cells = []
    for c in record.columns:
        if c.kind == "PUT":
            cells.append(Cell(c.name, c.value, None, c.timestamp))
        elif c.kind == "DELETE_ONE_VERSION":
            cells.append(Cell(c.name, None, plainbuffer.DELETE_ONE_VERSION, c.timestamp))
        else:  # DELETE_ALL_VERSIONS
            cells.append(Cell(c.name, None, plainbuffer.DELETE_ALL_VERSION, None))
    seq = record.sequence
    info = SeqInfo(seq >> 32, record.timestamp * 1000, seq & 0xFFFFFFFF)
    pk = list(zip(names, record.primary_key))
    return plainbuffer.encode_row(PlainRow(pk, cells, False, info))


def get_stream_record(db: Database, req) -> object:
    limit = req.limit if req.HasField("limit") else DEFAULT_RECORD_LIMIT
    page = db.get_stream_record(req.shard_iterator, limit)
    resp = pb.GetStreamRecordResponse()
    if page.records:
        names = _key_names(db, req.shard_iterator)
        for r in page.records:
            resp.stream_records.add(action_type=_ACTIONS[r.operation],
                                    record=encode_record(names, r))
    if page.next_iterator is not None:
        resp.next_shard_iterator = page.next_iterator
    return resp
