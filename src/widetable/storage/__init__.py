"""Storage: the engine interface and its two engines, RocksDB (default) and memory."""

from __future__ import annotations

from .engine import COMPRESSIONS, Batch, Engine, Family, parse_profile, profile_name
from .memory import MemoryEngine

DEFAULT_CACHE_MB = 256  # RocksDB's block cache (``rocks.rocks_options``), filled as data is read


def open_engine(path: str | None, engine: str = "rocksdb", sync: bool = False,
                cache_mb: int | None = None) -> Engine:
    """Open the engine named ``engine`` ("rocksdb" or "memory") at ``path``; ``cache_mb``:
    RocksDB's block cache in MB (None: its default, 256)."""
    from ..errors import ParameterInvalid, describe

    if cache_mb is not None and (type(cache_mb) is not int or cache_mb < 0):
        raise ParameterInvalid(f"cache_mb must be an int >= 0 (megabytes), got {describe(cache_mb)}")
    if engine not in ("rocksdb", "memory"):
        raise ParameterInvalid(f"unknown engine {engine!r}; use 'rocksdb' or 'memory'")
    if engine == "memory" or path == ":memory:":
        return MemoryEngine()
    if not path:
        raise ParameterInvalid("a RocksDB store needs a directory path")
    from .rocks import RocksEngine

    return RocksEngine(path, sync=sync, cache_mb=DEFAULT_CACHE_MB if cache_mb is None else cache_mb)


__all__ = ["COMPRESSIONS", "DEFAULT_CACHE_MB", "Batch", "Engine", "Family", "MemoryEngine",
           "open_engine", "parse_profile", "profile_name"]
