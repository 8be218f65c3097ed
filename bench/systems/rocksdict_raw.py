"""Raw rocksdict: each row one opaque msgpack blob under its key -- the ceiling of our
storage path. It runs with the same RocksDB options (``rocks_options``: block cache,
bloom filters) and write options as widetable's engine
(``src/widetable/storage/rocks.py``: WAL on, no fsync per write), so the
difference measured is widetable's own layer.

An update must read, decode, change and re-encode the blob: that is what one
opaque value per row costs, and it is part of the ceiling being measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack
from rocksdict import Rdict, WriteBatch, WriteOptions

from widetable.storage.rocks import rocks_options

from .base import Row, System, TableSpec


class RocksdictSystem(System):
    name = "rocksdict"

    def __init__(self) -> None:
        self._db: Any = None
        self._path = ""

    def open(self, workdir: Path, spec: TableSpec) -> None:
        self._path = str(workdir / "rocksdict")
        self._db = Rdict(self._path, rocks_options())
        write_opts = WriteOptions()
        write_opts.sync = False
        self._db.set_write_options(write_opts)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db = None

    def load(self, rows: Sequence[Row]) -> None:
        batch = WriteBatch(raw_mode=True)
        packb = msgpack.packb
        for key, cols in rows:
            batch.put(key.encode(), packb(cols))
        self._db.write(batch)

    def read(self, key: str) -> object | None:
        blob = self._db.get(key.encode())
        return None if blob is None else msgpack.unpackb(blob)

    def update(self, key: str, values: dict[str, bytes]) -> None:
        k = key.encode()
        blob = self._db.get(k)
        cols = {} if blob is None else msgpack.unpackb(blob)
        cols.update(values)
        self._db.put(k, msgpack.packb(cols))

    def put(self, key: str, values: dict[str, bytes]) -> None:
        self._db.put(key.encode(), msgpack.packb(values))

    def scan(self, start: str, count: int) -> int:
        it = self._db.iter()
        it.seek(start.encode())
        unpackb, n = msgpack.unpackb, 0
        while n < count and it.valid():
            unpackb(it.value())
            n += 1
            it.next()
        return n
