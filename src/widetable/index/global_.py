"""The global-index applier: tails change logs and brings global indexes up to date.

One daemon thread per database (``widetable-indexer``) wakes on every logged
commit of a table with a global index (and every 50 ms). For each index and
each shard of its table it reads the records after the index's checkpoint,
and *syncs* the rows they name: it reads the base row as it is now, computes
its entry, and compares it with the entry it recorded for that row (the
index ref, ``layout.index_ref_key``); a stale entry is deleted, the new one
put. Index rows, refs and the new checkpoint go in one engine batch, so after
a crash the applier resumes exactly at its checkpoint, and re-applying a
record is harmless (a sync is idempotent). Because a sync reads the current
base row, the order records are applied in does not matter for correctness:
once every record is applied the index equals the one derived from the table.

The same thread trims change logs past their retention (never a record some
index has not applied) about every 10 s.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ..keys import layout
from ..stream import log
from ..table import rowcodec
from ..table.values import now_ms
from .schema import IndexCodec

CHUNK = 1000  # records read per shard per pass
TRIM_INTERVAL = 10.0
BATCH_DELAY = 0.01  # seconds a woken applier waits for more commits


@dataclass(eq=False)
class GlobalIndex:
    """The applier's state for one global index."""

    codec: IndexCodec
    table: object  # the base Table
    feed: object  # the base table's TableFeed
    checkpoints: dict[int, int] = field(default_factory=dict)  # shard -> last applied seq
    lock: threading.Lock = field(default_factory=threading.Lock)
    seen_seq: int = -1  # the table seq up to which every shard was drained
    done_shards: set[int] = field(default_factory=set)  # closed shards drained after a barrier

    @property
    def index_id(self) -> int:
        return self.codec.spec.table_id

    def checkpoint(self, shard: int) -> int:
        return self.checkpoints.get(shard, self.codec.spec.start_seq)


