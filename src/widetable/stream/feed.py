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

Tail: while a global index consumes the log (``set_tail(True)``), the feed also
keeps the log's newest records in memory, in seq order, as ``(row key, shard,
ts, image)``: ``image`` is the row as that write left it (its blob, or None
when the write removed it; NO_IMAGE for rows over IMAGE_MAX bytes). The
global-index applier then follows commits without scanning and decoding the
log, or reading back rows it was just handed. The tail is a cache, never the
record of truth: it starts empty at open (the applier then reads the log from
its checkpoints), it is dropped when it outgrows TAIL_BYTES (ditto), and the
applier trims what every global index has applied.

Index counts: a local index whose codec has ``counts`` (``index/counts.py``) has
its counts changed in the batch of its entries. ``stage_local`` returns what
changes (a ``CountDeltas``); the write then reads the counts, adds and puts them
under ``lock``, which every write whose counts change takes (also on a table
that logs nothing), so two writers of one counter never lose an increment.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right as _bisect
from collections.abc import Callable

from ..errors import InvalidPK, WidetableError
from ..keys import layout
from ..table import rowcodec
from ..table.values import now_ms
from . import log

_UNREAD = object()  # the old row was not read by the caller
_pack = rowcodec.pack
_unpack = rowcodec.unpack
_time_ns = time.time_ns


TAIL_BYTES = 64 << 20  # memory the tail may take (about); past that it is dropped
ITEM_BYTES = 120  # what one tail item takes besides its key and image (tuple, ints, list slot)
IMAGE_MAX = 64 << 10  # larger rows are not kept in the tail: the applier reads them
NO_IMAGE = b""  # the tail's image of a row it did not keep (no row blob is empty)


def _size(items: list) -> int:
    """The memory tail ``items`` take, as TAIL_BYTES counts it."""
    return sum(len(key) + (0 if image is None else len(image)) + ITEM_BYTES
               for key, _, _, image in items)


class RowsRefused(Exception):
    """Rows of a batch whose new LOCAL index entry cannot be made (a key value over the
    limits); ``errors`` maps each one's row key to its error. Nothing was written: the
    caller writes the batch again without them, and reports the errors row by row."""

    def __init__(self, errors: dict[bytes, WidetableError]) -> None:
        super().__init__(f"{len(errors)} rows refused by their local index entries")
        self.errors = errors


