"""Persisted partition metadata of a table: the map, the split history, key samples.

Two records per table, under ``layout.PARTITIONS`` (DO NOT CHANGE: embedded in
on-disk data)::

    map     := msgpack {"v": 1, "next": next_id,
                        "parts": [[id, start, pinned, created], ...],
                        "history": [[time, kind, reason, [from ids], [to ids], key], ...]}
    samples := msgpack {"v": 1, "parts": [[id, est_bytes, est_rows, [prefix, ...]], ...]}

``start`` and ``key`` are partition-key prefixes without the table prefix
(``b""`` is the table's first key). The map is rewritten by every split and
merge (one small put, no data moves); the samples record with the counters
is rewritten by the periodic statistics flush. History keeps the last
``HISTORY_LIMIT`` events, and, for a table with a stream, every split and merge
within the stream's retention (its shard links are made of them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import msgpack

from ..keys import codec, layout
from .map import RESERVOIR, Partition, Router

HISTORY_LIMIT = 1000
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionEvent:
    """One entry of the split history: a split, a merge, or a hot key that was not split.

    ``kind`` is ``"split"``, ``"merge"`` or ``"hot_key"``; ``reason`` is
    ``"pre-split"``, ``"size"``, ``"load"``, ``"cold"`` or ``"manual"``.
    ``key`` is the partition-key value split at (or the hot key).
    """

    time: float
    kind: str
    reason: str
    parents: tuple[int, ...]
    children: tuple[int, ...]
    key: object = None


class TablePartitions:
    """The partitions of one table: its router, history and id counter."""

    def __init__(self, table_id: int, router: Router, history: list, next_id: int) -> None:
        self.table_id = table_id
        self.prefix = layout.table_prefix(table_id)
        self.router = router
        self.history: list[list] = history
        self.next_id = next_id
        self.recorded = 0  # events recorded since load: tells a pass whether to persist
        # Seconds of splits and merges to keep past HISTORY_LIMIT (a stream's retention: its
        # shard links are made of them); None: the table has no stream.
        self.lineage_window: float | None = None
        # Stores an encoded map (set by the partition manager): see ``install``.
        self.store: Callable[[bytes], None] | None = None

    @classmethod
    def new(cls, table_id: int, split_points: list[bytes], now: float) -> TablePartitions:
        """A fresh map cut at ``split_points`` (sorted, distinct encoded partition-key prefixes)."""
        prefix = layout.table_prefix(table_id)
        starts = [prefix] + [prefix + s for s in split_points]
        parts = [
            Partition(i, start, starts[i + 1] if i + 1 < len(starts) else None, now, pinned=i > 0)
            for i, start in enumerate(starts)
        ]
        history = []
        if split_points:
            history.append([now, "split", "pre-split", [], [p.id for p in parts], None])
        return cls(table_id, Router(parts), history, len(parts))

    def install(self, parts: list[Partition]) -> None:
        """Make ``parts`` the table's partitions, storing the map before routing by it.

        In this order no write reaches a partition that a crash could forget: its id
        would be handed out again after reopening, and the change records logged
        under it would be lost to the shard's consumers (streams, global indexes)."""
        if self.store is not None:
            self.store(self.encode_map(parts))
        self.router.install(parts)

    def allocate_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def record(self, event: list) -> None:
        self.history.append(event)
        self.recorded += 1
        excess = len(self.history) - HISTORY_LIMIT
        if excess <= 0:
            return
        if self.lineage_window is None:
            del self.history[:excess]
            return
        # Forget the oldest events, but no split or merge within the stream's retention:
        # records of a shard it closed may still be read, parents first.
        since = event[0] - self.lineage_window
        kept = []
        for e in self.history:
            if excess and not (e[1] in ("split", "merge") and e[0] >= since):
                excess -= 1
            else:
                kept.append(e)
        self.history[:] = kept

    # -- records ------------------------------------------------------------------

    def encode_map(self, parts: list[Partition] | None = None) -> bytes:
        """The map record, of ``parts`` (default: the partitions routed to now)."""
        n = len(self.prefix)
        rows = [[p.id, p.start[n:], p.pinned, p.created] for p in parts or self.router.parts]
        return msgpack.packb(
            {"v": FORMAT_VERSION, "next": self.next_id, "parts": rows, "history": self.history},
            use_bin_type=True,
        )

    def encode_samples(self) -> bytes:
        n = len(self.prefix)
        parts = [
            [p.id, p.est_bytes, p.est_rows, [s[n:] for s in p.samples]] for p in self.router.parts
        ]
        return msgpack.packb({"v": FORMAT_VERSION, "parts": parts}, use_bin_type=True)

    @classmethod
    def decode(cls, table_id: int, map_blob: bytes, samples_blob: bytes | None) -> TablePartitions:
        prefix = layout.table_prefix(table_id)
        d = msgpack.unpackb(map_blob, raw=False)
        rows = d["parts"]
        parts = []
        for i, (pid, start, pinned, created) in enumerate(rows):
            end = prefix + rows[i + 1][1] if i + 1 < len(rows) else None
            parts.append(Partition(pid, prefix + start, end, created, pinned))
        if samples_blob is not None:
            by_id = {p.id: p for p in parts}
            for pid, est_bytes, est_rows, keys in msgpack.unpackb(samples_blob, raw=False)["parts"]:
                p = by_id.get(pid)
                if p is not None:
                    p.est_bytes, p.est_rows = est_bytes, est_rows
                    p.samples = [prefix + k for k in keys][:RESERVOIR]
                    p.seen = len(p.samples)
        now = time.time()
        for p in parts:
            p.pass_time = now
        return cls(table_id, Router(parts), [list(e) for e in d["history"]], d["next"])

    # -- reading ------------------------------------------------------------------

    def events(self) -> list[PartitionEvent]:
        return [
            PartitionEvent(t, kind, reason, tuple(a), tuple(b), self.decode_value(key))
            for t, kind, reason, a, b, key in self.history
        ]

    def decode_value(self, rel: bytes | None) -> object:
        """The partition-key value of a relative prefix; None for None or the table start."""
        if not rel:
            return None
        return codec.decode_tuple(rel)[0]

    def value_of(self, key: bytes | None) -> object:
        """The partition-key value of a row-key-form boundary (None: unbounded)."""
        if key is None or len(key) <= len(self.prefix):
            return None
        return codec.decode_tuple(key, len(self.prefix))[0]

    def relative(self, key: bytes | None) -> bytes | None:
        return None if key is None else key[len(self.prefix):]
