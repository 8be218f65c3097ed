"""Result objects: rows, range pages and write results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgspec

_NO_INCREMENTS: Mapping[str, int] = MappingProxyType({})


class Row(msgspec.Struct, eq=False, weakref=False, gc=False):
    """One row as read: its primary key and its attribute columns.

    ``columns`` maps each column to its newest returned value and ``timestamps``
    to that value's version. ``versions(name)`` lists every returned version,
    newest first, as ``(value, timestamp)`` pairs.

    Made as ``Row(primary_key, columns, timestamps, versions=None)``. A
    msgspec Struct: made in C, a third of a plain class's cost, which a range
    read pays once a row. Not tracked by Python's cycle collector (``gc=False``):
    a range read makes thousands at a time, and the collector's passes over them
    took 5-12% of a long scan's time. A row holds plain values only; one put
    into its own ``columns`` would form a cycle that is never freed.
    """

    primary_key: tuple
    columns: dict
    _stamps: Any  # {column: timestamp}, or one int when every column shares it
    _versions: Any = None  # {column: [(ts, value), ...]} when several were asked for

    @property
    def timestamps(self) -> dict[str, int]:
        """``{column: timestamp}`` of each returned newest value."""
        stamps = self._stamps
        if type(stamps) is int:
            return dict.fromkeys(self.columns, stamps)
        return stamps  # type: ignore[return-value]

    def __getitem__(self, name: str) -> object:
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def get(self, name: str, default: object = None) -> object:
        return self.columns.get(name, default)

    def versions(self, name: str) -> list[tuple[object, int]]:
        if self._versions is not None:
            return [(v, t) for t, v in self._versions.get(name, ())]
        if name in self.columns:
            stamps = self._stamps
            return [(self.columns[name], stamps if type(stamps) is int else stamps[name])]
        return []

    @property
    def cells(self) -> list[tuple[str, object, int]]:
        """Every returned cell as ``(column, value, timestamp)``, by column then newest first."""
        out = []
        for name in sorted(self.columns):
            for value, ts in self.versions(name):
                out.append((name, value, ts))
        return out

    def to_dict(self) -> dict:
        return {"primary_key": list(self.primary_key), "columns": dict(self.columns)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return self.primary_key == other.primary_key and self.cells == other.cells

    def __repr__(self) -> str:
        return f"Row({self.primary_key!r}, {self.columns!r})"


@dataclass(slots=True)
class RangeResult:
    """One page of a range read. ``next_start_primary_key`` is None when the range is done."""

    rows: list[Row]
    next_start_primary_key: tuple | None

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


class WriteResult:
    """What a single-row write returns: the row's key and any incremented values."""

    __slots__ = ("increments", "primary_key")

    def __init__(self, primary_key: tuple, increments: Mapping[str, int] = _NO_INCREMENTS) -> None:
        self.primary_key = primary_key
        self.increments = increments

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WriteResult):
            return NotImplemented
        return self.primary_key == other.primary_key and dict(self.increments) == dict(other.increments)

    def __repr__(self) -> str:
        return f"WriteResult({self.primary_key!r}, increments={dict(self.increments)!r})"


@dataclass(slots=True)
class BatchGetResult:
    table: str
    primary_key: tuple
    row: Row | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class BatchWriteResult:
    """The outcome of one row of ``batch_write_row``: its ``result``, or its ``error``."""

    __slots__ = ("_result", "error", "operation", "primary_key", "table")

    def __init__(
        self,
        table: str,
        operation: str,
        primary_key: tuple,
        result: WriteResult | None = None,
        error: Exception | None = None,
    ) -> None:
        self.table = table
        self.operation = operation
        self.primary_key = primary_key
        self._result = result
        self.error = error

    @property
    def result(self) -> WriteResult | None:
        """The row's WriteResult; a written row without one of its own gets a plain one."""
        if self._result is None and self.error is None:
            return WriteResult(self.primary_key)
        return self._result

    @result.setter
    def result(self, value: WriteResult | None) -> None:
        self._result = value

    @property
    def ok(self) -> bool:
        return self.error is None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchWriteResult):
            return NotImplemented
        return (self.table, self.operation, self.primary_key, self.result, self.error) == (
            other.table, other.operation, other.primary_key, other.result, other.error
        )

    def __repr__(self) -> str:
        return (
            f"BatchWriteResult({self.table!r}, {self.operation!r}, {self.primary_key!r}, "
            f"result={self.result!r}, error={self.error!r})"
        )
