"""Background work of a store: the TTL purge loop and the partition maintenance loop.

:class:`Background` owns both threads. Each wakes on its interval until
``stop()``; ``Database.close`` stops them before it closes the engine. The
global-index applier (``index/global_.py``) runs its own thread.

Each loop survives any error a pass raises: it logs it, backs off and tries
again (``widetable.health``); ``states()`` reports how each is doing.

Garbage collection: expired cells are invisible as soon as they expire; a
purge rewrites rows that hold expired cells or too many versions, under the
row lock (see :meth:`Background.purge_round` for which tables a round reads).
A Bigtable table's families are purged by their GC rules (``FamilyTable.purge_families``)
in every round.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..descriptions import LoopState
from ..health import LoopHealth
from ..keys import layout
from ..table import rowcodec
from ..table.reader import visible_versions
from ..table.values import now_ms

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..table.table import Table

DEFAULT_PURGE_INTERVAL = 600.0
DEFAULT_MAINTENANCE_INTERVAL = 5.0  # seconds between partition split/merge passes


class Background:
    """The purge and maintenance threads of one store (None interval: that one is off)."""

    def __init__(self, ctx: StoreContext, purge_interval: float | None,
                 maintenance_interval: float | None) -> None:
        self._ctx = ctx
        self._engine = ctx.engine
        self._tables = ctx.tables
        self._partitions = ctx.partitions
        self._purge_interval = purge_interval
        self._maintenance_interval = maintenance_interval
        self._stop = threading.Event()
        # Tables whose max_versions went down since the last background purge (their rows
        # may hold versions past it); None: the next pass covers every table (see purge_round).
        self._purge_due: set[str] | None = None
        self._purge_due_lock = threading.Lock()
        self._purger: threading.Thread | None = None
        self._maintainer: threading.Thread | None = None
        self.purge_health = LoopHealth("purge")
        self.maintenance_health = LoopHealth("maintenance")

    def start(self) -> None:
        if self._purge_interval:
            self._purger = threading.Thread(
                target=self._purge_loop, args=(self._purge_interval,), name="widetable-purge",
                daemon=True,
            )
            self._purger.start()
        if self._maintenance_interval:
            self._maintainer = threading.Thread(
                target=self._maintain_loop, args=(self._maintenance_interval,),
                name="widetable-partitions", daemon=True,
            )
            self._maintainer.start()

    def signal_stop(self) -> None:
        """Tell both loops (and a purge in progress) to stop; returns at once."""
        self._stop.set()

    def join(self, timeout: float = 10) -> None:
        """Wait (up to ``timeout`` seconds each) for the loops to end; after signal_stop."""
        if self._purger is not None:
            self._purger.join(timeout=timeout)
        if self._maintainer is not None:
            self._maintainer.join(timeout=timeout)

    def max_versions_lowered(self, name: str) -> None:
        """Table ``name``'s max_versions went down: its next round reads it."""
        with self._purge_due_lock:
            if self._purge_due is not None:
                self._purge_due.add(name)

    # -- partition maintenance -----------------------------------------------------------

    def _maintain_loop(self, interval: float) -> None:
        health = self.maintenance_health
        health.running = True
        last = time.monotonic()
        wait = min(interval, 1.0)
        try:
            while not self._stop.wait(wait):
                wait = min(interval, 1.0)
                try:
                    if time.monotonic() - last >= interval:
                        last = time.monotonic()
                        self._partitions.maintain()
                    else:
                        self._partitions.tick()
                    health.ok()
                except Exception as exc:  # an engine error, or a bug: log, back off, go on
                    if self._ctx.closed or self._stop.is_set():
                        return
                    wait = health.failed(exc, "a partition maintenance pass")
        finally:
            health.running = False

    # -- garbage collection ----------------------------------------------------------------

    def purge_table(self, table: Table) -> int:
        """Rewrite the rows of ``table`` holding cells expired by TTL or past max_versions
        (a Bigtable table: cells its families' GC rules delete); returns rows changed.
        Stops early once the store stops or the table is dropped."""
        purge_families = getattr(table, "purge_families", None)
        if purge_families is not None:
            return purge_families(self._stop.is_set)
        opts = table.schema.options
        start, end = layout.table_range(table.schema.table_id)
        changed = 0
        engine = self._engine
        for key, blob in engine.scan(start, end):
            if self._stop.is_set() or table.dropped:
                break
            now = now_ms()
            cutoff = None if opts.ttl < 0 else now - opts.ttl * 1000
            row = rowcodec.unpack(blob)
            if cutoff is None and not row[4]:
                continue
            with table._lock(key):
                if table.dropped:  # dropped since the check above: its keys are gone
                    break
                current = engine.get(key)
                if current is None:
                    continue
                row = rowcodec.unpack(current)
                versions = visible_versions(row, cutoff)
                rowcodec.trim(versions, opts.max_versions, cutoff)
                new = rowcodec.encode_versions(row[1], versions) if versions else None
                if new == current or (not row[2] and new is None and cutoff is not None):
                    continue
                if table._changes is not None:  # local index entries; an internal PURGE record
                    table._changes.purge(key, row, new)
                elif new is None:
                    engine.delete(key)
                else:
                    engine.put(key, new)
                changed += 1
        return changed

    def purge_round(self) -> int:
        """One background purge; returns rows changed.

        Only a table with a TTL gains expired cells as time passes. Every write
        trims versions to max_versions, so a table without TTL holds surplus
        versions only after update_table lowered max_versions: it is purged in
        the next round, and the first round after opening purges every table
        (the store may have closed before such a purge ran). The other rounds
        leave TTL-less tables unread instead of decoding every row of them.
        """
        with self._purge_due_lock:
            due, self._purge_due = self._purge_due, set()
        changed = 0
        try:
            for table in list(self._tables.values()):
                purge_families = getattr(table, "purge_families", None)
                if purge_families is not None:  # a Bigtable table: its families' GC rules
                    changed += purge_families(self._stop.is_set)
                elif due is None or table.schema.options.ttl >= 0 or table.name in due:
                    changed += self.purge_table(table)
        except BaseException:
            with self._purge_due_lock:  # a round that failed is owed again in full
                self._purge_due = None if due is None else due | self._purge_due  # type: ignore[operator]
            raise
        return changed

    def _purge_loop(self, interval: float) -> None:
        health = self.purge_health
        health.running = True
        wait = interval
        try:
            while not self._stop.wait(wait):
                wait = interval
                try:
                    self.purge_round()
                    health.ok()
                except Exception as exc:  # an engine error, or a bug: log, back off, go on
                    if self._ctx.closed or self._stop.is_set():
                        return
                    # The failed round is owed again in full; retry sooner than a whole interval.
                    wait = min(health.failed(exc, "a TTL purge round"), interval)
        finally:
            health.running = False

    def states(self) -> list[LoopState]:
        """The purge and maintenance loops' health (see ``widetable.health``)."""
        return [self.purge_health.state(), self.maintenance_health.state()]
