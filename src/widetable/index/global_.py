"""The global-index applier: tails change logs and brings global indexes up to date.

One daemon thread per database (``widetable-indexer``) wakes on every logged
commit of a table with a global index (and every 50 ms). For each index it
takes the records after its position and brings the entry of each row they
name up to date: it computes the row's entry and compares it with the entry
it recorded for that row (the index ref, ``layout.index_ref_key``); a stale
entry is deleted, the new one put. Index rows, refs, their counts
(``counts.py``) and the new checkpoints go in one engine batch, so after a
crash the applier resumes exactly at its checkpoints, and applying a record
again is harmless.

Records come from one of two places:

* the feed's in-memory tail (``TableFeed.tail``), which normally holds every
  record after the index's position, in seq order, each with the row's image
  after its write. The applier takes up to GROUP of them, brings each row to
  its last image in the group, and advances the checkpoint of each shard they
  touched. No log scan, no record decode, no read of the rows;
* the log itself, when the tail does not reach back far enough (after opening
  the store, after the tail overflowed, for a new index): shard by shard from
  each checkpoint, reading each named row as it is now (a *sync*; backfill
  syncs too), until the index has caught up with a seq the tail covers.

Either way, once every record is applied the index equals the one derived
from the table. Entries never go back in time either: ``GlobalIndex.synced``
remembers the newest commit any sync may have seen, and a tail record not
newer than that is synced again instead of taking its (possibly older) image.

The same thread trims change logs past their retention (never a record some
index has not applied) about every 10 s; it runs once any table has a change
log, a stream's without any global index included.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter

import msgspec

from ..health import LoopHealth
from ..keys import layout
from ..keys.compiled import compile_key_encoder
from ..stream import log
from ..stream.consumers import Consumer
from ..stream.feed import NO_IMAGE
from ..table import rowcodec
from ..table.values import now_ms
from .schema import TOO_LONG, IndexCodec

GROUP = 2000  # records applied in one engine batch (per shard, when reading the log)
TAIL_TRIM = 4096  # tail records applied by every index before the tail forgets them
TRIM_INTERVAL = 10.0
BATCH_DELAY = 0.01  # seconds a woken applier waits for more commits
PROBE = 0.0002  # seconds the applier sleeps between groups, yielding the GIL
BUSY = 0.002  # a PROBE that took this long: another thread held the GIL (a write burst)
BUSY_STREAK = 3  # busy PROBEs in a row that make a burst
MAX_DEFER = 0.05  # seconds of lag after which the applier stops yielding to busy writers

# The ref of a base row too long to index (a key value over the limits): no entry, but
# counted. An entry's ref is never empty (an index key has a column at least).
TOO_LONG_REF = b""

_key_of, _shard_of, _ts_of = itemgetter(0), itemgetter(1), itemgetter(2)  # of a tail item
_decode_record = msgspec.msgpack.Decoder().decode  # a change record, as lists and bytes
# The key of a PUT record's row blob, leaving the columns undecoded.
_pk_of_blob = msgspec.msgpack.Decoder(
    tuple[int, tuple, msgspec.Raw, msgspec.Raw, msgspec.Raw]
).decode


def too_long_key(index_id: int) -> bytes:
    """The counter of an index's base rows too long to index (u64, big-endian)."""
    return layout.counter_key(f"index_too_long/{index_id}")


@dataclass(eq=False)
class GlobalIndex:
    """The applier's state for one global index."""

    codec: IndexCodec
    table: object  # the base Table
    feed: object  # the base table's TableFeed
    consumer: Consumer  # its entry in the change-log registry: checkpoints, error state
    lock: threading.Lock = field(default_factory=threading.Lock)
    seen_seq: int = -1  # every record with seq <= seen_seq is applied, in every shard
    # Every row read for this index so far (by a sync) was read after the commit of this
    # seq: a tail image of an older record may be older than the entry it wrote.
    synced: int = -1
    done_shards: set[int] = field(default_factory=set)  # closed shards drained after a barrier
    encode_base: object = None  # base pk tuple -> key bytes (after the table prefix)
    too_long: int = 0  # base rows too long to index (their refs are TOO_LONG_REF)
    health: LoopHealth = field(default_factory=lambda: LoopHealth("indexer"))  # its errors
    retry_at: float = 0.0  # monotonic time of the next try after a failure (0: none due)

    def __post_init__(self) -> None:
        self.encode_base = compile_key_encoder(self.table.schema.pk_types)  # type: ignore[attr-defined]
        self.health = LoopHealth(f"indexer ({self.codec.spec.name})")
        self.consumer.health = self.health  # the registry reports the applier's state

    @property
    def index_id(self) -> int:
        return self.codec.spec.table_id

    @property
    def checkpoints(self) -> dict[int, int]:
        """shard -> the last seq applied (the consumer's, loaded when it registered)."""
        return self.consumer.checkpoints

    def checkpoint(self, shard: int) -> int:
        return self.consumer.checkpoints.get(shard, self.codec.spec.start_seq)


