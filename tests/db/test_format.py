"""The store format version: written at creation, checked at open, older stores migrated."""

from __future__ import annotations

import pytest

import widetable
from widetable import WidetableError
from widetable.db import format as store_format
from widetable.keys import layout


def test_a_new_store_records_the_current_format_version(tmp_path) -> None:
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        assert db._engine.get(layout.FORMAT_VERSION_KEY) == (1).to_bytes(4, "big")
        assert store_format.stored_version(db._engine) == store_format.FORMAT_VERSION == 1
    with widetable.open(":memory:", engine="memory") as db:
        assert store_format.stored_version(db._engine) == store_format.FORMAT_VERSION


def test_a_store_without_a_version_is_migrated_from_version_0(tmp_path) -> None:
    """Stores made before the version key existed (every store of earlier releases) hold
    no 0x00 key: opening one runs migrate_0_to_1, which keeps the data as it was."""
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("t", [("k", "STRING")], stream=True)
        db.table("t").put_row(("a",), {"x": 1})
        db._engine.delete(layout.FORMAT_VERSION_KEY)  # the store as an earlier release left it
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        assert store_format.stored_version(db._engine) == 1
        assert db.table("t").get_row(("a",))["x"] == 1
        assert [r.operation for r in db.get_stream_record(
            db.get_shard_iterator(db.list_stream("t")[0].stream_id, 0)).records] == ["PUT"]


def test_the_migration_step_is_named_and_runs_once(tmp_path) -> None:
    steps: list[int] = []
    real = store_format.MIGRATIONS[0]
    assert real.__name__ == "migrate_0_to_1"

    def counting(engine, batch) -> None:
        steps.append(0)
        real(engine, batch)

    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("t", [("k", "STRING")])
        db._engine.delete(layout.FORMAT_VERSION_KEY)
    store_format.MIGRATIONS[0] = counting
    try:
        widetable.open(str(tmp_path), purge_interval=None).close()
        widetable.open(str(tmp_path), purge_interval=None).close()
    finally:
        store_format.MIGRATIONS[0] = real
    assert steps == [0]


def test_a_store_of_a_newer_version_is_refused_untouched(tmp_path) -> None:
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("t", [("k", "STRING")])
        db._engine.put(layout.FORMAT_VERSION_KEY, (2).to_bytes(4, "big"))
    for _ in range(2):  # refused each time: the engine was closed, and nothing was written
        with pytest.raises(WidetableError, match=r"format version 2, newer than 1") as err:
            widetable.open(str(tmp_path), purge_interval=None)
        assert err.value.code == "OTSNotSupported"
        assert str(tmp_path) in err.value.message
    from widetable.storage import open_engine
    engine = open_engine(str(tmp_path), "rocksdb", False, None)
    try:
        assert engine.get(layout.FORMAT_VERSION_KEY) == (2).to_bytes(4, "big")
    finally:
        engine.close()
