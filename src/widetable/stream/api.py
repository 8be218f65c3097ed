"""Tablestore's Stream API over the change log.

A table with ``stream=True`` has one stream, ``"<table>/<table id>"``; turning the
stream off and on again makes a new one, ``"<table>/<table id>/<seq>"``, holding
the records after that change seq (the old id and its iterators no longer
resolve, so a reader knows it missed the gap). Its
shards are the table's partitions, past and present: a split closes its
parent shard and opens two children, a merge closes two and opens one, and
``describe_stream`` shows the links. Within a shard, records come in commit
order; a key's records before a split are in the parent, later ones in the
child, so reading each parent to its end before its children keeps every
key's records in order. Iterators are opaque strings.

Every function takes the store context (``widetable.context.StoreContext``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import msgpack

from ..errors import ObjectNotExist, ParameterInvalid, TrimmedDataAccess, describe
from ..keys import layout
from . import log
from .log import StreamRecord


@dataclass(frozen=True, slots=True)
class StreamInfo:
    stream_id: str
    table: str
    created_at: float


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard. ``parents``: the shard(s) it was split from or merged from;
    ``children``: the shards it became. A closed shard takes no new records."""

    shard_id: int
    parents: tuple[int, ...]
    children: tuple[int, ...]
    start: object  # partition-key values; None = unbounded (only for open shards)
    end: object
    closed: bool


@dataclass(frozen=True, slots=True)
class StreamDescription:
    stream_id: str
    table: str
    status: str
    retention: int  # seconds
    shards: list[ShardInfo] = field(default_factory=list)
    lagging_consumers: list[str] = field(default_factory=list)  # indexes behind retention


@dataclass(frozen=True, slots=True)
class StreamRecords:
    records: list[StreamRecord]
    next_iterator: str | None  # None: the shard is closed and drained

    def __iter__(self):
        return iter(self.records)


def stream_id_of(schema) -> str:
    """``table/table_id``, and ``/since`` once the stream was turned off and on again (a new
    stream: the old one's id and iterators no longer name it)."""
    base = f"{schema.name}/{schema.table_id}"
    return f"{base}/{schema.stream_since}" if schema.stream_since else base


def _stream_table(ctx, stream_id: object):
    if isinstance(stream_id, str) and "/" in stream_id:
        name = stream_id.split("/", 1)[0]
        table = ctx.tables.get(name)
        if table is not None and table.schema.stream and stream_id == stream_id_of(table.schema):
            return table
    raise ObjectNotExist(f"stream {describe(stream_id)} does not exist")


def list_stream(ctx, name: str | None = None) -> list[StreamInfo]:
    tables = [ctx.catalog.base_table(name)] if name is not None else list(ctx.tables.values())
    return [
        StreamInfo(stream_id_of(t.schema), t.name, t.schema.created_at)
        for t in sorted(tables, key=lambda t: t.name) if t.schema.stream
    ]


def describe_stream(ctx, stream_id: str) -> StreamDescription:
    table = _stream_table(ctx, stream_id)
    tp = ctx.partitions.partitions(table)
    live = {p.id: p for p in tp.router.parts}
    parents: dict[int, list[int]] = {}
    children: dict[int, list[int]] = {}
    for event in tp.events():
        if event.kind in ("split", "merge"):
            for child in event.children:
                parents.setdefault(child, []).extend(event.parents)
            for parent in event.parents:
                children.setdefault(parent, []).extend(event.children)
    shards = []
    for shard in range(tp.next_id):
        p = live.get(shard)
        shards.append(ShardInfo(
            shard, tuple(parents.get(shard, ())), tuple(children.get(shard, ())),
            tp.value_of(p.start) if p else None, tp.value_of(p.end) if p else None, p is None,
        ))
    lagging = [_display_name(name) for name in ctx.changelog.lagging(table)]
    return StreamDescription(stream_id, table.name, "active", table.schema.stream_retention,
                             shards, lagging)


def check_position(position: object) -> None:
    """ParameterInvalid unless ``position`` is where an iterator may start."""
    if type(position) is str and position in ("TRIM_HORIZON", "LATEST"):
        return
    if type(position) is int and 0 <= position < _SEQ_END:
        return
    raise ParameterInvalid(
        f"position must be 'TRIM_HORIZON', 'LATEST' or a sequence number, got {describe(position)}")


def _display_name(consumer: str) -> str:
    """A consumer as describe_stream lists it: a global index by its name."""
    return consumer.split(":", 1)[1] if consumer.startswith("index:") else consumer


