"""The fast path of ``batch_write_row``: a batch of plain puts into one table.

Loading data is mostly batches of unconditional puts of ``{name: value}``
rows. This path checks such a batch with whole-batch set operations instead of
a Python loop per cell, packs every row, and writes them in one RocksDB batch.
It declines (returns None) whenever anything is unusual, and the general path
in ``batch.py`` then handles the batch with its per-row errors; nothing has
been written or counted by then.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, WidetableError
from . import rowcodec
from .row import BatchWriteResult, WriteResult
from .values import (
    INT64_MAX,
    INT64_MIN,
    MAX_COLUMNS_PER_WRITE,
    MAX_REQUEST_BYTES,
    MAX_VALUE_BYTES,
    _valid_names,
    now_ms,
)

if TYPE_CHECKING:
    from ..db import Database

_BULK_TYPES = frozenset({bytes, str, int, float, bool})


def plain_puts(db: Database, requests: list) -> list[BatchWriteResult] | None:
    """Write ``requests`` if all are plain puts ``(table, "put", pk_tuple, dict)`` to one table."""
    name = requests[0][0] if type(requests[0]) is tuple else None
    for item in requests:
        if (
            type(item) is not tuple or len(item) != 4 or item[1] != "put" or item[0] != name
            or type(item[2]) is not tuple or type(item[3]) is not dict
        ):
            return None
    table = db._tables.get(name) if type(name) is str else None
    if table is None or table._unusable or table._auto_index is not None or db._txn_locks:
        return None
    if table._defined:  # predefined column types are checked by the general path
        return None
    payloads = [item[3] for item in requests]
    if not _cells_are_plain(table, payloads):
        return None
    try:
        prefix, encode = table._prefix, table._encode
        keys = [prefix + encode(item[2]) for item in requests]
        now = now_ms()
        pack = rowcodec.packer().pack
        fmt = rowcodec.FORMAT
        blobs = [pack([fmt, item[2], item[3], now, None]) for item in requests]
    except (WidetableError, UnicodeEncodeError, OverflowError, ValueError, TypeError):
        return None
    if len(set(keys)) != len(keys) or max(map(len, blobs)) > MAX_VALUE_BYTES:
        return None
    if sum(map(len, blobs)) + sum(map(len, keys)) > MAX_REQUEST_BYTES:
        raise ParameterInvalid(f"batch_write_row carries over {MAX_REQUEST_BYTES} bytes; split it")
    router = table._router
    if router is not None and router.route_puts(keys, list(map(len, blobs))):
        _write(db, table, keys, blobs)
        return [
            BatchWriteResult(name, "put", item[2], WriteResult(item[2]))  # type: ignore[arg-type]
            for item in requests
        ]
    return _route_row_by_row(db, table, requests, keys, blobs)


def _route_row_by_row(db: Database, table, requests: list, keys: list, blobs: list) -> list:
    """Route each row on its own, so that throttling fails just the rows it hits."""
    results = [BatchWriteResult(item[0], "put", item[2]) for item in requests]
    route, record = table._route_write, table._record_write
    accepted = []
    for i, key in enumerate(keys):
        try:
            accepted.append((i, route(key)))
        except WidetableError as exc:  # throttled
            results[i].error = exc
    _write(db, table, [keys[i] for i, _ in accepted], [blobs[i] for i, _ in accepted])
    for i, part in accepted:
        record(part, keys[i], len(blobs[i]), None)
        results[i].result = WriteResult(results[i].primary_key)
    return results


def _cells_are_plain(table: object, payloads: list[dict]) -> bool:
    """Names valid and not primary-key names, plain types, ints in int64, column counts."""
    if max(map(len, payloads)) > MAX_COLUMNS_PER_WRITE:
        return False
    names = set().union(*payloads)
    if not _valid_names.issuperset(names) or not table._pk_name_set.isdisjoint(names):  # type: ignore[attr-defined]
        return False
    values = list(chain.from_iterable(p.values() for p in payloads))
    types = set(map(type, values))
    if not types <= _BULK_TYPES:
        return False
    if int in types:
        ints = [v for v in values if type(v) is int]
        if min(ints) < INT64_MIN or max(ints) > INT64_MAX:
            return False
    return True


def _write(db: Database, table, keys: list[bytes], blobs: list[bytes]) -> None:
    """One atomic engine write of every row, under the rows' locks taken in stripe order."""
    if not keys:
        return
    mask = len(db._row_locks) - 1
    locks = [db._row_locks[i] for i in sorted({hash(k) & mask for k in keys})]
    batch = db._engine.batch()
    put = batch.put
    for key, blob in zip(keys, blobs):
        put(key, blob)
    for lock in locks:
        lock.acquire()
    try:
        feed = table._changes  # a stream or an index: records and index entries join the batch
        if feed is not None:
            feed.commit_puts(batch, {feed: list(zip(keys, blobs))})
        else:
            db._engine.write(batch)
    finally:
        for lock in locks:
            lock.release()
