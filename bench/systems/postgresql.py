"""PostgreSQL over its unix socket, through psycopg 3, in a private server.

The server is started by :class:`bench.postgres.PostgresInstance` (installed from
Debian if missing) with ``synchronous_commit=off``: see that module for why this
is the durability level comparable to widetable's default. Statements are
prepared on first use (``prepare_threshold=0``) and results are fetched in binary.
Each single-row write is an autocommit transaction; a load batch is one
transaction sent with ``executemany`` (psycopg pipelines it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from ..postgres import PostgresInstance
from .base import Row, System, SystemUnavailable, TableSpec


class PostgresSystem(System):
    name = "postgresql"

    def __init__(self) -> None:
        self._pg: PostgresInstance | None = None
        self._conn: Any = None
        self._cur: Any = None
        self._update_sql: dict[tuple[str, ...], str] = {}

    def start(self, root: Path) -> None:
        self._pg = PostgresInstance()
        self._pg.start()
        try:
            self._conn = self._pg.connect()
        except psycopg.Error as exc:
            self.stop()
            raise SystemUnavailable(f"cannot connect to the PostgreSQL server: {exc}") from exc
        self._cur = self._conn.cursor(binary=True)

    def stop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass  # the server may be gone already; stopping it is what matters
            self._conn = None
        if self._pg is not None:
            self._pg.stop()
            self._pg = None

    def open(self, workdir: Path, spec: TableSpec) -> None:
        self._spec = spec
        key, names = spec.key_column, ", ".join(spec.fields)
        cols = ", ".join(f"{f} BYTEA" for f in spec.fields)
        self._cur.execute(f"DROP TABLE IF EXISTS {spec.name}")
        self._cur.execute(f"CREATE TABLE {spec.name} ({key} TEXT PRIMARY KEY, {cols})")
        marks = ", ".join(["%s"] * (len(spec.fields) + 1))
        excluded = ", ".join(f"{f} = EXCLUDED.{f}" for f in spec.fields)
        self._put_sql = (
            f"INSERT INTO {spec.name} ({key}, {names}) VALUES ({marks}) "
            f"ON CONFLICT ({key}) DO UPDATE SET {excluded}"
        )
        self._read_sql = f"SELECT {names} FROM {spec.name} WHERE {key} = %s"
        self._scan_sql = (
            f"SELECT {key}, {names} FROM {spec.name} WHERE {key} >= %s ORDER BY {key} LIMIT %s"
        )
        self._update_sql = {}

    def close(self) -> None:
        if self._cur is not None and self._conn is not None and not self._conn.closed:
            self._cur.execute(f"DROP TABLE IF EXISTS {self._spec.name}")

    def _row_params(self, key: str, cols: dict[str, bytes]) -> tuple[object, ...]:
        return (key, *(cols.get(f) for f in self._spec.fields))

    def load(self, rows: Sequence[Row]) -> None:
        with self._conn.transaction():
            self._cur.executemany(self._put_sql, [self._row_params(k, c) for k, c in rows])

    def read(self, key: str) -> object | None:
        self._cur.execute(self._read_sql, (key,))
        row: object | None = self._cur.fetchone()
        return row

    def update(self, key: str, values: dict[str, bytes]) -> None:
        names = tuple(values)
        sql = self._update_sql.get(names)
        if sql is None:
            sets = ", ".join(f"{n} = %s" for n in names)
            sql = f"UPDATE {self._spec.name} SET {sets} WHERE {self._spec.key_column} = %s"
            self._update_sql[names] = sql
        self._cur.execute(sql, (*values.values(), key))

    def put(self, key: str, values: dict[str, bytes]) -> None:
        self._cur.execute(self._put_sql, self._row_params(key, values))

    def scan(self, start: str, count: int) -> int:
        self._cur.execute(self._scan_sql, (start, count))
        return len(self._cur.fetchall())

    def server_pid(self) -> int | None:
        return None if self._pg is None else self._pg.postmaster_pid()

    def server_memory_mb(self) -> float | None:
        return None if self._pg is None else self._pg.memory_mb()
