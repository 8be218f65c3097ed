"""The storage engine interface: an ordered byte-key store with atomic batches.

Everything above ``storage`` sees only this interface, so the RocksDB adapter
and the in-memory engine are interchangeable. Keys and values are ``bytes``;
ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class Batch(Protocol):
    """A group of writes that an engine applies atomically, all or nothing."""

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def delete_range(self, start: bytes, end: bytes) -> None: ...


class Engine(Protocol):
    """An ordered key-value store.

    Contract:
    * ``write`` applies a batch atomically; once it returns, the batch survives a
      crash of the process (and, with ``sync=True`` at open, of the machine).
    * ``get`` of a missing key returns ``None``. It is not an error.
    * ``scan`` yields ``(key, value)`` pairs in byte order (or reverse order) within
      ``[start, end)``; it sees a consistent snapshot taken when it starts.
    * ``values`` yields the values alone of a forward ``scan``: a page of stored rows
      that has no use for their keys skips making them.
    """

    def get(self, key: bytes) -> bytes | None: ...

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]: ...

    def batch(self) -> Batch: ...

    def write(self, batch: Batch) -> None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def scan(
        self, start: bytes, end: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]: ...

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]: ...

    def approximate_size(self, start: bytes, end: bytes) -> int: ...

    def compact(self) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
