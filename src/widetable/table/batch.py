"""Cross-table batches: BatchGetRow (up to 100 rows) and BatchWriteRow (up to 200 rows, 4 MB).

Each row gets its own result. A batch is not atomic across rows, but plain
puts without conditions go to the engine in one atomic write for speed.
Whole-batch errors (too many rows, too many bytes, a row named twice, a
malformed item) reject the batch before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ParameterInvalid, WidetableError, describe
from ..stream.feed import write_puts
from . import rowcodec
from .bulk import plain_puts
from .filters import as_condition
from .row import BatchGetResult, BatchWriteResult, WriteResult
from .schema import AUTO_INCREMENT
from .values import MAX_REQUEST_BYTES, value_size

if TYPE_CHECKING:
    from ..context import StoreContext

MAX_BATCH_GET = 100
MAX_BATCH_WRITE = 200
_READ_OPTIONS = ("columns", "max_versions", "time_range", "filter")
_UPDATE_PARTS = ("put", "delete_version", "delete_column", "increment")


_NO_ROWS = {  # Tablestore's wording for an empty batch
    "batch_get_row": "No row specified in the request of BatchGetRow. ",
    "batch_write_row": "No row is specified in BatchWriteRow. ",
}


def _check_count(requests: object, limit: int, what: str) -> list:
    if not isinstance(requests, (list, tuple)) or not 1 <= len(requests) <= limit:
        empty = isinstance(requests, (list, tuple)) and not requests
        raise ParameterInvalid(
            f"{_NO_ROWS.get(what, '') if empty else ''}{what} takes 1-{limit} rows, got "
            f"{len(requests) if isinstance(requests, (list, tuple)) else describe(requests)}"
        )
    return list(requests)


def parse_get_item(item: object) -> tuple[object, object, object, BatchGetResult]:
    """``(table, pk, options, result)`` of one batch_get_row item; a malformed item
    rejects the whole batch. ``result`` is the row's (still empty) BatchGetResult."""
    if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
        raise ParameterInvalid(f"batch_get_row item must be (table, pk[, options]), got {describe(item)}")
    name, pk = item[0], item[1]
    opts = item[2] if len(item) == 3 else {}
    return name, pk, opts, BatchGetResult(str(name), pk if isinstance(pk, tuple) else (pk,))


def batch_get_row(ctx: StoreContext, requests: list) -> list[BatchGetResult]:
    """Items are ``(table, pk)`` or ``(table, pk, {columns, max_versions, time_range, filter})``."""
    requests = _check_count(requests, MAX_BATCH_GET, "batch_get_row")
    results: list[BatchGetResult] = []
    keys: list[bytes] = []
    pending: list[tuple[int, object]] = []
    for item in requests:
        name, pk, opts, result = parse_get_item(item)
        results.append(result)
        try:
            if not isinstance(opts, Mapping) or set(opts) - set(_READ_OPTIONS):
                raise ParameterInvalid(f"batch_get_row options must be a dict of {_READ_OPTIONS}, got {describe(opts)}")
            table = ctx.catalog.table(name)
            values, key = table._key(pk)
            result.primary_key = values
            table._route_read(key)
            reader = table.reader(
                opts.get("columns"), opts.get("max_versions"), opts.get("time_range"),
                opts.get("filter"),
            )
        except WidetableError as exc:
            result.error = exc
            continue
        keys.append(key)
        pending.append((len(results) - 1, reader))
    for (index, reader), blob in zip(pending, ctx.engine.multi_get(keys)):
        if blob is not None:
            results[index].row = reader(rowcodec.unpack(blob))
    return results


