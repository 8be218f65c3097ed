"""RocksDB's errors reach callers as StorageError (a WidetableError) with a Tablestore code."""

from __future__ import annotations

import glob
import os
import pickle

import pytest

import widetable
from widetable.errors import StorageError, WidetableError
from widetable.storage.rocks import RocksEngine


def _corrupt_store(path: str) -> None:
    """A store of 2000 rows whose largest table file has a zeroed stretch in a data block."""
    db = widetable.open(path, purge_interval=None, cache_mb=0)
    db.create_table("t", [("k", "STRING")])
    for start in range(0, 2000, 200):
        db.batch_write_row([("t", "put", (f"k{i:05d}",), {"v": os.urandom(200)})
                            for i in range(start, start + 200)])
    db._engine.compact()
    db.close()
    sst = max(glob.glob(os.path.join(path, "*.sst")), key=os.path.getsize)
    with open(sst, "r+b") as f:  # a block of rows, past the catalog's at the file's start
        f.seek(os.path.getsize(sst) // 2)
        f.write(b"\x00" * 2000)


def test_a_corrupt_block_is_an_internal_error(tmp_path) -> None:
    path = str(tmp_path / "s")
    _corrupt_store(path)
    db = widetable.open(path, purge_interval=None, cache_mb=0)
    try:
        t = db.table("t")
        errors = []
        for i in range(2000):
            try:
                t.get_row((f"k{i:05d}",))
            except WidetableError as exc:
                errors.append(exc)
        assert 0 < len(errors) < 2000  # the rows of the broken block, and only them
        for err in errors:
            assert isinstance(err, StorageError) and err.kind == "corruption"
            assert err.code == "OTSInternalServerError"
            assert "Corruption" in err.message and "(get)" in err.message
    finally:
        db.close()


def test_a_closed_engine_is_unavailable(tmp_path) -> None:
    engine = RocksEngine(str(tmp_path / "e"))
    engine.put(b"a", b"1")
    engine.close()
    batch = engine.batch()
    batch.put(b"b", b"2")
    calls = [
        lambda: engine.get(b"a"), lambda: engine.multi_get([b"a"]), lambda: engine.put(b"a", b"2"),
        lambda: engine.delete(b"a"), lambda: engine.write(batch),
        lambda: list(engine.scan(b"", b"\xff")), lambda: list(engine.scan(b"", b"\xff", True)),
        lambda: list(engine.values(b"", b"\xff")), engine.flush, engine.compact,
    ]
    for call in calls:
        with pytest.raises(StorageError) as err:
            call()
        assert err.value.kind == "closed" and err.value.code == "OTSServerUnavailable"
        assert "closed" in err.value.message


def test_a_second_open_is_an_io_error(tmp_path) -> None:
    first = RocksEngine(str(tmp_path / "e"))
    try:
        with pytest.raises(StorageError) as err:
            RocksEngine(str(tmp_path / "e"))
        assert err.value.kind == "io" and err.value.code == "OTSInternalServerError"
        assert str(tmp_path / "e") in err.value.message
    finally:
        first.close()


def test_storage_errors_pickle_with_their_kind() -> None:
    err = pickle.loads(pickle.dumps(StorageError("x", kind="busy")))
    assert (err.kind, err.code, err.message) == ("busy", "OTSServerBusy", "x")
