"""Change-log consumers: the registry of everything that reads a table's change log.

A table's change log (``log.py``) exists while the table has at least one
consumer. Today's consumers are the table's stream (``stream:<table>``, whose
readers keep their own positions in iterators) and each global index
(``index:<name>``, applied by ``index/global_.py``); the search index and
replication register the same way, without touching ``index/``. One
:class:`ChangeLog` per store (``StoreContext.changelog``) holds them, the
tables' feeds (``feed.TableFeed``), and trims the logs.

Contracts:

* **Logging.** ``register`` makes the table log every later write (its feed is
  reconfigured, and every writer that missed the change has finished when it
  returns); ``unregister`` of the last consumer stops the log and deletes it.
* **Checkpoints.** A consumer with a ``consumer_id`` (a u32 from the table-id
  allocator, ``ctx.ids.take(batch)``; a global index uses its index id) has one
  checkpoint per shard: the last seq it applied, stored under
  ``layout.checkpoint_key(consumer_id, shard)`` and loaded by ``register``. A
  shard it never committed is at ``start_seq``. A consumer without an id
  (the stream) has no checkpoints and holds no record back.
* **Trim.** ``trim()`` drops records past the table's ``stream_retention`` that
  every consumer with checkpoints has applied, never one it has not.
* **Purges.** TTL purges are logged as PURGE records. ``read`` hands them to a
  consumer registered with ``sees_purges=True`` (the default: an index or a
  replica must see the row change); the stream API hides them.
* **State.** Each consumer carries its error state, a ``health.LoopHealth``
  (``consumer.health``; a global index's is its applier's): ``failed(exc)``
  records and logs an error (when, how often) and returns the back-off delay,
  ``ok()`` a pass that worked, ``health.state()`` the report;
  ``lag_ms(consumer)`` is the age of its oldest unapplied record.

An external consumer, pull-based, from its own thread::

    log = ctx.changelog
    batch = ctx.engine.batch(); cid = ctx.ids.take(batch); ctx.engine.write(batch)
    c = log.register("search:orders_text", table, cid, wake=event.set)
    # persist cid and c.start_seq with the consumer's own metadata; pass both again
    # (start_seq=...) after reopening the store.
    while running:
        event.wait(1.0); event.clear()
        page = log.read(c, limit=1000)      # records after c's checkpoints, in order per shard
        try:
            apply(page.records)             # StreamRecord objects, PURGE included
        except Exception as exc:
            event.wait(c.failed(exc))      # logged, counted; back off, then try again
            continue
        c.commit(page.checkpoints)          # or c.stage(batch, ...) + c.committed(...) to
        c.ok()                              # write the checkpoints with one's own batch
    log.drop(c.name, batch)                 # when the consumer goes away for good

``wake`` is called after every logged commit of the table (keep it cheap: an
``Event.set``). Records of one row key are read in commit order: a page stops
at the first shard it fills, so a split's parent is drained before its
children (their shard ids are higher).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ObjectAlreadyExist
from ..health import LoopHealth
from ..health import log as health_log
from ..keys import layout
from ..table.values import now_ms
from . import log
from .feed import TableFeed
from .log import StreamRecord

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..table.table import Table


def _seq_counter(table_id: int) -> str:
    return f"change_log_seq/{table_id}"


@dataclass(eq=False)
class Consumer:
    """One registered consumer of one table's change log (see the module doc)."""

    name: str
    table: Table
    consumer_id: int | None = None  # where its checkpoints live; None: it keeps none here
    start_seq: int = -1  # the checkpoint of a shard it never committed
    # Checkpoints kept by the consumer itself (e.g. in its own files): shard -> last seq
    # applied. Trim holds back to it as to stored checkpoints; commit/stage are not used.
    position: Callable[[int], int] | None = None
    wake: Callable[[], None] | None = None  # after each logged commit of the table
    sees_purges: bool = True
    wants_tail: bool = False  # keep the feed's in-memory tail (the global-index applier)
    checkpoints: dict[int, int] = field(default_factory=dict)  # shard -> last seq applied
    health: LoopHealth = None  # type: ignore[assignment]  # its error state (set at init)
    _engine: object = None

    def __post_init__(self) -> None:
        if self.health is None:
            self.health = LoopHealth(f"change-log consumer {self.name}")

    @property
    def holds_log(self) -> bool:
        """Whether it has checkpoints that trimming must respect."""
        return self.consumer_id is not None or self.position is not None

    def checkpoint(self, shard: int) -> int:
        """The last seq of ``shard`` this consumer applied (``start_seq`` if none yet)."""
        if self.position is not None:
            return self.position(shard)
        return self.checkpoints.get(shard, self.start_seq)

    def stage(self, batch, moved: dict[int, int] | list[tuple[int, int]]) -> None:
        """Put checkpoints ``{shard: seq}`` into ``batch`` (written by the caller, with
        whatever it applied); then call :meth:`committed`."""
        items = moved.items() if isinstance(moved, dict) else moved
        cid = self.consumer_id
        if cid is None:
            raise ValueError(f"consumer {self.name!r} keeps no checkpoints")
        for shard, seq in items:
            batch.put(layout.checkpoint_key(cid, shard), seq.to_bytes(8, "big"))

    def committed(self, moved: dict[int, int] | list[tuple[int, int]]) -> None:
        """The checkpoints staged by :meth:`stage` are written."""
        self.checkpoints.update(moved)

    def commit(self, moved: dict[int, int]) -> None:
        """Store checkpoints ``{shard: seq}`` in one engine write of their own."""
        if not moved:
            return
        engine = self._engine
        batch = engine.batch()  # type: ignore[attr-defined]
        self.stage(batch, moved)
        engine.write(batch)  # type: ignore[attr-defined]
        self.committed(moved)

    def failed(self, exc: BaseException, doing: str = "applying change records") -> float:
        """Record (and log) that a pass failed with ``exc``; returns the seconds to back off
        before the next try (``health.LoopHealth``)."""
        return self.health.failed(exc, doing)

    def ok(self) -> None:
        """Record that a pass worked."""
        self.health.ok()