def batch_write_row(ctx: StoreContext, requests: list) -> list[BatchWriteResult]:
    """Items are ``(table, op, pk, payload[, condition])``.

    ``op`` is ``"put"`` (payload: columns), ``"update"`` (payload: a dict of
    ``put``/``delete_version``/``delete_column``/``increment``) or ``"delete"``
    (payload may be omitted).
    """
    requests = _check_count(requests, MAX_BATCH_WRITE, "batch_write_row")
    fast_results = plain_puts(ctx, requests)
    if fast_results is not None:
        return fast_results
    results: list[BatchWriteResult] = []
    fast: list[tuple[int, bytes, bytes]] = []
    routed: list[tuple[Any, Any, bytes, int]] = []  # (table, partition, key, blob size) of fast
    slow: list[tuple[int, Any, tuple, object, object]] = []
    seen: set[bytes] = set()
    tables: dict[object, object] = {}
    total = 0
    for item in requests:
        if type(item) is tuple and len(item) == 4 and item[1] == "put":
            name, op, pk, payload = item  # the common plain put, parsed inline
            condition = None
        else:
            name, op, pk, payload, condition = parse_write_item(item)
        result = BatchWriteResult(name, op, pk if type(pk) is tuple else (pk,))
        results.append(result)
        try:
            table = tables.get(name) if type(name) is str else None
            if table is None:
                table = ctx.catalog.table(name)  # OTSObjectNotExist for a missing or non-str name
                tables[name] = table
            if table.read_only:  # an index: refused whatever the row, as a single write is
                raise table.write_refused()
            if table._auto_index is not None:  # put_row assigns auto-increment values row by row
                values = result.primary_key = table.normalize_pk(pk)
                if AUTO_INCREMENT not in values:  # a concrete row: named once, as anywhere
                    key = table._key(values)[1]
                    if key in seen:
                        raise ParameterInvalid(
                            f"batch_write_row names row {describe(values)} of table {name!r} twice")
                    seen.add(key)
                total += _payload_size(payload)
                slow.append((len(results) - 1, table, values, payload, as_condition(condition)))
                continue
            values, key = table._key(pk)
            result.primary_key = values
            if key in seen:
                raise ParameterInvalid(
                    f"batch_write_row names row {describe(values)} of table {name!r} twice"
                )
            seen.add(key)
            cond = None if condition is None else as_condition(condition)
            if cond is not None and not cond.needs_row:
                cond = None  # checks nothing (IGNORE alone): the row is written as without it
            if op == "put" and cond is None:
                blob = table.encode_put(values, payload)
                part = table._route_write(key)
                total += len(key) + len(blob)
                fast.append((len(results) - 1, key, blob))
                routed.append((table, part, key, len(blob)))
            else:
                total += len(key) + _payload_size(payload)
                slow.append((len(results) - 1, table, values, payload, cond))
        except WidetableError as exc:
            if key_named_twice(exc):
                raise
            result.error = exc
        if total > MAX_REQUEST_BYTES:
            raise ParameterInvalid(
                f"batch_write_row carries over {MAX_REQUEST_BYTES} bytes; split it"
            )
    _write_fast(ctx, results, fast, tables)
    for (index, _, _), (table, part, key, size) in zip(fast, routed):
        if results[index].error is None:  # not refused by a transaction or a local index
            table._record_write(part, key, size, None)
    for index, table, values, payload, cond in slow:
        result = results[index]
        try:
            result.result = _write_one(table, result.operation, values, payload, cond)
            result.primary_key = result.result.primary_key
        except WidetableError as exc:
            result.error = exc
    return results


def key_named_twice(exc: WidetableError) -> bool:
    return isinstance(exc, ParameterInvalid) and exc.message.startswith("batch_write_row names row")


def parse_write_item(item: object) -> tuple:
    """``(table, op, pk, payload, condition)`` of one batch_write_row item; a malformed
    item rejects the whole batch."""
    if not isinstance(item, (list, tuple)) or len(item) not in (3, 4, 5):
        raise ParameterInvalid(
            f"batch_write_row item must be (table, op, pk, payload[, condition]), got {describe(item)}"
        )
    name, op, pk = item[0], item[1], item[2]
    payload = item[3] if len(item) > 3 else None
    condition = item[4] if len(item) > 4 else None
    if op not in ("put", "update", "delete"):
        raise ParameterInvalid(f"batch_write_row op must be put, update or delete, got {describe(op)}")
    if op == "update" and (not isinstance(payload, Mapping) or set(payload) - set(_UPDATE_PARTS)):
        raise ParameterInvalid(f"an update's payload must be a dict of {_UPDATE_PARTS}, got {describe(payload)}")
    if op == "delete" and payload is not None and not (isinstance(payload, Mapping) and not payload):
        raise ParameterInvalid(f"a delete carries no payload (None), got {describe(payload)}")
    return name, op, pk, payload, condition


