"""The contract every benchmarked system implements, so the driver is system-agnostic."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


class SystemUnavailable(Exception):
    """The system cannot run on this machine; the message says why, in plain words."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table of string keys and byte-string fields, e.g. YCSB's ``usertable``."""

    name: str
    key_column: str
    fields: tuple[str, ...]


Row = tuple[str, dict[str, bytes]]


class System(ABC):
    """One system under test, driven from this process.

    Lifecycle: ``start(root)`` once per run (may raise :class:`SystemUnavailable`),
    then any number of ``open(workdir, spec)`` / ``close()`` pairs, one per data set,
    then ``stop()`` -- which the driver calls even after an error or Ctrl-C.
    Writes are single-row and acknowledged before the call returns, except
    :meth:`load`, which writes one batch atomically-or-not as the system allows.
    """

    name: ClassVar[str]

    def start(self, root: Path) -> None:
        """Acquire process-wide resources (a server, a connection). Default: nothing."""

    def stop(self) -> None:
        """Release what :meth:`start` acquired. Must be safe to call twice."""

    @abstractmethod
    def open(self, workdir: Path, spec: TableSpec) -> None:
        """Create an empty table for ``spec`` in a fresh ``workdir`` and open it."""

    @abstractmethod
    def close(self) -> None:
        """Close the table opened by :meth:`open`; its data may be discarded."""

    @abstractmethod
    def load(self, rows: Sequence[Row]) -> None:
        """Write a batch of whole rows (up to 200) in one batch/transaction."""

    @abstractmethod
    def read(self, key: str) -> object | None:
        """Read every field of one row; ``None`` if the row does not exist."""

    @abstractmethod
    def update(self, key: str, values: dict[str, bytes]) -> None:
        """Overwrite some fields of an existing row."""

    @abstractmethod
    def put(self, key: str, values: dict[str, bytes]) -> None:
        """Insert or overwrite a whole row."""

    @abstractmethod
    def scan(self, start: str, count: int) -> int:
        """Read up to ``count`` rows in key order from ``start`` inclusive; return rows read."""

    def rmw(self, key: str, values: dict[str, bytes]) -> None:
        """YCSB read-modify-write: read the row, then update it."""
        self.read(key)
        self.update(key, values)

    def server_memory_mb(self) -> float | None:
        """Memory held outside this process (a server's processes), if any and known."""

    def server_pid(self) -> int | None:
        """The process whose tree (it and its children) serves this system outside this
        process, for its CPU time; None for a system in this process."""
        return None
