"""SQLite: a ``WITHOUT ROWID`` table clustered on the same primary key.

Durability is matched to widetable's default: ``journal_mode=WAL`` with
``synchronous=NORMAL`` syncs the WAL only at checkpoints, so a committed
transaction survives ``kill -9`` of the process (it is in the WAL in the OS page
cache) but may be lost on power failure -- the same promise as widetable with
``sync=False``. Each single-row write is its own autocommit transaction; a load
batch is one transaction. The page cache is 256 MiB, the size of widetable's
block cache (``widetable.storage.DEFAULT_CACHE_MB``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from widetable.storage import DEFAULT_CACHE_MB

from .base import Row, System, TableSpec

CACHE_KIB = DEFAULT_CACHE_MB * 1024


class SqliteSystem(System):
    name = "sqlite"

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._update_sql: dict[tuple[str, ...], str] = {}

    def open(self, workdir: Path, spec: TableSpec) -> None:
        conn = sqlite3.connect(str(workdir / "sqlite.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        cols = ", ".join(f"{f} BLOB" for f in spec.fields)
        conn.execute(
            f"CREATE TABLE {spec.name} ({spec.key_column} TEXT PRIMARY KEY, {cols}) WITHOUT ROWID"
        )
        self._conn = conn
        self._spec = spec
        names = ", ".join(spec.fields)
        marks = ", ".join("?" * (len(spec.fields) + 1))
        self._insert_sql = (
            f"INSERT OR REPLACE INTO {spec.name} ({spec.key_column}, {names}) VALUES ({marks})"
        )
        self._read_sql = f"SELECT {names} FROM {spec.name} WHERE {spec.key_column} = ?"
        self._scan_sql = (
            f"SELECT {spec.key_column}, {names} FROM {spec.name} "
            f"WHERE {spec.key_column} >= ? ORDER BY {spec.key_column} LIMIT ?"
        )
        self._update_sql = {}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def _row_params(self, key: str, cols: dict[str, bytes]) -> tuple[object, ...]:
        return (key, *(cols.get(f) for f in self._spec.fields))

    def load(self, rows: Sequence[Row]) -> None:
        assert self._conn is not None
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.executemany(self._insert_sql, [self._row_params(k, c) for k, c in rows])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def read(self, key: str) -> object | None:
        assert self._conn is not None
        row: object | None = self._conn.execute(self._read_sql, (key,)).fetchone()
        return row

    def update(self, key: str, values: dict[str, bytes]) -> None:
        assert self._conn is not None
        names = tuple(values)
        sql = self._update_sql.get(names)
        if sql is None:
            sets = ", ".join(f"{n} = ?" for n in names)
            sql = f"UPDATE {self._spec.name} SET {sets} WHERE {self._spec.key_column} = ?"
            self._update_sql[names] = sql
        self._conn.execute(sql, (*values.values(), key))

    def put(self, key: str, values: dict[str, bytes]) -> None:
        assert self._conn is not None
        self._conn.execute(self._insert_sql, self._row_params(key, values))

    def scan(self, start: str, count: int) -> int:
        assert self._conn is not None
        return len(self._conn.execute(self._scan_sql, (start, count)).fetchall())
