"""Storage: the engine interface and its two engines, RocksDB (default) and memory."""

from __future__ import annotations

from .engine import Batch, Engine
from .memory import MemoryEngine


def open_engine(path: str | None, engine: str = "rocksdb", sync: bool = False) -> Engine:
    """Open the engine named ``engine`` ("rocksdb" or "memory") at ``path``."""
    from ..errors import ParameterInvalid

    if engine not in ("rocksdb", "memory"):
        raise ParameterInvalid(f"unknown engine {engine!r}; use 'rocksdb' or 'memory'")
    if engine == "memory" or path == ":memory:":
        return MemoryEngine()
    if not path:
        raise ParameterInvalid("a RocksDB store needs a directory path")
    from .rocks import RocksEngine

    return RocksEngine(path, sync=sync)


__all__ = ["Batch", "Engine", "MemoryEngine", "open_engine"]