def _old_entry(index, row: list) -> tuple[bytes, bytes] | None:
    """The entry a stored row has in a LOCAL index: None when its key cannot be encoded
    (the row predates the index, which was created without its base data), so such a
    row can still be rewritten or deleted."""
    try:
        return index.entry(row)
    except InvalidPK:
        return None


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
        # tail[i] is (row key, shard, commit ts ms, image) of record tail_from + 1 + i;
        # None: no tail. Changed under ``lock`` only (appends by writers, trims by the applier).
        self.tail: list[tuple[bytes, int, int, bytes | None]] | None = None
        self.tail_from = seq
        self.tail_bytes = 0
        self._log_key = layout.change_log_encoder(table_id)  # (shard, seq) -> record key
        self._new_batch, self._write, self._find = engine.batch, engine.write, router.find
        self._get = engine.get

    @staticmethod
    def decode_pk(key: bytes) -> tuple:
        return layout.decode_row_pk(key)

    def set_tail(self, on: bool) -> None:
        """Keep (or stop keeping) the in-memory tail of the log, from the next record on."""
        with self.lock:
            if not on:
                self.tail = None
            elif self.tail is None:
                self._drop_tail()

    def _drop_tail(self) -> None:
        """Start the tail again, empty (it outgrew its bounds: its consumer is far behind).
        Caller holds ``lock``; consumers behind ``tail_from`` go back to reading the log."""
        self.tail, self.tail_from, self.tail_bytes = [], self.seq, 0

    def trim_tail(self, applied: int) -> None:
        """Forget the tail's records with seq <= ``applied`` (every consumer applied them)."""
        with self.lock:
            tail, n = self.tail, applied - self.tail_from
            if tail is None or n <= 0:
                return
            gone = tail[:n]
            del tail[:n]
            self.tail_from = applied
        size = _size(gone)  # outside the lock: writers wait for none of this
        with self.lock:
            if self.tail is tail:  # not dropped meanwhile (which zeroed the count)
                self.tail_bytes -= size

    # -- single rows ----------------------------------------------------------------

    def put(self, key: bytes, blob: bytes, row: tuple | None = None) -> None:
        """Write row ``blob`` at ``key`` (a whole-row put) with its record and index entries.

        ``row`` is the new row as ``rowcodec.unpack(blob)`` returns it, when the
        caller has it (``Table.encode_put``); it spares decoding the blob.
        """
        batch = self._new_batch()
        batch.put(key, blob)
        local = self.local
        deltas = None
        if local:
            old = self._get(key)
            if old is None:  # a new row: entries only to add
                if row is None:
                    row = _unpack(blob)
                for index in local:
                    after = index.entry(row)
                    if after is not None:
                        batch.put(after[0], after[1])
                        if index.counts is not None:
                            deltas = index.counts.move(deltas, None, after[0])
            elif old != blob:  # an identical rewrite changes no entry
                deltas = self.stage_local(batch, key, old, _unpack(blob) if row is None else row)
        if not self.logged:
            if deltas is None:
                self._write(batch)
            else:
                with self.lock:
                    deltas.stage(self.engine, batch)
                    self._write(batch)
            return
        # commit() inlined: this is the hot path of every put_row on a logged table.
        with self.lock:  # ts under the lock too: commit times follow seq order
            seq = self.seq + 1
            bounds, parts = self.router.state  # router.find(key), inlined
            shard = parts[_bisect(bounds, key)].id
            ts = _time_ns() // 1_000_000
            batch.put(self._log_key(shard, seq), _pack((1, ts, blob)))  # log.PUT
            if deltas is not None:
                deltas.stage(self.engine, batch)
            self._write(batch)
            self.seq = seq
            tail = self.tail
            if tail is not None:
                image = blob if len(blob) <= IMAGE_MAX else NO_IMAGE
                self.tail_bytes += len(key) + len(image) + ITEM_BYTES
                if self.tail_bytes <= TAIL_BYTES:
                    tail.append((key, shard, ts, image))
                else:
                    self._drop_tail()
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
        deltas = None
        if self.local:
            deltas = self.stage_local(batch, key, old_row,
                                      rowcodec.unpack(new) if new is not None else None)
        self.commit(batch, [(key, [log.UPDATE, 0, list(pk), changes], new)] if self.logged else (),
                    deltas)

    def delete(self, key: bytes, pk: tuple, old: object = _UNREAD) -> None:
        batch = self.engine.batch()
        batch.delete(key)
        deltas = self.stage_local(batch, key, old, None) if self.local else None
        self.commit(batch, [(key, [log.DELETE, 0, list(pk)], None)] if self.logged else (), deltas)

    def purge(self, key: bytes, old_row: list, new: bytes | None) -> None:
        """Garbage collection rewrote (or removed) a row: an internal PURGE record, which
        the stream API does not show (TTL expiry makes no stream records in Tablestore)."""
        batch = self.engine.batch()
        if new is None:
            batch.delete(key)
        else:
            batch.put(key, new)
        deltas = None
        if self.local:
            deltas = self.stage_local(batch, key, old_row,
                                      rowcodec.unpack(new) if new is not None else None)
        self.commit(batch, [(key, [log.PURGE, 0, list(old_row[1])], new)] if self.logged else (),
                    deltas)

    # -- pieces, for multi-row batches ---------------------------------------------

    def stage_local(self, batch, key: bytes, old: object, new_row: list | None,
                    deltas=None):
        """Put the local-index changes of one row into ``batch``; returns ``deltas`` with
        the row's count changes added (a ``CountDeltas``, made if None; None: none).

        ``old`` is the stored row before the write: a decoded row, a blob,
        None (no row), or _UNREAD (read it now, under the caller's row lock).
        The caller writes the batch with the returned deltas staged under ``lock``.
        """
        if old is _UNREAD:
            old = self._get(key)
        if old is None:
            if new_row is not None:
                for index in self.local:
                    after = index.entry(new_row)
                    if after is not None:
                        batch.put(after[0], after[1])
                        if index.counts is not None:
                            deltas = index.counts.move(deltas, None, after[0])
            return deltas
        if type(old) is bytes:
            old = _unpack(old)
        for index in self.local:
            before = _old_entry(index, old)
            after = index.entry(new_row) if new_row is not None else None
            if after == before:
                continue
            if before is not None and (after is None or before[0] != after[0]):
                batch.delete(before[0])
            if after is not None:
                batch.put(after[0], after[1])
            if index.counts is not None:
                deltas = index.counts.change(deltas, before, after, self._get)
        return deltas

    def commit(self, batch, records, deltas=None) -> None:
        """Append ``records`` to ``batch`` and write it: ``(row key, record with ts 0, row
        image)`` triples, the image being the row's blob after the write (None: removed),
        with the count changes ``deltas`` (``stage_local``'s)."""
        if not records:
            if deltas is None:
                self.engine.write(batch)
            else:
                with self.lock:
                    deltas.stage(self.engine, batch)
                    self.engine.write(batch)
            return
        with self.lock:
            seq = self.seq
            added = self._stage_records(batch, records, now_ms())
            if deltas is not None:
                deltas.stage(self.engine, batch)
            self.engine.write(batch)
            self._committed(seq, added)
        if self.notify is not None:
            self.notify()

    def _stage_records(self, batch, records, ts: int) -> list:
        """Put ``records`` (see :meth:`commit`) into ``batch`` with seqs after ``self.seq``
        and commit time ``ts``; returns their tail items. Caller holds ``lock`` and calls
        :meth:`_committed` once the batch is written."""
        log_key, find = self._log_key, self.router.find
        seq = self.seq
        added = []
        for key, rec, image in records:
            seq += 1
            rec[1] = ts
            shard = find(key).id
            batch.put(log_key(shard, seq), _pack(rec))
            if image is not None and len(image) > IMAGE_MAX:
                image = NO_IMAGE
            added.append((key, shard, ts, image))
        return added

    def _committed(self, seq: int, added: list) -> None:
        """Records ``seq + 1 ...`` (``added``: their tail items) are written. Holds ``lock``."""
        self.seq = seq + len(added)  # only once written: readers trust seq
        tail = self.tail
        if tail is not None:
            self.tail_bytes += _size(added)
            if self.tail_bytes <= TAIL_BYTES:
                tail += added
            else:
                self._drop_tail()

    def commit_puts(self, batch, groups: dict) -> None:
        """Write ``batch`` (already holding whole-row puts) with the records and local-index
        entries of ``groups`` = ``{feed: [(key, blob), ...]}``. Callers hold the rows' locks.
        Raises :class:`RowsRefused`, writing nothing, if a row's new local entry cannot be
        made."""
        staged: dict = {}
        counted: dict = {}
        refused: dict[bytes, WidetableError] = {}
        for feed, rows in groups.items():
            if feed.local:
                olds = self.engine.multi_get([key for key, _ in rows])
                deltas = None
                for (key, blob), old in zip(rows, olds):
                    try:
                        deltas = feed.stage_local(batch, key, old, rowcodec.unpack(blob), deltas)
                    except WidetableError as exc:  # its new entry's key is over the limits
                        refused[key] = exc
                if deltas is not None:
                    counted[feed] = deltas
            if feed.logged:
                staged[feed] = [(key, [log.PUT, 0, blob], blob) for key, blob in rows]
        if refused:
            raise RowsRefused(refused)
        commit_many(self.engine, batch, staged, counted)

    def commit_rows(self, batch, rows: list) -> None:
        """Write ``batch`` (holding ``rows`` = ``[(key, blob or None), ...]``: whole-row puts
        and deletes, as a transaction commits them) with their records and index entries."""
        records = []
        deltas = None
        for key, blob in rows:
            new_row = rowcodec.unpack(blob) if blob is not None else None
            if self.local:
                deltas = self.stage_local(batch, key, _UNREAD, new_row, deltas)
            if self.logged:
                if blob is not None:
                    records.append((key, [log.PUT, 0, blob], blob))
                else:
                    records.append((key, [log.DELETE, 0, None], None))
        # A DELETE names its key; the transaction knows only bytes, so decode it here.
        for key, rec, _ in records:
            if rec[0] == log.DELETE:
                rec[2] = list(self.decode_pk(key))
        self.commit(batch, records, deltas)

    def barrier(self) -> None:
        """Return once every write that looked up a shard before now has committed."""
        with self.lock:
            pass


