"""Write-side change capture: the change record and local-index entries of a write,
in the same atomic engine batch as the row.

A :class:`TableFeed` exists for every base table that has a consumer of its
changes: a stream (``create_table(..., stream=True)``), a global index (whose
applier reads the log), or a local index (maintained here, synchronously).
Tables with none keep the plain one-put write path; ``Table._changes`` is None
for them. Every write path (put, update, delete, batches, transactions,
auto-increment puts, TTL purge) hands its rows to the feed under their row
locks.

Ordering: ``seq`` is allocated and the batch written under the feed's lock,
so the change log's order is the commit order of the table, and in
particular of each shard. The shard of a record is looked up under the same
lock, so once a split has swapped the partition map and one holder of the
lock has come and gone, no record can land in the parent shard again
(``barrier``).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right as _bisect
from collections.abc import Callable

from ..keys import codec, layout
from ..table import rowcodec
from ..table.values import now_ms
from . import log

_UNREAD = object()  # the old row was not read by the caller
_pack = rowcodec.pack
_unpack = rowcodec.unpack
_time_ns = time.time_ns


class TableFeed:
    """Change capture of one base table. Callers hold the row lock of every key they pass."""

    def __init__(self, engine, table_id: int, router, logged: bool, local: list,
                 notify: Callable[[], None] | None, seq: int) -> None:
        self.engine = engine
        self.table_id = table_id
        self.router = router  # partition.map.Router: find(key).id is the shard
        self.logged = logged
        self.local = local  # local indexes: .entry(decoded row or None) -> (key, blob) or None
        self.notify = notify  # wakes the global-index applier after a logged commit
        self.seq = seq  # the last seq handed out
        self.lock = threading.Lock()
        self._prefix = layout.CHANGE_LOG + table_id.to_bytes(4, "big")
        self._new_batch, self._write, self._find = engine.batch, engine.write, router.find
        self._get = engine.get

    @staticmethod
    def decode_pk(key: bytes) -> tuple:
        return codec.decode_tuple(key, 5)

    # -- single rows ----------------------------------------------------------------

    def put(self, key: bytes, blob: bytes, old: object = _UNREAD) -> None:
        """Write row ``blob`` at ``key`` (a whole-row put) with its record and index entries."""
        batch = self._new_batch()
        batch.put(key, blob)
        if self.local:
            if old is _UNREAD:
                old = self._get(key)
            if old != blob:  # an identical rewrite changes no entry
                self.stage_local(batch, key, old, _unpack(blob))
        if not self.logged:
            self._write(batch)
            return
        # commit() inlined: this is the hot path of every put_row on a logged table.
        with self.lock:  # ts under the lock too: commit times follow seq order
            seq = self.seq + 1
            bounds, parts = self.router.state  # router.find(key), inlined
            batch.put(self._prefix + parts[_bisect(bounds, key)].id.to_bytes(4, "big") + seq.to_bytes(8, "big"),
                      _pack((1, _time_ns() // 1_000_000, blob)))  # log.PUT
            self._write(batch)
            self.seq = seq
        if self.notify is not None:
            self.notify()

    def update(self, key: bytes, pk: tuple, old_row: list | None, new: bytes | None,
               changes: list) -> None:
        """Write an update_row's result (``new`` None: the row is gone)."""
        batch = self.engine.batch()
        if new is not None:
            batch.put(key, new)
        elif old_row is not None:
            batch.delete(key)
        if self.local:
            self.stage_local(batch, key, old_row, rowcodec.unpack(new) if new is not None else None)
        self.commit(batch, [(key, [log.UPDATE, 0, list(pk), changes])] if self.logged else ())

    def delete(self, key: bytes, pk: tuple, old: object = _UNREAD) -> None:
        batch = self.engine.batch()
        batch.delete(key)
        if self.local:
            self.stage_local(batch, key, old, None)
        self.commit(batch, [(key, [log.DELETE, 0, list(pk)])] if self.logged else ())

    def purge(self, key: bytes, old_row: list, new: bytes | None) -> None:
        """Garbage collection rewrote (or removed) a row: an internal PURGE record, which
        the stream API does not show (TTL expiry makes no stream records in Tablestore)."""
        batch = self.engine.batch()
        if new is None:
            batch.delete(key)
        else:
            batch.put(key, new)
        if self.local:
            self.stage_local(batch, key, old_row, rowcodec.unpack(new) if new is not None else None)
        self.commit(batch, [(key, [log.PURGE, 0, list(old_row[1])])] if self.logged else ())

    # -- pieces, for multi-row batches ---------------------------------------------

    def stage_local(self, batch, key: bytes, old: object, new_row: list | None) -> None:
        """Put the local-index changes of one row into ``batch``.

        ``old`` is the stored row before the write: a decoded row, a blob,
        None (no row), or _UNREAD (read it now, under the caller's row lock).
        """
        if old is _UNREAD:
            old = self._get(key)
        if old is None:
            if new_row is not None:
                for index in self.local:
                    after = index.entry(new_row)
                    if after is not None:
                        batch.put(after[0], after[1])
            return
        if type(old) is bytes:
            old = _unpack(old)
        for index in self.local:
            before = index.entry(old)
            after = index.entry(new_row) if new_row is not None else None
            if before is not None and (after is None or before[0] != after[0]):
                batch.delete(before[0])
            if after is not None and after != before:
                batch.put(after[0], after[1])

    def record(self, op: int, key: bytes, blob: bytes | None, pk: tuple) -> tuple[bytes, list]:
        """A pending record for ``commit``: PUT carries the blob, others the key."""
        if op == log.PUT:
            return key, [log.PUT, 0, blob]
        return key, [op, 0, list(pk)]

    def commit(self, batch, records) -> None:
        """Append ``records`` ((row key, record with ts 0) pairs) to ``batch`` and write it."""
        if not records:
            self.engine.write(batch)
            return
        prefix = self._prefix
        find = self.router.find
        with self.lock:
            ts = now_ms()
            seq = self.seq
            for key, rec in records:
                seq += 1
                rec[1] = ts
                batch.put(prefix + find(key).id.to_bytes(4, "big") + seq.to_bytes(8, "big"), _pack(rec))
            self.engine.write(batch)
            self.seq = seq
        if self.notify is not None:
            self.notify()

    def commit_puts(self, batch, groups: dict) -> None:
        """Write ``batch`` (already holding whole-row puts) with the records and local-index
        entries of ``groups`` = ``{feed: [(key, blob), ...]}``. Callers hold the rows' locks."""
        staged: dict = {}
        for feed, rows in groups.items():
            if feed.local:
                olds = self.engine.multi_get([key for key, _ in rows])
                for (key, blob), old in zip(rows, olds):
                    feed.stage_local(batch, key, old, rowcodec.unpack(blob))
            if feed.logged:
                staged[feed] = [(key, [log.PUT, 0, blob]) for key, blob in rows]
        commit_many(self.engine, batch, staged)

    def commit_rows(self, batch, rows: list) -> None:
        """Write ``batch`` (holding ``rows`` = ``[(key, blob or None), ...]``: whole-row puts
        and deletes, as a transaction commits them) with their records and index entries."""
        records = []
        for key, blob in rows:
            new_row = rowcodec.unpack(blob) if blob is not None else None
            if self.local:
                self.stage_local(batch, key, _UNREAD, new_row)
            if self.logged:
                if blob is not None:
                    records.append((key, [log.PUT, 0, blob]))
                else:
                    records.append((key, [log.DELETE, 0, None]))
        # A DELETE names its key; the transaction knows only bytes, so decode it here.
        for key, rec in records:
            if rec[0] == log.DELETE:
                rec[2] = list(self.decode_pk(key))
        self.commit(batch, records)

    def barrier(self) -> None:
        """Return once every write that looked up a shard before now has committed."""
        with self.lock:
            pass


def commit_many(engine, batch, staged: dict) -> None:
    """Write ``batch`` with the records of several tables: ``{feed: [(key, record), ...]}``.

    The feeds' locks are taken in table-id order, so concurrent batches never deadlock.
    """
    feeds = sorted((f for f, recs in staged.items() if recs), key=lambda f: f.table_id)
    if not feeds:
        engine.write(batch)
        return
    for feed in feeds:
        feed.lock.acquire()
    try:
        ts = now_ms()
        last = []
        for feed in feeds:
            seq = feed.seq
            find = feed.router.find
            for key, rec in staged[feed]:
                seq += 1
                rec[1] = ts
                batch.put(feed._prefix + find(key).id.to_bytes(4, "big") + seq.to_bytes(8, "big"),
                          _pack(rec))
            last.append(seq)
        engine.write(batch)
        for feed, seq in zip(feeds, last):  # only once written: readers trust feed.seq
            feed.seq = seq
    finally:
        for feed in reversed(feeds):
            feed.lock.release()
    for feed in feeds:
        if feed.notify is not None:
            feed.notify()

