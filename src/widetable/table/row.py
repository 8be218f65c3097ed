"""Result objects: rows, range pages and write results."""

from __future__ import annotations

from dataclasses import dataclass, field


class Row:
    """One row as read: its primary key and its attribute columns.

    ``columns`` maps each column to its newest returned value and ``timestamps``
    to that value's version. ``versions(name)`` lists every returned version,
    newest first, as ``(value, timestamp)`` pairs.
    """

    __slots__ = ("primary_key", "columns", "timestamps", "_versions")

    def __init__(
        self,
        primary_key: tuple,
        columns: dict,
        timestamps: dict,
        versions: dict | None = None,
    ) -> None:
        self.primary_key = primary_key
        self.columns = columns
        self.timestamps = timestamps
        self._versions = versions

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
            return [(self.columns[name], self.timestamps[name])]
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


@dataclass(slots=True)
class WriteResult:
    """What a single-row write returns: the row's key and any incremented values."""

    primary_key: tuple
    increments: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class BatchGetResult:
    table: str
    primary_key: tuple
    row: Row | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class BatchWriteResult:
    table: str
    operation: str
    primary_key: tuple
    result: WriteResult | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