def get_shard_iterator(ctx, stream_id: str, shard_id: object, position: object) -> str:
    table = _stream_table(ctx, stream_id)
    tp = ctx.partitions.partitions(table)
    if type(shard_id) is not int or not 0 <= shard_id < tp.next_id:
        raise ParameterInvalid(f"stream {stream_id!r} has no shard {describe(shard_id)}")
    check_position(position)
    since = table.schema.stream_since
    if position == "TRIM_HORIZON":  # the oldest record retention has kept
        after = max(since or -1, log.trim_mark(ctx.engine, table.schema.table_id, shard_id))
    elif position == "LATEST":
        after = table._changes.seq if table._changes is not None else 0
    else:
        after = max(position - 1, since)  # type: ignore[operator]  # no record from before this stream began
    return _encode(table.schema.table_id, shard_id, after, since)


def iterator_table(ctx, iterator: object):
    """The table whose stream ``iterator`` reads (None: it is gone); ParameterInvalid if
    ``iterator`` is not one."""
    return _table_of(ctx, decode_iterator(iterator)[0])


def _table_of(ctx, table_id: int):
    return next((t for t in list(ctx.tables.values()) if t.schema.table_id == table_id), None)


MAX_PAGE_BYTES = 4 * 2**20  # of stored records in one page, as a range page's rows (at least one)


def get_stream_record(ctx, iterator: object, limit: int = 100) -> StreamRecords:
    table_id, shard, after, since = decode_iterator(iterator)
    table = _table_of(ctx, table_id)
    if table is None or not table.schema.stream or table.schema.stream_since != since:
        # No stream, or a newer one: the stream was turned off (and on) since.
        raise ObjectNotExist(f"the stream of iterator {describe(iterator)} does not exist")
    if type(limit) is not int or not 1 <= limit <= 1000:
        raise ParameterInvalid(f"limit must be 1-1000 records, got {describe(limit)}")
    tp = ctx.partitions.partitions(table)
    closed = shard not in {p.id for p in tp.router.parts}
    feed = table._changes
    if closed and feed is not None:
        feed.barrier()  # no write can still be on its way into a closed shard
    engine = ctx.engine
    trimmed = log.trim_mark(engine, table_id, shard)
    if after < trimmed:
        raise TrimmedDataAccess(
            f"the records of shard {shard} after sequence {after} up to {trimmed} are past the "
            f"stream's retention and were trimmed; start again from TRIM_HORIZON")
    records: list[StreamRecord] = []
    more = False
    size = 0
    for key, value in engine.scan(*layout.change_log_range(table_id, shard, after)):
        if len(records) >= limit or size >= MAX_PAGE_BYTES:
            more = True
            break
        size += len(value)
        after = layout.change_log_seq(key)
        if log.is_purge(value):  # internal records: Tablestore's TTL makes no stream records
            continue
        records.append(log.decode_record(key, value))
    if closed and not more:
        return StreamRecords(records, None)
    return StreamRecords(records, _encode(table_id, shard, after, since))


def _encode(table_id: int, shard: int, after: int, since: int) -> str:
    fields = [1, table_id, shard, after] if not since else [2, table_id, shard, after, since]
    return base64.urlsafe_b64encode(msgpack.packb(fields)).decode("ascii")


_SEQ_END = 2**64 - 1  # sequence numbers are u64 in the log's keys; "after" is one less


def decode_iterator(iterator: object) -> tuple[int, int, int, int]:
    """``(table_id, shard, after, since)`` of an iterator: ``[1, table_id, shard, after]``,
    or ``[2, table_id, shard, after, since]`` in a stream that was turned on again."""
    try:
        fields = msgpack.unpackb(base64.urlsafe_b64decode(iterator))  # type: ignore[arg-type]
        if fields[0] == 1 and len(fields) == 4:
            _, table_id, shard, after = fields
            since = 0
        elif fields[0] == 2 and len(fields) == 5:
            _, table_id, shard, after, since = fields
        else:
            raise ValueError(fields)
        if not all(type(x) is int for x in (table_id, shard, after, since)):
            raise ValueError(fields)
        if not (0 <= table_id < 2**32 and 0 <= shard < 2**32 and -1 <= after < _SEQ_END
                and 0 <= since < _SEQ_END):
            raise ValueError(after)  # the log's key fields: u32, u32, u64
        return table_id, shard, after, since
    except Exception:  # noqa: BLE001 - any undecodable token is the caller's error
        raise ParameterInvalid(f"invalid shard iterator {describe(iterator)}") from None
