"""Shared fixtures: every behaviour test runs on both engines, as tinydb runs on every storage.

``db`` is a fresh store on RocksDB (in ``tmp_path``) or in memory, closed after the
test. ``table`` makes tables on it with short calls. The background purger is
off so tests decide when physical garbage collection happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import widetable
from widetable import Database, Table
from widetable.cli import app
from widetable.keys import layout
from widetable.table.values import now_ms

ENGINES = ["rocksdb", "memory"]


def open_store(path, engine: str, **kwargs) -> Database:
    """Open a store the way the tests do: no background purge unless asked."""
    kwargs.setdefault("purge_interval", None)
    if engine == "memory":
        return widetable.open(":memory:", engine="memory", **kwargs)
    return widetable.open(str(path), engine="rocksdb", **kwargs)


@pytest.fixture(params=ENGINES)
def engine_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def open_db(engine_name: str, tmp_path) -> Iterator[Callable[..., Database]]:
    """``open_db(name="store", **kwargs)`` opens a store of this test's engine; closed after."""
    opened: list[Database] = []

    def make(name: str = "store", **kwargs) -> Database:
        store = open_store(tmp_path / name, engine_name, **kwargs)
        opened.append(store)
        return store

    try:
        yield make
    finally:
        for store in opened:
            store.close()


@pytest.fixture
def db(open_db) -> Database:
    return open_db()


@pytest.fixture
def table(db: Database) -> Callable[..., Table]:
    """``table()`` makes a table; defaults to pk ``(k STRING)``.

    ``table("t", pk=[("a", "STRING"), ("b", "INTEGER")], max_versions=3, ttl=...)``.
    """
    counter = iter(range(1_000_000))

    def make(name: str | None = None, pk: list | None = None, **options) -> Table:
        name = name or f"t{next(counter)}"
        return db.create_table(name, pk or [("k", "STRING")], **options)

    return make


@pytest.fixture
def now() -> int:
    """Milliseconds at the start of the test; explicit timestamps are near it."""
    return now_ms()


@pytest.fixture
def physical_rows(db: Database) -> Callable[[str], int]:
    """``physical_rows(name)``: rows the engine holds for a table, expired ones included."""

    def count(name: str) -> int:
        start, end = layout.table_range(db.table(name).schema.table_id)
        return sum(1 for _ in db._engine.scan(start, end))

    return count


# -- the command line: shared by tests/cli and tests/design -------------------------


class Cli:
    """Run ``widetable --data <dir> ARGS`` in-process and check the exit code."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0, input: str | None = None, **kw) -> Result:
        result = self.runner.invoke(app, ["--data", str(self.data), *args], input=input, **kw)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        assert "Traceback" not in result.output
        return result

    def open(self) -> widetable.Database:
        """The store the CLI wrote, opened by the library (close it before the next command)."""
        return widetable.open(str(self.data), purge_interval=None)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data")