@dataclass(frozen=True, slots=True)
class ChangePage:
    """What :meth:`ChangeLog.read` returns: ``records`` in commit order per shard, the
    ``checkpoints`` that commit them, and ``more`` if records were left for a next page."""

    records: list[StreamRecord]
    checkpoints: dict[int, int]
    more: bool


class ChangeLog:
    """The change-log consumers and feeds of one store. Thread-safe."""

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self.engine = self._engine = ctx.engine
        self._partitions = ctx.partitions
        self._row_locks = ctx.row_locks
        self.feeds: dict[int, TableFeed] = {}  # table id -> its feed
        self._consumers: dict[str, Consumer] = {}
        self._lock = threading.RLock()
        # Held by trim, and by drops while they delete a table's keys: a trim never writes
        # a trim mark or seq counter under an id whose keys are gone.
        self.trim_lock = threading.Lock()
        # Called once a table logs: starts the thread that trims logs (the applier's).
        self.on_logged: Callable[[], None] | None = None
        self._pinning: set[str] = set()  # consumers holding records past retention (logged)

    # -- the registry ------------------------------------------------------------------

    def register(self, name: str, table: Table, consumer_id: int | None = None,
                 start_seq: int | None = None, wake: Callable[[], None] | None = None,
                 sees_purges: bool = True, wants_tail: bool = False,
                 position: Callable[[int], int] | None = None) -> Consumer:
        """Register consumer ``name`` (unique in the store) of ``table``'s change log and
        return it; the table logs from now on. ``start_seq`` None: the log's last seq now
        (the consumer starts after today's records). ``position(shard)``: for a consumer
        that keeps its checkpoints itself, instead of a ``consumer_id``. Raises
        ``OTSObjectAlreadyExist`` if the name is taken."""
        with self._lock:
            if name in self._consumers:
                raise ObjectAlreadyExist(f"change-log consumer {name!r} already exists")
            consumer = self.attach(name, table, consumer_id,
                                   -1 if start_seq is None else start_seq, wake, sees_purges,
                                   wants_tail, position)
            self.configure(table)
            if start_seq is None:
                consumer.start_seq = self.last_seq(table)
            return consumer

    def attach(self, name: str, table: Table, consumer_id: int | None, start_seq: int,
               wake: Callable[[], None] | None = None, sees_purges: bool = True,
               wants_tail: bool = False, position: Callable[[int], int] | None = None,
               ) -> Consumer:
        """``register`` without reconfiguring the table's feed: the caller calls
        :meth:`configure` next (the index manager, which attaches the consumers a schema
        implies). Replaces a consumer of the same name."""
        consumer = Consumer(name, table, consumer_id, start_seq, position, wake, sees_purges,
                            wants_tail, _engine=self._engine)
        if consumer_id is not None:
            for key, value in self._engine.scan(*layout.checkpoint_range(consumer_id)):
                consumer.checkpoints[layout.decode_checkpoint_key(key)[1]] = int.from_bytes(value, "big")
        self._consumers[name] = consumer
        return consumer

    def unregister(self, name: str) -> Consumer | None:
        """Remove consumer ``name`` (its stored checkpoints stay: see :meth:`drop`). The
        last consumer of a table going stops its log and deletes it."""
        with self._lock:
            consumer = self._consumers.pop(name, None)
            if consumer is not None and not consumer.table._unusable:
                self.configure(consumer.table)
            return consumer

    def detach(self, name: str) -> Consumer | None:
        """``unregister`` without reconfiguring the table's feed (see :meth:`attach`)."""
        with self._lock:
            return self._consumers.pop(name, None)

    def drop(self, name: str, batch) -> None:
        """Unregister consumer ``name`` and put the deletion of its checkpoints in ``batch``."""
        consumer = self.unregister(name)
        if consumer is not None and consumer.consumer_id is not None:
            batch.delete_range(*layout.checkpoint_range(consumer.consumer_id))

    def get(self, name: str) -> Consumer | None:
        return self._consumers.get(name)

    def consumers(self, table: Table | None = None) -> list[Consumer]:
        """The consumers (of ``table``), in registration order."""
        return [c for c in list(self._consumers.values()) if table is None or c.table is table]

    def _of(self, table_id: int) -> list[Consumer]:
        return [c for c in list(self._consumers.values()) if c.table.schema.table_id == table_id]

    # -- feeds ---------------------------------------------------------------------------

    def configure(self, table: Table, local: list | None = None) -> None:
        """Give ``table`` the feed its consumers and ``local`` indexes call for (None: keep
        the feed's local indexes), then wait out writers that used the old setting:
        afterwards every write sees the new one."""
        tid = table.schema.table_id
        with self._lock:
            consumers = self._of(tid)
            feed = self.feeds.get(tid)
            if local is None:
                local = feed.local if feed is not None else []
            logged = bool(consumers)
            if logged or local:
                if feed is None:
                    router = self._partitions.partitions(table).router
                    feed = TableFeed(self._engine, tid, router, logged, local, None,
                                     self.recover_seq(table))
                    self.feeds[tid] = feed
                feed.logged, feed.local = logged, local
                feed.notify = _wake_all([c.wake for c in consumers if c.wake is not None])
                feed.set_tail(any(c.wants_tail for c in consumers))
                table._changes = feed  # type: ignore[assignment]
                if logged and self.on_logged is not None:
                    self.on_logged()
            else:
                table._changes = None
            self._row_locks.barrier()
            if feed is not None and not logged:
                self._drop_log(tid, feed)

    def last_seq(self, table: Table) -> int:
        """The last seq handed out in ``table``'s change log (kept while its log is off)."""
        feed = self.feeds.get(table.schema.table_id)
        return feed.seq if feed is not None else self.recover_seq(table)

    def recover_seq(self, table: Table) -> int:
        """The last seq of ``table``'s log as stored: its counter, its records, and the
        start of every consumer (an index created at a seq the log no longer holds)."""
        tid = table.schema.table_id
        tp = self._partitions.partitions(table)
        raw = self._engine.get(layout.counter_key(_seq_counter(tid)))
        seq = int.from_bytes(raw, "big") if raw else 0
        for shard in range(tp.next_id):
            seq = max(seq, log.last_seq(self._engine, tid, shard))
        starts = [spec.start_seq for spec in table.schema.indexes]
        starts += [c.start_seq for c in self._of(tid)]
        return max([seq, *starts])

    def _drop_log(self, table_id: int, feed: TableFeed) -> None:
        batch = self._engine.batch()
        batch.delete_range(*layout.change_log_range(table_id))
        batch.delete_range(*layout.checkpoint_range(table_id))  # its trim marks
        batch.put(layout.counter_key(_seq_counter(table_id)), feed.seq.to_bytes(8, "big"))
        self._engine.write(batch)

    def drop_table(self, table: Table, batch) -> None:
        """Put the deletion of the table's log, trim marks, seq counter and the checkpoints
        of its consumers into ``batch``, and forget its feed and consumers."""
        tid = table.schema.table_id
        with self._lock:
            for consumer in self._of(tid):
                del self._consumers[consumer.name]
                if consumer.consumer_id is not None:
                    batch.delete_range(*layout.checkpoint_range(consumer.consumer_id))
            batch.delete_range(*layout.change_log_range(tid))
            batch.delete_range(*layout.checkpoint_range(tid))  # its trim marks
            batch.delete(layout.counter_key(_seq_counter(tid)))
            self.feeds.pop(tid, None)

    # -- reading -------------------------------------------------------------------------

    def read(self, consumer: Consumer, limit: int = 1000) -> ChangePage:
        """Up to ``limit`` records after ``consumer``'s checkpoints, shard by shard in shard
        order, stopping at the first shard with more left. Reads only; commit the page's
        checkpoints once it is applied."""
        table = consumer.table
        tid = table.schema.table_id
        feed = self.feeds.get(tid)
        tp = self._partitions.partitions(table)
        live = {p.id for p in tp.router.parts}
        records: list[StreamRecord] = []
        checkpoints: dict[int, int] = {}
        for shard in range(tp.next_id):
            if shard not in live and feed is not None:
                feed.barrier()  # no write can still be on its way into a closed shard
            for key, value in self._engine.scan(
                    *layout.change_log_range(tid, shard, consumer.checkpoint(shard))):
                if len(records) >= limit:
                    return ChangePage(records, checkpoints, True)
                checkpoints[shard] = layout.change_log_seq(key)
                if not consumer.sees_purges and log.is_purge(value):
                    continue
                records.append(log.decode_record(key, value))
        return ChangePage(records, checkpoints, False)

    def oldest_unapplied(self, consumer: Consumer) -> int | None:
        """Commit time (ms) of the oldest record ``consumer`` has not applied, or None
        (also None for a consumer that keeps no checkpoints)."""
        if not consumer.holds_log:
            return None
        tid = consumer.table.schema.table_id
        oldest = None
        for shard in range(self._partitions.partitions(consumer.table).next_id):
            first = log.first_seq(self._engine, tid, shard, consumer.checkpoint(shard))
            if first is not None and (oldest is None or first[1] < oldest):
                oldest = first[1]
        return oldest

    def lag_ms(self, consumer: Consumer) -> int | None:
        """Milliseconds since the commit of ``consumer``'s oldest unapplied record (0: none;
        None: it keeps no checkpoints)."""
        if not consumer.holds_log:
            return None
        oldest = self.oldest_unapplied(consumer)
        return 0 if oldest is None else max(now_ms() - oldest, 0)

    def lagging(self, table: Table) -> list[str]:
        """Consumers of ``table`` whose oldest unapplied record is past its retention (the
        log keeps it for them, beyond what the stream promises)."""
        cutoff = now_ms() - table.schema.stream_retention * 1000
        out = []
        for consumer in self.consumers(table):
            oldest = self.oldest_unapplied(consumer)
            if oldest is not None and oldest < cutoff:
                out.append(consumer.name)
        return out

    # -- retention -----------------------------------------------------------------------

    def trim(self) -> int:
        """Drop change records past their table's retention that every consumer with
        checkpoints has applied; returns how many. Holds ``trim_lock``."""
        with self.trim_lock:
            return self._trim_locked()

    def _trim_locked(self) -> int:
        dropped = 0
        now = now_ms()
        for table in list(self._ctx.tables.values()):
            feed = self.feeds.get(table.schema.table_id)
            if feed is None or not feed.logged or table._unusable:
                continue
            cutoff = now - table.schema.stream_retention * 1000
            holding = [c for c in self._of(feed.table_id) if c.holds_log]
            # First the seq counter, at least every seq a trim may drop: reopening recovers
            # the seq from it and the log's last records, and after a crash in the middle of
            # trimming, a log emptied without it would hand out seqs again.
            self._engine.put(layout.counter_key(_seq_counter(feed.table_id)),
                             feed.seq.to_bytes(8, "big"))
            pinning: set[str] = set()
            for shard in list(log.shards_with_records(self._engine, feed.table_id)):
                keep = min((c.checkpoint(shard) for c in holding), default=None)
                dropped += log.trim_shard(self._engine, feed.table_id, shard, cutoff, keep)
                if keep is not None:
                    first = log.first_seq(self._engine, feed.table_id, shard, keep)
                    if first is not None and first[1] < cutoff:  # kept past retention for:
                        pinning.update(c.name for c in holding if c.checkpoint(shard) < first[0])
            self._note_pinning(table.name, {c.name for c in holding}, pinning)
        return dropped

    def _note_pinning(self, table: str, names: set[str], pinning: set[str]) -> None:
        """Log (once, as it starts and as it ends) a consumer whose unapplied records are
        older than the table's retention: they are kept for it, and its log grows."""
        for name in pinning - self._pinning:
            health_log.warning(
                "widetable: consumer %r of table %r has not applied change records older than "
                "the table's stream retention; they are kept for it, and the change log grows "
                "until it catches up (see its lag and error in describe_table)", name, table)
        for name in (self._pinning & names) - pinning:
            health_log.info("widetable: consumer %r of table %r is back within retention", name, table)
        self._pinning = (self._pinning - names) | pinning


def _wake_all(wakes: list[Callable[[], None]]) -> Callable[[], None] | None:
    """One callable calling every one of ``wakes`` (the feed calls it per logged commit)."""
    if not wakes:
        return None
    if len(set(wakes)) == 1:
        return wakes[0]
    unique = list(dict.fromkeys(wakes))

    def wake() -> None:
        for w in unique:
            w()

    return wake
