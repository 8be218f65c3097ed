"""The fast path of ``batch_write_row``: a batch of plain puts into one table.

Loading data is mostly batches of unconditional puts of ``{name: value}``
rows. This path checks such a batch with whole-batch set operations instead of
a Python loop per cell, packs every row, and writes them in one RocksDB batch.
It declines (returns None) whenever anything is unusual, and the general path
in ``batch.py`` then handles the batch with its per-row errors; nothing has
been written or counted by then.
"""

from __future__ import annotations

from collections import deque
from itertools import chain
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, WidetableError
from ..keys import codec
from ..stream.feed import write_puts
from . import rowcodec
from .row import BatchWriteResult
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
    from ..context import StoreContext

_BULK_TYPES = frozenset({bytes, str, int, float, bool})


def plain_puts(ctx: StoreContext, requests: list) -> list[BatchWriteResult] | None:
    """Write ``requests`` if all are plain puts ``(table, "put", pk_tuple, dict)`` to one table."""
    if set(map(type, requests)) != {tuple} or set(map(len, requests)) != {4}:
        return None
    names, ops, pks, payloads = zip(*requests)
    name = names[0]
    if (
        # count, not set(): an unhashable op or name goes to the general path, which names it
        type(name) is not str or names.count(name) != len(names) or ops.count("put") != len(ops)
        or set(map(type, pks)) != {tuple} or set(map(type, payloads)) != {dict}
    ):
        return None
    table = ctx.tables.get(name)
    if table is None or table._unusable or table._auto_index is not None or ctx.txn_locks:
        return None
    if table._defined:  # predefined column types are checked by the general path
        return None
    if not _cells_are_plain(table, payloads):
        return None
    try:
        keys = codec.encode_keys(table._prefix, pks, table._types, table._encode)
        now = now_ms()
        pack = rowcodec.pack
        fmt = rowcodec.FORMAT
        blobs = [pack([fmt, pk, payload, now, None]) for pk, payload in zip(pks, payloads)]
    except (WidetableError, UnicodeEncodeError, OverflowError, ValueError, TypeError):
        return None
    sizes = list(map(len, blobs))
    if len(set(keys)) != len(keys) or max(sizes) > MAX_VALUE_BYTES:
        return None
    if sum(sizes) + sum(map(len, keys)) > MAX_REQUEST_BYTES:
        raise ParameterInvalid(f"batch_write_row carries over {MAX_REQUEST_BYTES} bytes; split it")
    row_locks = ctx.row_locks
    locks = row_locks.acquire(keys)  # in stripe order, so batches never deadlock
    try:
        if ctx.txn_locks or table._unusable:
            # A transaction began since the check above, or the table was dropped (see
            # Catalog.delete_table): the general path decides.
            return None
        router = table._router
        if router is not None and router.route_puts(keys, sizes):
            refused = _commit(ctx, table, keys, blobs)
            results = [BatchWriteResult(name, "put", pk) for pk in pks]
            if refused:
                for result, key in zip(results, keys):
                    result.error = refused.get(key)
            return results
        return _route_row_by_row(ctx, table, requests, keys, blobs)
    finally:
        row_locks.release(locks)


def _route_row_by_row(ctx: StoreContext, table, requests: list, keys: list, blobs: list) -> list:
    """Route each row on its own, so that throttling fails just the rows it hits."""
    results = [BatchWriteResult(item[0], "put", item[2]) for item in requests]
    route, record = table._route_write, table._record_write
    accepted = []
    for i, key in enumerate(keys):
        try:
            accepted.append((i, route(key)))
        except WidetableError as exc:  # throttled
            results[i].error = exc
    refused = _commit(ctx, table, [keys[i] for i, _ in accepted], [blobs[i] for i, _ in accepted])
    for i, part in accepted:
        if keys[i] in refused:
            results[i].error = refused[keys[i]]
        else:
            record(part, keys[i], len(blobs[i]), None)
    return results


def _cells_are_plain(table: object, payloads: list[dict]) -> bool:
    """Names valid and not primary-key names, plain types, ints in int64, column counts."""
    if max(map(len, payloads)) > MAX_COLUMNS_PER_WRITE:
        return False
    names = set().union(*payloads)
    if not _valid_names.issuperset(names) or not table._pk_name_set.isdisjoint(names):  # type: ignore[attr-defined]
        return False
    types = set(map(type, chain.from_iterable(map(dict.values, payloads))))
    if not types <= _BULK_TYPES:
        return False
    if int in types:
        ints = [v for v in chain.from_iterable(map(dict.values, payloads)) if type(v) is int]
        if min(ints) < INT64_MIN or max(ints) > INT64_MAX:
            return False
    return True


def _commit(ctx: StoreContext, table, keys: list[bytes], blobs: list[bytes]) -> dict:
    """One atomic engine write of every row; the caller holds the rows' locks. Returns
    ``{key: error}`` of the rows a local index refused (their key values are over the
    limits): the others are written without them."""
    if not keys:
        return {}
    engine = ctx.engine
    batch = engine.batch()
    deque(map(batch.put, keys, blobs), maxlen=0)
    feed = table._changes  # a stream or an index: records and index entries join the batch
    if feed is None:
        engine.write(batch)
        return {}
    rows = list(zip(keys, blobs))
    return write_puts(engine, batch, rows, {feed: rows})
