"""The storage engine interface: an ordered byte-key store with atomic batches.

Everything above ``storage`` sees only this interface, so the RocksDB adapter
and the in-memory engine are interchangeable. Keys and values are ``bytes``;
ranges are half-open ``[start, end)``.

Column families. Besides its default keyspace, a store holds one column family per
*storage profile* in use: a compression (none, lz4, zstd), a block cache or none, a
bloom filter or none (``profile_name``). ``Engine.column_family(profile)`` returns it,
creating it on first use (RocksDB: a real column family with those options, kept in
the store; memory: a second sorted dict). A family reads like the engine (``get``,
``multi_get``, ``scan``, ``values``); writes to it go through the engine's batches,
``batch.put(key, value, family.handle)``, so one batch stays atomic across the default
keyspace and every family. A handle of ``None`` is the default keyspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


COMPRESSIONS = ("none", "lz4", "zstd")
_PROFILE_PREFIX = "wt"


def profile_name(compression: str = "none", block_cache: bool = True, bloom_filter: bool = True) -> str:
    """The name of a storage profile's column family, e.g. ``wt.zstd.cache.bloom``.

    DO NOT CHANGE: embedded in on-disk data (RocksDB's column family names)."""
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression {compression!r} is not one of {COMPRESSIONS}")
    return ".".join((_PROFILE_PREFIX, compression, "cache" if block_cache else "nocache",
                     "bloom" if bloom_filter else "nobloom"))


def parse_profile(name: str) -> tuple[str, bool, bool]:
    """``(compression, block_cache, bloom_filter)`` of a profile name; ValueError if it is none."""
    parts = name.split(".")
    if (len(parts) != 4 or parts[0] != _PROFILE_PREFIX or parts[1] not in COMPRESSIONS
            or parts[2] not in ("cache", "nocache") or parts[3] not in ("bloom", "nobloom")):
        raise ValueError(f"{name!r} is not a storage profile name")
    return parts[1], parts[2] == "cache", parts[3] == "bloom"


class Batch(Protocol):
    """A group of writes that an engine applies atomically, all or nothing.
    ``cf`` is a column family's ``handle`` (None: the default keyspace)."""

    def put(self, key: bytes, value: bytes, cf: object = None) -> None: ...

    def delete(self, key: bytes, cf: object = None) -> None: ...

    def delete_range(self, start: bytes, end: bytes, cf: object = None) -> None: ...


class Family(Protocol):
    """One column family: the reads of an engine, over that family's keys."""

    name: str
    handle: object  # what a batch takes as ``cf``

    def get(self, key: bytes) -> bytes | None: ...

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]: ...

    def scan(
        self, start: bytes, end: bytes, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]: ...

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]: ...


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
    * ``column_family(profile)`` is the family of that storage profile, made on first
      use and kept across reopening; ``column_families()`` names the ones that exist.
      The default keyspace is no profile's family: only its own options apply to it.
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

    def column_family(self, profile: str) -> Family: ...

    def column_families(self) -> list[str]: ...

    def compact(self) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