class Indexer:
    """Applies change logs to the global indexes of one database."""

    def __init__(self, ctx, trim: Callable[[], int]) -> None:
        """``ctx``: the store context; ``trim()`` trims the change logs (see TRIM_INTERVAL)."""
        self._engine = ctx.engine
        self._partitions = ctx.partitions
        self._trim = trim
        self.indexes: dict[int, GlobalIndex] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_trim = time.monotonic()
        self.lags: deque[int] = deque(maxlen=200_000)  # ms from commit to apply, per record
        # CPU seconds the applying passes took, and the records they applied: what applying
        # costs per record (bench.indexes reports it; on a GIL build writers pay most of it)
        self.cpu_s = 0.0
        self.applied = 0
        self.health = LoopHealth("indexer")  # the loop's errors: logged, backed off, reported
        self._busy = 0  # busy probes in a row (see _defer)

    # -- lifecycle -------------------------------------------------------------------

    def add(self, codec: IndexCodec, table, feed, consumer: Consumer) -> GlobalIndex:
        """Apply global index ``codec`` of ``table`` from now on; ``consumer`` (registered
        under the index's id) holds its checkpoints."""
        gi = GlobalIndex(codec, table, feed, consumer)
        self.load_too_long(gi)
        self.indexes[gi.index_id] = gi
        self.start()
        return gi

    def load_too_long(self, gi: GlobalIndex) -> None:
        """Read ``gi``'s count of rows too long to index (again, after a failed write)."""
        raw = self._engine.get(too_long_key(gi.index_id))
        gi.too_long = 0 if raw is None else int.from_bytes(raw, "big")

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
        health = self.health
        health.running = True
        try:
            while not self._stop.is_set():
                if self._wake.wait(0.05):
                    # Let a burst of commits gather: one pass over many records costs far less
                    # per record (and takes the GIL from writers less often) than many small ones.
                    self._stop.wait(BATCH_DELAY)
                self._wake.clear()
                try:
                    while not self._stop.is_set():
                        if self._defer():
                            continue
                        cpu = time.thread_time()
                        n = self.run_once()
                        self.cpu_s += time.thread_time() - cpu
                        self.applied += n
                        if not n:
                            break
                    if time.monotonic() - self._last_trim >= TRIM_INTERVAL:
                        self._last_trim = time.monotonic()
                        self._trim()
                    health.ok()
                except Exception as exc:  # an engine error, or a bug: log, back off, go on
                    if self._stop.is_set():
                        return
                    self._stop.wait(health.failed(exc, "applying global indexes / trimming change logs"))
        finally:
            health.running = False

    def _defer(self) -> bool:
        """Yield to foreground threads between groups; True: apply nothing now.

        The applier is background work sharing the GIL with the writers. It
        sleeps for PROBE seconds and measures how long getting the GIL back
        took: when threads of this process kept it (and the CPU: a wait spent
        preempted by other processes does not count) for a whole switch interval
        BUSY_STREAK times in a row, the process is busy (a write burst), and the
        applier holds off, as long as no unapplied record is older than
        MAX_DEFER; past that it applies at full speed. When the writers leave
        the GIL free (a moderate rate), it applies at once.
        """
        t0, cpu0 = time.perf_counter(), time.process_time()
        time.sleep(PROBE)
        waited = time.perf_counter() - t0
        if waited < BUSY or time.process_time() - cpu0 < waited / 2:
            self._busy = 0
            return False
        self._busy += 1
        if self._busy < BUSY_STREAK or self._stop.is_set():
            return False  # a writer catching up briefly (a moderate rate): keep applying
        now = now_ms()
        for gi in list(self.indexes.values()):
            oldest = self.oldest_unapplied(gi)
            if oldest is not None and now - oldest >= MAX_DEFER * 1000:
                return False
        return any(gi.seen_seq != gi.feed.seq for gi in list(self.indexes.values()))  # type: ignore[attr-defined]

    # -- applying ------------------------------------------------------------------------

    def run_once(self) -> int:
        """One step for every global index (GROUP records from the tail, or a pass over
        the log); returns the records applied."""
        applied = 0
        for gi in list(self.indexes.values()):
            feed = gi.feed
            if gi.seen_seq == feed.seq:  # type: ignore[attr-defined]
                continue
            if gi.retry_at and time.monotonic() < gi.retry_at:
                continue  # failed lately: backing off, while the other indexes go on
            with gi.lock:
                if gi.index_id not in self.indexes:
                    continue
                try:
                    n = self._apply_tail(gi)
                    applied += self._apply_log(gi) if n is None else n
                except Exception as exc:  # this index only: log, back off, report, go on
                    if self._stop.is_set():
                        raise
                    self._failed(gi, exc)
                    continue
                if gi.health.streak:
                    gi.health.ok()
                    gi.retry_at = 0.0
        self._trim_tails()
        return applied

    def _failed(self, gi: GlobalIndex, exc: Exception) -> None:
        """Record that applying ``gi`` failed (``describe_table`` shows it, with the lag that
        grows while it does: the change log is kept for it) and when to try it again."""
        name = gi.codec.spec.name
        gi.retry_at = time.monotonic() + gi.health.failed(exc, f"applying global index {name!r}")
        try:
            self.load_too_long(gi)  # the failed batch's count never reached the disk
        except Exception:  # noqa: BLE001 - the engine is failing: the next try reloads it
            pass

    def _apply_log(self, gi: GlobalIndex) -> int:
        """Read the log of every shard after its checkpoint (GROUP records per shard at most)."""
        target = gi.feed.seq  # type: ignore[attr-defined]
        applied = 0
        more = False
        for shard in self._shards(gi):
            n, full = self._apply_shard(gi, shard)
            applied += n
            more = more or full
        if not more:
            gi.seen_seq = target
        return applied

    def _apply_tail(self, gi: GlobalIndex) -> int | None:
        """Apply up to GROUP records after ``gi.seen_seq`` from the feed's tail, in one engine
        batch with the checkpoints of the shards touched. None: the tail does not hold them.

        Each row named is brought to its image after its last record in the chunk;
        a row without an image, or whose record is not newer than ``gi.synced``, is
        read instead (an image could be older than what a read already indexed, and
        entries never go back in time)."""
        feed = gi.feed
        with feed.lock:  # type: ignore[attr-defined]
            tail = feed.tail  # type: ignore[attr-defined]
            start = gi.seen_seq - feed.tail_from  # type: ignore[attr-defined]
            if tail is None or start < 0 or gi.seen_seq < 0:
                return None
            items = tail[start:start + GROUP]
        if not items:
            return 0
        first = gi.seen_seq + 1
        fresh = gi.synced - first  # items up to this index may be older than a read
        last = dict(zip(map(_key_of, items), range(len(items))))  # row key -> its last item
        keys, images, read = [], [], []
        for key in sorted(last):
            i = last[key]
            image = items[i][3]
            if i <= fresh or image == NO_IMAGE:
                read.append(key)
            else:
                keys.append(key)
                images.append(image)
        if read:
            keys += read
            images += self._read(gi, read)
        batch = self._engine.batch()
        self._put_entries(gi, keys, images, batch)
        # The last record of each shard in the chunk: its new checkpoint.
        last_of = dict(zip(map(_shard_of, items), range(first, first + len(items))))
        moved = [(shard, seq) for shard, seq in last_of.items() if seq > gi.checkpoint(shard)]
        gi.consumer.stage(batch, moved)
        self._engine.write(batch)
        gi.consumer.committed(moved)
        gi.seen_seq = first + len(items) - 1
        now = now_ms()
        self.lags.extend([now - ts for ts in map(_ts_of, items)])
        return len(items)

    def _trim_tails(self) -> None:
        """Let each feed forget the tail records every one of its global indexes applied."""
        low: dict = {}  # feed -> the lowest seen_seq of its indexes
        for gi in list(self.indexes.values()):
            low[gi.feed] = min(low.get(gi.feed, gi.seen_seq), gi.seen_seq)
        for feed, applied in low.items():
            if applied - feed.tail_from >= TAIL_TRIM:
                feed.trim_tail(applied)

    def _shards(self, gi: GlobalIndex) -> list[int]:
        tp = self._partitions.partitions(gi.table)
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
        """Apply up to GROUP records of ``shard``: one log scan, one multi_get of the rows and
        one of the refs, and one engine batch holding entries, refs and the checkpoint."""
        after = gi.checkpoint(shard)
        pks: dict[tuple, None] = {}
        stamps: list[int] = []
        add = stamps.append
        decode, pk_of = _decode_record, _pk_of_blob
        lo, hi = layout.change_log_range(gi.feed.table_id, shard, after)  # type: ignore[attr-defined]
        key = None
        for key, value in self._engine.scan(lo, hi):
            rec = decode(value)
            pks[pk_of(rec[2])[1] if rec[0] == log.PUT else tuple(rec[2])] = None
            add(rec[1])
            if len(stamps) >= GROUP:
                break
        if key is None:
            return 0, False
        last = layout.change_log_seq(key)
        batch = self._engine.batch()
        encode, prefix = gi.encode_base, gi.table._prefix  # type: ignore[attr-defined]
        self.sync(gi, sorted([prefix + encode(pk) for pk in pks]), batch)
        gi.consumer.stage(batch, [(shard, last)])
        self._engine.write(batch)
        gi.consumer.committed([(shard, last)])
        now = now_ms()
        self.lags.extend([now - ts for ts in stamps])
        return len(stamps), len(stamps) >= GROUP

    def sync(self, gi: GlobalIndex, base_keys: list[bytes], batch) -> None:
        """Put into ``batch`` what makes the entries of ``base_keys`` match the rows now.

        Caller holds ``gi.lock``; the result is right for the rows as read here.
        """
        self._put_entries(gi, base_keys, self._read(gi, base_keys), batch)

    def _read(self, gi: GlobalIndex, base_keys: list[bytes]) -> list[bytes | None]:
        """The rows at ``base_keys`` now; raises ``gi.synced`` past every commit they show."""
        blobs = self._engine.multi_get(base_keys)
        feed = gi.feed
        with feed.lock:  # type: ignore[attr-defined]
            # A commit seen by the read above is written, so its seq is in feed.seq by now.
            gi.synced = max(gi.synced, feed.seq)  # type: ignore[attr-defined]
        return blobs

    def _put_entries(self, gi: GlobalIndex, base_keys: list[bytes], blobs: list, batch) -> None:
        """Put into ``batch`` what makes the entries of ``base_keys`` those of ``blobs`` (row
        blobs, None for no row), using and updating the index refs."""
        engine = self._engine
        codec = gi.codec
        ref_keys = layout.index_ref_keys(gi.index_id, base_keys)
        refs = engine.multi_get(ref_keys)
        prefix = codec.prefix
        n = len(prefix)
        entry, unpack, put, delete = codec.entry, rowcodec.unpack, batch.put, batch.delete
        too_long = 0  # rows that became (+) or stopped being (-) too long to index
        counts = codec.counts
        deltas = None
        for blob, ref_key, ref in zip(blobs, ref_keys, refs):
            e = entry(unpack(blob)) if blob is not None else None
            if e is None or e is TOO_LONG:
                if ref:  # the row's entry
                    delete(prefix + ref)
                    if counts is not None:
                        deltas = counts.move(deltas, prefix + ref, None)
                if e is TOO_LONG:
                    if ref != TOO_LONG_REF:
                        put(ref_key, TOO_LONG_REF)
                        too_long += 1
                elif ref is not None:
                    delete(ref_key)
                    too_long -= ref == TOO_LONG_REF
                continue
            ikey = e[0]
            if not ref:
                put(ref_key, ikey[n:])
                too_long -= ref == TOO_LONG_REF
                if counts is not None:
                    deltas = counts.move(deltas, None, ikey)
            elif ref != ikey[n:]:
                delete(prefix + ref)
                put(ref_key, ikey[n:])
                if counts is not None:
                    deltas = counts.move(deltas, prefix + ref, ikey)
            put(ikey, e[1])
        if deltas is not None:  # under gi.lock, which every writer of these counts holds
            deltas.stage(engine, batch)
        if too_long:
            gi.too_long += too_long
            batch.put(too_long_key(gi.index_id), gi.too_long.to_bytes(8, "big"))

    # -- observing ---------------------------------------------------------------------

    def lag_ms(self, gi: GlobalIndex, now: int | None = None) -> int:
        """Milliseconds since the commit of the oldest record ``gi`` has not applied (0: none)."""
        oldest = self.oldest_unapplied(gi)
        if oldest is None:
            return 0
        return max((now_ms() if now is None else now) - oldest, 0)

    def oldest_unapplied(self, gi: GlobalIndex) -> int | None:
        """Commit time (ms) of the oldest record ``gi`` has not applied, or None."""
        feed = gi.feed
        if gi.seen_seq == feed.seq:  # type: ignore[attr-defined]
            return None
        with feed.lock:  # type: ignore[attr-defined]
            tail = feed.tail  # type: ignore[attr-defined]
            i = gi.seen_seq - feed.tail_from  # type: ignore[attr-defined]
            if tail is not None and gi.seen_seq >= 0 and 0 <= i < len(tail):
                return tail[i][2]
        tp = self._partitions.partitions(gi.table)
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
