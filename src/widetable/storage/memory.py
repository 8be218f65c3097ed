"""An in-memory engine on sorted dicts. Nothing survives ``close``; used by tests and tools.

Column families (``Engine.column_family``) are further sorted dicts, one per storage
profile; the profile's options (compression, cache, bloom) have no meaning in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from sortedcontainers import SortedDict

from .engine import parse_profile


class MemoryBatch:
    __slots__ = ("ops",)

    def __init__(self) -> None:
        self.ops: list[tuple] = []

    def put(self, key: bytes, value: bytes, cf: object = None) -> None:
        self.ops.append((0, bytes(key), bytes(value), cf))

    def delete(self, key: bytes, cf: object = None) -> None:
        self.ops.append((1, bytes(key), None, cf))

    def delete_range(self, start: bytes, end: bytes, cf: object = None) -> None:
        self.ops.append((2, bytes(start), bytes(end), cf))

    def len(self) -> int:
        return len(self.ops)


def _scan(lock: threading.Lock, data: SortedDict, start: bytes, end: bytes,
          reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    with lock:  # a snapshot, as RocksDB iterators give
        keys = list(data.irange(start, end, inclusive=(True, False), reverse=reverse))
        items = [(k, data[k]) for k in keys]
    yield from items


class MemoryFamily:
    """A column family held in memory; ``handle`` is its name."""

    def __init__(self, name: str, lock: threading.Lock) -> None:
        self.name = self.handle = name
        self.data: SortedDict = SortedDict()
        self._lock = lock

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        get = self.data.get
        return [get(k) for k in keys]

    def scan(self, start: bytes, end: bytes, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return _scan(self._lock, self.data, start, end, reverse)

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]:
        return (value for _, value in self.scan(start, end))


class MemoryEngine:
    """Same contract as :class:`~widetable.storage.rocks.RocksEngine`, held in memory."""

    path = ":memory:"

    def __init__(self) -> None:
        self._data: SortedDict = SortedDict()
        self._lock = threading.Lock()
        self._families: dict[str, MemoryFamily] = {}

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        get = self._data.get
        return [get(k) for k in keys]

    def batch(self) -> MemoryBatch:
        return MemoryBatch()

    def write(self, batch: MemoryBatch) -> None:
        with self._lock:
            for op, key, value, cf in batch.ops:
                data = self._data if cf is None else self._families[cf].data
                if op == 0:
                    data[key] = value
                elif op == 1:
                    data.pop(key, None)
                else:
                    for k in list(data.irange(key, value, inclusive=(True, False))):
                        del data[k]

    def put(self, key: bytes, value: bytes) -> None:
        with self._lock:
            self._data[bytes(key)] = bytes(value)

    def delete(self, key: bytes) -> None:
        with self._lock:
            self._data.pop(key, None)

    def scan(
        self, start: bytes, end: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return _scan(self._lock, self._data, start, end, reverse)

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]:
        return (value for _, value in self.scan(start, end))

    def approximate_size(self, start: bytes, end: bytes) -> int:
        return sum(len(k) + len(v) for k, v in self.scan(start, end))

    def column_family(self, profile: str) -> MemoryFamily:
        family = self._families.get(profile)
        if family is None:
            parse_profile(profile)
            with self._lock:
                family = self._families.setdefault(profile, MemoryFamily(profile, self._lock))
        return family

    def column_families(self) -> list[str]:
        return sorted(self._families)

    def cache_stats(self) -> dict[str, int]:
        return {}

    def compact(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
