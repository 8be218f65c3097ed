"""An in-memory engine on a sorted dict. Nothing survives ``close``; used by tests and tools."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from sortedcontainers import SortedDict


class MemoryBatch:
    __slots__ = ("ops",)

    def __init__(self) -> None:
        self.ops: list[tuple[int, bytes, bytes | None]] = []

    def put(self, key: bytes, value: bytes) -> None:
        self.ops.append((0, bytes(key), bytes(value)))

    def delete(self, key: bytes) -> None:
        self.ops.append((1, bytes(key), None))

    def delete_range(self, start: bytes, end: bytes) -> None:
        self.ops.append((2, bytes(start), bytes(end)))

    def len(self) -> int:
        return len(self.ops)


class MemoryEngine:
    """Same contract as :class:`~widetable.storage.rocks.RocksEngine`, held in memory."""

    path = ":memory:"

    def __init__(self) -> None:
        self._data: SortedDict = SortedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        get = self._data.get
        return [get(k) for k in keys]

    def batch(self) -> MemoryBatch:
        return MemoryBatch()

    def write(self, batch: MemoryBatch) -> None:
        with self._lock:
            data = self._data
            for op, key, value in batch.ops:
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
        with self._lock:  # a snapshot, as RocksDB iterators give
            keys = list(self._data.irange(start, end, inclusive=(True, False), reverse=reverse))
            data = self._data
            items = [(k, data[k]) for k in keys]
        yield from items

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]:
        return (value for _, value in self.scan(start, end))

    def approximate_size(self, start: bytes, end: bytes) -> int:
        return sum(len(k) + len(v) for k, v in self.scan(start, end))

    def compact(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
