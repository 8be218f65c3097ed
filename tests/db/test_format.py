"""The store format version: written at creation, checked at open, older stores migrated."""

from __future__ import annotations

import pytest

import widetable
from widetable import WidetableError
from widetable.db import format as store_format
from widetable.keys import layout


def test_a_new_store_records_the_current_format_version(tmp_path) -> None:
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        assert db._engine.get(layout.FORMAT_VERSION_KEY) == (3).to_bytes(4, "big")
        assert store_format.stored_version(db._engine) == store_format.FORMAT_VERSION == 3
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
        assert store_format.stored_version(db._engine) == store_format.FORMAT_VERSION
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
        db._engine.put(layout.FORMAT_VERSION_KEY, (4).to_bytes(4, "big"))
    for _ in range(2):  # refused each time: the engine was closed, and nothing was written
        with pytest.raises(WidetableError, match=r"format version 4, newer than 3") as err:
            widetable.open(str(tmp_path), purge_interval=None)
        assert err.value.code == "OTSNotSupported"
        assert str(tmp_path) in err.value.message
    from widetable.storage import open_engine
    engine = open_engine(str(tmp_path), "rocksdb", False, None)
    try:
        assert engine.get(layout.FORMAT_VERSION_KEY) == (4).to_bytes(4, "big")
    finally:
        engine.close()


def _format1_store(tmp_path):
    """A store written by the release before column families (format 1), as it left it:
    made with that release's code and kept as a tarball (tests/db/data)."""
    import tarfile
    from pathlib import Path

    with tarfile.open(Path(__file__).parent / "data" / "format1_store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return str(tmp_path / "store")


def test_a_format_1_store_is_upgraded_to_families_and_serves(tmp_path) -> None:
    """migrate_1_to_2: every catalog entry records its families (the default one alone);
    the rows stay where they were (0x10, the default keyspace) and read as before."""
    import json

    from widetable.storage import open_engine

    path = _format1_store(tmp_path)
    engine = open_engine(path, "rocksdb", False, None)
    try:
        assert store_format.stored_version(engine) == 1
        before = {k: json.loads(v) for k, v in engine.scan(*layout.catalog_range())}
        assert before and all("families" not in s for s in before.values())
        rows_before = list(engine.scan(b"\x10", b"\x11"))
        assert engine.column_families() == []
    finally:
        engine.close()
    assert store_format.MIGRATIONS[1].__name__ == "migrate_1_to_2"
    with widetable.open(path, purge_interval=None) as db:
        assert store_format.stored_version(db._engine) == store_format.FORMAT_VERSION
        after = {k: json.loads(v) for k, v in db._engine.scan(*layout.catalog_range())}
        assert set(after) == set(before)
        for key, schema in after.items():
            assert schema["families"] == [{"name": "default", "id": 0}]
            assert {k: v for k, v in schema.items() if k != "families"} == before[key]
        assert list(db._engine.scan(b"\x10", b"\x11")) == rows_before  # no row moved
        users = db.table("users")
        assert users.get_row(("u01", 1))["name"] == "renamed"
        assert users.get_row(("u02", 2), max_versions=3).versions("score") == [(20, users.get_row(("u02", 2)).timestamps["score"])]
        assert [r.primary_key[1] for r in users.scan()] == list(range(20))
        assert [p.start for p in db.describe_table("users").partitions] == [None, "m"]
        assert db.table("events").get_row((b"\x00\x01",))["ok"] is True
        assert [r.operation for r in db.get_stream_record(
            db.get_shard_iterator(db.list_stream("events")[0].stream_id, 0)).records] == ["PUT"]
        users.put_row(("u99", 99), {"name": "after"})
        db.bigtable.create_table("bt", [])  # the new model works on an upgraded store
    with widetable.open(path, purge_interval=None) as db:
        assert db.table("users").get_row(("u99", 99))["name"] == "after"
        assert db.bigtable.list_tables() == ["bt"]