def write_puts(engine, batch, rows: list, groups: dict) -> dict[bytes, WidetableError]:
    """Write ``batch``, holding the whole-row puts ``rows`` (tuples ending ``key, blob``, of
    any tables), with the records and local-index entries of ``groups`` (``{feed: [(key,
    blob), ...]}``: those of the rows whose table captures changes). The caller holds
    the rows' locks. Rows a local index refuses (:class:`RowsRefused`) are left out and
    the others written; returns ``{key: error}`` of the refused."""
    if not groups:
        engine.write(batch)
        return {}
    try:
        next(iter(groups)).commit_puts(batch, groups)
        return {}
    except RowsRefused as refused:
        errors = refused.errors
    batch = engine.batch()
    for *_, key, blob in rows:
        if key not in errors:
            batch.put(key, blob)
    groups = {feed: kept for feed, items in groups.items()
              if (kept := [(k, b) for k, b in items if k not in errors])}
    if groups:
        next(iter(groups)).commit_puts(batch, groups)
    else:
        engine.write(batch)
    return errors


def commit_many(engine, batch, staged: dict, counted: dict | None = None) -> None:
    """Write ``batch`` with the records of several tables: ``{feed: [(key, record, image), ...]}``
    (see :meth:`TableFeed.commit`), and the count changes ``counted`` (``{feed: deltas}``).

    The feeds' locks are taken in table-id order, so concurrent batches never deadlock.
    """
    logged = [f for f, recs in staged.items() if recs]
    feeds = sorted({*logged, *(counted or ())}, key=lambda f: f.table_id)
    if not feeds:
        engine.write(batch)
        return
    for feed in feeds:
        feed.lock.acquire()
    try:
        ts = now_ms()
        added = [(feed, feed._stage_records(batch, staged[feed], ts)) for feed in feeds
                 if staged.get(feed)]
        for deltas in (counted or {}).values():
            deltas.stage(engine, batch)
        engine.write(batch)
        for feed, items in added:
            feed._committed(feed.seq, items)
    finally:
        for feed in reversed(feeds):
            feed.lock.release()
    for feed, _ in added:
        if feed.notify is not None:
            feed.notify()
