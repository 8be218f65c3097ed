"""The change log: one record per committed write, ordered per partition (shard).

Keys (``keys.layout``)::

    0x06 table_id:u32 shard:u32 seq:u64 -> record

``shard`` is the id of the partition that held the row when it was written
(``partition/meta.py``); ``seq`` is the table's change sequence number, which
grows by one with every logged write of the table, so within a shard records
sort in commit order. Record (DO NOT CHANGE: embedded in on-disk data), a
MessagePack array::

    record := [1, ts, row-blob]              PUT: the whole new row (rowcodec blob)
            | [2, ts, pk, [change, ...]]     UPDATE: the columns changed
            | [3, ts, pk]                    DELETE: the row is gone
            | [4, ts, pk]                    PURGE: TTL garbage collection rewrote the row
    change := [column, kind, value, version] kind 0 put, 1 delete one version,
                                             2 delete all versions (value, version nil)

``ts`` is the commit time in milliseconds. PURGE records are internal: the
global-index applier reads them, the stream API skips them (as in
Tablestore, TTL expiry produces no stream records).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import msgpack

from ..keys import layout

PUT, UPDATE, DELETE, PURGE = 1, 2, 3, 4  # DO NOT CHANGE: embedded in on-disk data
PUT_COLUMN, DELETE_VERSION, DELETE_COLUMN = 0, 1, 2  # DO NOT CHANGE: change kinds
OP_NAMES = {PUT: "PUT", UPDATE: "UPDATE", DELETE: "DELETE", PURGE: "PURGE"}
KIND_NAMES = {PUT_COLUMN: "PUT", DELETE_VERSION: "DELETE_ONE_VERSION", DELETE_COLUMN: "DELETE_ALL_VERSIONS"}


@dataclass(frozen=True, slots=True)
class StreamColumn:
    """One changed column: ``kind`` is PUT, DELETE_ONE_VERSION or DELETE_ALL_VERSIONS."""

    name: str
    kind: str
    value: object
    timestamp: int | None


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """One change record as the stream API returns it."""

    sequence: int
    shard: int
    operation: str  # PUT, UPDATE or DELETE
    primary_key: tuple
    columns: tuple[StreamColumn, ...]
    timestamp: int  # commit time, ms


def decode_pk(record: list) -> tuple:
    """The primary key a raw record is about."""
    if record[0] == PUT:
        return tuple(msgpack.unpackb(record[2], use_list=False, raw=False)[1])
    return tuple(record[2])


def is_purge(value: bytes) -> bool:
    """Whether a stored record is a PURGE (read without decoding: the fixarray marker,
    then the op)."""
    return value[1:2] == _PURGE_OP


_PURGE_OP = bytes([PURGE])


def unpack(value: bytes) -> list:
    return msgpack.unpackb(value, raw=False, use_list=True)


def decode_record(key: bytes, value: bytes) -> StreamRecord:
    """A stored record as a :class:`StreamRecord`."""
    _, shard, seq = layout.decode_change_log_key(key)
    rec = unpack(value)
    op, ts = rec[0], rec[1]
    if op == PUT:
        row = msgpack.unpackb(rec[2], raw=False)
        latest, stamps, history = row[2], row[3], row[4] or {}
        cols = []
        for name, v in latest.items():
            cols.append(StreamColumn(name, "PUT", v, stamps if type(stamps) is int else stamps[name]))
            older = history.get(name) or []
            for t, ov in zip(older[0::2], older[1::2]):
                cols.append(StreamColumn(name, "PUT", ov, t))
        return StreamRecord(seq, shard, "PUT", tuple(row[1]), tuple(cols), ts)
    if op == UPDATE:
        cols = [StreamColumn(c[0], KIND_NAMES[c[1]], c[2], c[3]) for c in rec[3]]
        return StreamRecord(seq, shard, "UPDATE", tuple(rec[2]), tuple(cols), ts)
    return StreamRecord(seq, shard, OP_NAMES[op], tuple(rec[2]), (), ts)


def scan_shard(engine, table_id: int, shard: int, after: int = -1) -> Iterator[tuple[int, list]]:
    """``(seq, raw record)`` of one shard with seq > ``after``, in order."""
    lo, hi = layout.change_log_range(table_id, shard, after)
    for key, value in engine.scan(lo, hi):
        yield layout.change_log_seq(key), unpack(value)


def shards_with_records(engine, table_id: int) -> Iterator[int]:
    """The shards of ``table_id`` that hold records, in order: one seek per such shard,
    so shards emptied long ago (a table split many times) cost nothing."""
    shard = 0
    while shard < 2**32:
        found = None
        for key, _ in engine.scan(*layout.change_log_shards_from(table_id, shard)):
            found = layout.change_log_shard(key)
            break
        if found is None:
            return
        yield found
        shard = found + 1


def last_seq(engine, table_id: int, shard: int) -> int:
    """The highest seq stored in ``shard`` (0 if it has none)."""
    for key, _ in engine.scan(*layout.change_log_range(table_id, shard), reverse=True):
        return layout.change_log_seq(key)
    return 0


def first_seq(engine, table_id: int, shard: int, after: int = -1) -> tuple[int, int] | None:
    """``(seq, ts)`` of the first record of ``shard`` after ``after``, or None."""
    for key, value in engine.scan(*layout.change_log_range(table_id, shard, after)):
        return layout.change_log_seq(key), unpack(value)[1]
    return None


def trim_shard(engine, table_id: int, shard: int, cutoff_ms: int, keep_after: int | None) -> int:
    """Delete the records of ``shard`` committed before ``cutoff_ms``, but none with
    seq > ``keep_after`` (a consumer has not applied them), and raise the shard's trim
    mark to the last one dropped, in the same batch. Returns records dropped."""
    lo, hi = layout.change_log_range(table_id, shard)
    end = None
    dropped = 0
    last = -1
    for key, value in engine.scan(lo, hi):
        seq = layout.change_log_seq(key)
        if (keep_after is not None and seq > keep_after) or unpack(value)[1] >= cutoff_ms:
            end = key
            break
        dropped += 1
        last = seq
    if dropped:
        batch = engine.batch()
        batch.delete_range(lo, end if end is not None else hi)
        batch.put(layout.checkpoint_key(table_id, shard), last.to_bytes(8, "big"))
        engine.write(batch)
    return dropped


def trim_mark(engine, table_id: int, shard: int) -> int:
    """The last seq trimmed from ``shard`` (-1: none): the checkpoint stored under the
    table's own id (an index's checkpoints are under the index's id, never a table's)."""
    raw = engine.get(layout.checkpoint_key(table_id, shard))
    return -1 if raw is None else int.from_bytes(raw, "big")
