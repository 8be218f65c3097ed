"""widetable embedded: the library in this process, on its persistent RocksDB engine.

Default durability (``sync=False``): an acknowledged write is in RocksDB's WAL in
the OS page cache, so it survives ``kill -9`` of the process but not a power cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import Row, System, SystemUnavailable, TableSpec


class WidetableSystem(System):
    name = "widetable"

    def __init__(self) -> None:
        self._wt: Any = None
        self._db: Any = None
        self._table: Any = None
        self._name = ""
        self._end: tuple[Any, ...] = ()

    def start(self, root: Path) -> None:
        try:
            import widetable
        except ImportError as exc:
            raise SystemUnavailable(f"cannot import widetable: {exc}") from exc
        if not hasattr(widetable, "open"):
            raise SystemUnavailable("not available yet: widetable.open does not exist")
        self._wt = widetable

    def open(self, workdir: Path, spec: TableSpec) -> None:
        self._db = self._wt.open(str(workdir / "widetable"))
        self._db.create_table(spec.name, primary_key=[(spec.key_column, "STRING")], max_versions=1)
        self._table = self._db.table(spec.name)
        self._name = spec.name
        self._end = (self._wt.INF_MAX,)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db = self._table = None

    def load(self, rows: Sequence[Row]) -> None:
        name = self._name
        results = self._db.batch_write_row([(name, "put", (key,), cols) for key, cols in rows])
        for result in results:
            if not result.ok:
                raise RuntimeError(f"widetable batch_write_row failed: {result.error}")

    def read(self, key: str) -> object | None:
        return self._table.get_row((key,))

    def update(self, key: str, values: dict[str, bytes]) -> None:
        self._table.update_row((key,), put=values)

    def put(self, key: str, values: dict[str, bytes]) -> None:
        self._table.put_row((key,), values)

    def scan(self, start: str, count: int) -> int:
        return len(self._table.get_range((start,), self._end, limit=count).rows)