def _payload_size(payload: object) -> int:
    if isinstance(payload, Mapping):
        return sum(len(str(k)) + _payload_size(v) for k, v in payload.items())
    if isinstance(payload, (list, tuple)):
        return sum(_payload_size(v) for v in payload)
    return 0 if payload is None else value_size(payload)


def _write_fast(ctx: StoreContext, results: list, fast: list, tables: dict) -> None:
    """Write the plain puts ``fast`` (``(result index, key, blob)``; ``tables``: the batch's
    tables by name) in one batch under their row locks."""
    if ctx.txn_locks:
        fast = _outside_transactions(ctx, results, fast, True, tables)
    if not fast:
        return
    engine = ctx.engine
    batch = engine.batch()
    for _, key, blob in fast:
        batch.put(key, blob)
    locks = ctx.row_locks.acquire([k for _, k, _ in fast])  # in stripe order: no deadlocks
    try:
        for table in tables.values():
            if table._unusable:  # dropped since its rows were checked: see Catalog.delete_table
                fast = _of_usable_tables(results, fast, tables)
                batch = engine.batch()
                for _, key, blob in fast:
                    batch.put(key, blob)
                break
        if ctx.txn_locks:  # a transaction started since the wait above: recheck under the locks
            kept = _outside_transactions(ctx, results, fast, False, tables)
            if len(kept) < len(fast):
                fast, batch = kept, engine.batch()
                for _, key, blob in fast:
                    batch.put(key, blob)
        # Tables with a stream or an index: records and index entries join the batch; rows
        # a local index cannot take fail alone.
        refused = write_puts(engine, batch, fast, _change_feeds(ctx, results, fast))
        if refused:
            for index, key, _ in fast:
                if key in refused:
                    results[index].error = refused[key]
    finally:
        ctx.row_locks.release(locks)
    # Each written row reports a plain WriteResult of its key (BatchWriteResult.result).


def _of_usable_tables(results: list, fast: list, tables: dict) -> list:
    """The rows of ``fast`` whose table is usable; the others get the table's error."""
    kept = []
    for item in fast:
        result = results[item[0]]
        try:
            tables[result.table]._check_open()
        except WidetableError as exc:
            result.error = exc
            continue
        kept.append(item)
    return kept


def _change_feeds(ctx: StoreContext, results: list, fast: list) -> dict:
    """``{TableFeed: [(key, blob), ...]}`` of the rows whose table captures changes."""
    groups: dict = {}
    for index, key, blob in fast:
        table = ctx.tables.get(results[index].table)
        feed = table._changes if table is not None else None
        if feed is not None:
            groups.setdefault(feed, []).append((key, blob))
    return groups


def _outside_transactions(ctx: StoreContext, results: list, fast: list, wait: bool,
                          tables: dict) -> list:
    """The rows of ``fast`` whose partition-key value no local transaction holds, and whose
    table is not being dropped.

    The others get ``OTSRowOperationConflict`` (or the dropped table's error) as their
    result. With ``wait``, each first waits briefly for the transaction to end (outside
    any row lock).
    """
    kept = []
    for item in fast:
        result = results[item[0]]
        table = tables[result.table]
        try:
            (ctx.txns.wait_for if wait else ctx.txns.check)(table, result.primary_key[0])
        except WidetableError as exc:
            result.error = exc
            continue
        kept.append(item)
    return kept


def _write_one(table, op: str, values: tuple, payload: object, cond: object) -> WriteResult:
    if op == "put":
        return table.put_row(values, payload, cond)
    if op == "delete":
        return table.delete_row(values, cond)
    return table.update_row(values, condition=cond, **payload)  # type: ignore[arg-type]