class Indexer:
    """Applies change logs to the global indexes of one database."""

    def __init__(self, db) -> None:
        self._db = db
        self._engine = db._engine
        self.indexes: dict[int, GlobalIndex] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_trim = time.monotonic()
        self.lags: deque[int] = deque(maxlen=200_000)  # ms from commit to apply, per record
        self.error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------

    def add(self, codec: IndexCodec, table, feed) -> GlobalIndex:
        gi = GlobalIndex(codec, table, feed)
        for key, value in self._engine.scan(*layout.checkpoint_range(codec.spec.table_id)):
            gi.checkpoints[int.from_bytes(key[5:9], "big")] = int.from_bytes(value, "big")
        self.indexes[gi.index_id] = gi
        self.start()
        return gi

    def remove(self, index_id: int) -> None:
        gi = self.indexes.pop(index_id, None)
        if gi is not None:
            with gi.lock:  # wait for a pass that is applying it
                pass

    def start(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._loop, name="widetable-indexer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def notify(self) -> None:
        if not self._wake.is_set():  # set() takes a lock; most commits find it set already
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(0.05):
                # Let a burst of commits gather: one pass over many records costs far less
                # per record (and takes the GIL from writers less often) than many small ones.
                self._stop.wait(BATCH_DELAY)
            self._wake.clear()
            try:
                while self.run_once() and not self._stop.is_set():
                    pass
                if time.monotonic() - self._last_trim >= TRIM_INTERVAL:
                    self._last_trim = time.monotonic()
                    self._db._changelog_trim()
            except Exception as exc:  # noqa: BLE001 - the engine closed under us, or a bug: keep the process
                if self._stop.is_set():
                    return
                self.error = exc
                time.sleep(0.1)

    # -- applying ------------------------------------------------------------------------

    def run_once(self) -> int:
        """One pass over every global index; returns the records applied."""
        applied = 0
        for gi in list(self.indexes.values()):
            feed = gi.feed
            if gi.seen_seq == feed.seq:  # type: ignore[attr-defined]
                continue
            target = feed.seq  # type: ignore[attr-defined]
            more = False
            with gi.lock:
                if gi.index_id not in self.indexes:
                    continue
                for shard in self._shards(gi):
                    n, full = self._apply_shard(gi, shard)
                    applied += n
                    more = more or full
            if not more:
                gi.seen_seq = target
        return applied

    def _shards(self, gi: GlobalIndex) -> list[int]:
        tp = self._db._partitions.partitions(gi.table)
        live = {p.id for p in tp.router.parts}
        out = []
        for shard in range(tp.next_id):
            if shard in gi.done_shards:
                continue
            if shard not in live:
                gi.feed.barrier()  # type: ignore[attr-defined]
                if log.first_seq(self._engine, gi.feed.table_id, shard, gi.checkpoint(shard)) is None:  # type: ignore[attr-defined]
                    gi.done_shards.add(shard)
                    continue
            out.append(shard)
        return out

    def _apply_shard(self, gi: GlobalIndex, shard: int) -> tuple[int, bool]:
        after = gi.checkpoint(shard)
        keys: dict[bytes, None] = {}
        stamps = []
        last = after
        table = gi.table
        for seq, rec in log.scan_shard(self._engine, gi.feed.table_id, shard, after):  # type: ignore[attr-defined]
            keys[table._prefix + table._encode(log.decode_pk(rec))] = None  # type: ignore[attr-defined]
            stamps.append(rec[1])
            last = seq
            if len(stamps) >= CHUNK:
                break
        if not stamps:
            return 0, False
        batch = self._engine.batch()
        self.sync(gi, list(keys), batch)
        batch.put(layout.checkpoint_key(gi.index_id, shard), last.to_bytes(8, "big"))
        self._engine.write(batch)
        gi.checkpoints[shard] = last
        now = now_ms()
        self.lags.extend(now - ts for ts in stamps)
        return len(stamps), len(stamps) >= CHUNK

    def sync(self, gi: GlobalIndex, base_keys: list[bytes], batch) -> None:
        """Put into ``batch`` what makes the entries of ``base_keys`` match the rows now.

        Caller holds ``gi.lock``; the result is right for the rows as read here.
        """
        engine = self._engine
        codec = gi.codec
        id4 = gi.index_id.to_bytes(4, "big")
        ref_keys = [layout.INDEX_REFS + id4 + k[5:] for k in base_keys]
        blobs = engine.multi_get(base_keys)
        refs = engine.multi_get(ref_keys)
        prefix = codec.prefix
        for blob, ref_key, ref in zip(blobs, ref_keys, refs):
            entry = codec.entry(rowcodec.unpack(blob)) if blob is not None else None
            old = prefix + ref if ref is not None else None
            if entry is None:
                if old is not None:
                    batch.delete(old)
                    batch.delete(ref_key)
                continue
            if old is not None and old != entry[0]:
                batch.delete(old)
            batch.put(entry[0], entry[1])
            if old != entry[0]:
                batch.put(ref_key, entry[0][len(prefix):])

    # -- observing ---------------------------------------------------------------------

    def lag_ms(self, gi: GlobalIndex, now: int | None = None) -> int:
        """Milliseconds since the commit of the oldest record ``gi`` has not applied (0: none)."""
        oldest = self.oldest_unapplied(gi)
        if oldest is None:
            return 0
        return max((now_ms() if now is None else now) - oldest, 0)

    def oldest_unapplied(self, gi: GlobalIndex) -> int | None:
        """Commit time (ms) of the oldest record ``gi`` has not applied, or None."""
        if gi.seen_seq == gi.feed.seq:  # type: ignore[attr-defined]
            return None
        tp = self._db._partitions.partitions(gi.table)
        oldest = None
        for shard in range(tp.next_id):
            if shard in gi.done_shards:
                continue
            first = log.first_seq(self._engine, gi.feed.table_id, shard, gi.checkpoint(shard))  # type: ignore[attr-defined]
            if first is not None and (oldest is None or first[1] < oldest):
                oldest = first[1]
        return oldest

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every global index has applied every committed record; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if all(gi.seen_seq == gi.feed.seq for gi in list(self.indexes.values())):  # type: ignore[attr-defined]
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.002)
