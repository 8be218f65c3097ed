"""The search index's view of the change log: attach as a consumer, read, observe.

A search index is a consumer in the store's change-log registry
(``stream/consumers.py``, ``StoreContext.changelog``): named, it makes its
table log while attached, holds trimming back to its checkpoint
(``checkpoint(shard)``, kept in the index's own files), and sees TTL purges
(PURGE records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..stream import log


class LogSource:
    """Change-log access for search indexes, over the store's consumer registry."""

    def __init__(self, changelog) -> None:
        self.changelog = changelog
        self.engine = changelog.engine

    def attach(self, table, name: str, checkpoint: Callable[[int], int]) -> None:
        """Make ``table`` log from now on, and keep its records until ``checkpoint(shard)``
        passes them."""
        self.changelog.attach(name, table, None, -1, position=checkpoint)  # replaces one
        self.changelog.configure(table)

    def detach(self, table, name: str) -> None:
        self.changelog.unregister(name)

    def last_seq(self, table) -> int:
        return self.changelog.last_seq(table)

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
