"""The search index's view of the change log: attach as a consumer, read, observe.

This is the seam to the change-log consumer registry: a consumer is named,
makes its table log while attached, holds trimming back to its checkpoint
(``checkpoint(shard)``), and sees TTL purges (PURGE records). Until the
registry lands, :class:`LogSource` registers with the index manager's
``consumers`` table, which ``configure`` and ``trim`` consult.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..stream import log


class LogSource:
    """Change-log access for search indexes, over ``engine`` and the database's IndexManager."""

    def __init__(self, engine, indexes) -> None:
        self.engine = engine
        self.indexes = indexes

    def attach(self, table, name: str, checkpoint: Callable[[int], int]) -> None:
        """Make ``table`` log from now on, and keep its records until ``checkpoint(shard)``
        passes them."""
        tid = table.schema.table_id
        self.indexes.consumers.setdefault(tid, {})[name] = checkpoint
        self.indexes.configure(table)

    def detach(self, table, name: str) -> None:
        tid = table.schema.table_id
        group = self.indexes.consumers.get(tid, {})
        group.pop(name, None)
        if not group:
            self.indexes.consumers.pop(tid, None)
        if not getattr(table, "_unusable", False):
            self.indexes.configure(table)

    def last_seq(self, table) -> int:
        return self.indexes.last_seq(table)

    def shards(self, table) -> list[int]:
        return list(log.shards_with_records(self.engine, table.schema.table_id))

    def read(self, table, shard: int, after: int, limit: int) -> Iterator[tuple[int, tuple, int]]:
        """``(seq, pk, commit ts)`` of up to ``limit`` records of ``shard`` after ``after``."""
        n = 0
        for seq, rec in log.scan_shard(self.engine, table.schema.table_id, shard, after):
            yield seq, log.decode_pk(rec), rec[1]
            n += 1
            if n >= limit:
                return

    def oldest_after(self, table, shard: int, after: int) -> int | None:
        """Commit time of the first record of ``shard`` after ``after`` (None: none)."""
        first = log.first_seq(self.engine, table.schema.table_id, shard, after)
        return None if first is None else first[1]
