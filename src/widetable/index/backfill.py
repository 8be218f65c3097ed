"""Backfill: write the entries of the rows a table held before its index existed.

Runs after the index is registered with the table's feed and every row-lock
stripe has been passed once, so every later write maintains the index itself.
A local index takes the row locks of each chunk and writes the entries of the
rows as they are under them; a global index syncs each chunk under the
applier's lock for that index (``global_.Indexer.sync``), exactly as the
applier does. Either way, entries written by concurrent writes stay correct.
The index's counts (``counts.py``) change in the chunk's batch: a local entry
counts when it was not there yet (a concurrent write may have put it), under
the feed's lock as the table's writers count.
"""

from __future__ import annotations

import sys

from ..keys import layout
from ..table import rowcodec

CHUNK = 500


def _progress(enabled: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), disable=not enabled)


def backfill(ctx, indexer, table, index_id: int, local_codec=None, global_index=None,
             progress: bool | None = None) -> int:
    """Index every row of ``table`` (of store context ``ctx``; ``indexer`` applies global
    indexes); returns the rows that got an entry."""
    engine = ctx.engine
    tid = table.schema.table_id
    start, end = layout.table_range(tid)
    if progress is None:
        progress = sys.stderr.isatty()
    total = sum(p.est_rows for p in ctx.partitions.partitions(table).router.parts)
    bar = _progress(bool(progress))
    written = 0
    with bar:
        task = bar.add_task(f"backfill index {index_id} of {table.name}", total=total or None)
        keys: list[bytes] = []
        for key, _ in engine.scan(start, end):
            keys.append(key)
            if len(keys) >= CHUNK:
                written += _chunk(ctx, indexer, keys, local_codec, global_index, tid)
                bar.advance(task, len(keys))
                keys = []
        if keys:
            written += _chunk(ctx, indexer, keys, local_codec, global_index, tid)
            bar.advance(task, len(keys))
    return written


def _chunk(ctx, indexer, keys: list[bytes], local_codec, global_index, table_id: int) -> int:
    engine = ctx.engine
    batch = engine.batch()
    if global_index is not None:
        with global_index.lock:
            indexer.sync(global_index, keys, batch)
            engine.write(batch)
        return len(keys)
    locks = ctx.row_locks.acquire(keys)
    try:
        entries = []
        for blob in engine.multi_get(keys):
            if blob is None:
                continue
            entry = local_codec.entry(rowcodec.unpack(blob))
            if entry is not None:
                batch.put(entry[0], entry[1])
                entries.append(entry[0])
        counts = local_codec.counts
        if counts is None or not entries:
            engine.write(batch)
            return len(entries)
        deltas = None
        for key, there in zip(entries, engine.multi_get(entries)):
            if there is None:
                deltas = counts.move(deltas, None, key)
        with ctx.changelog.feeds[table_id].lock:
            if deltas is not None:
                deltas.stage(engine, batch)
            engine.write(batch)
        return len(entries)
    finally:
        ctx.row_locks.release(locks)
