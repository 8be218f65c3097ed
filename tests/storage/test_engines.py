"""The engine contract, checked on both engines: an ordered byte-key store with atomic batches."""

from __future__ import annotations

import threading

import pytest

from widetable.storage import open_engine

KEYS = [b"\x00", b"\x00\x00", b"\x00\xff", b"a", b"a\x00", b"ab", b"b", b"\xff", b"\xff\xff"]


@pytest.fixture
def engine(engine_name, tmp_path):
    eng = open_engine(str(tmp_path / "e"), engine_name)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def filled(engine):
    batch = engine.batch()
    for k in KEYS:
        batch.put(k, b"v" + k)
    engine.write(batch)
    return engine


def scan_keys(engine, start, end, reverse=False) -> list[bytes]:
    return [k for k, _ in engine.scan(start, end, reverse)]


def test_get_missing_is_none(engine) -> None:
    assert engine.get(b"nope") is None
    assert engine.multi_get([]) == []


def test_put_get_overwrite_delete(engine) -> None:
    engine.put(b"k", b"1")
    assert engine.get(b"k") == b"1"
    engine.put(b"k", b"")
    assert engine.get(b"k") == b""
    engine.delete(b"k")
    assert engine.get(b"k") is None
    engine.delete(b"k")  # deleting a missing key is not an error


def test_binary_keys_and_values(engine) -> None:
    value = bytes(range(256)) * 10
    engine.put(b"\x00\xff\x00", value)
    assert engine.get(b"\x00\xff\x00") == value
    assert engine.get(b"\x00\xff") is None


def test_multi_get_keeps_order_and_missing(filled) -> None:
    assert filled.multi_get([b"b", b"zz", b"\x00", b"b"]) == [b"vb", None, b"v\x00", b"vb"]


def test_batch_applies_every_kind_of_write(filled) -> None:
    batch = filled.batch()
    batch.put(b"new", b"1")
    batch.delete(b"b")
    batch.delete_range(b"\x00", b"a")  # half-open: b"a" stays
    batch.put(b"\x00\x00", b"back")  # a later op in the batch wins over the range delete
    filled.write(batch)
    assert scan_keys(filled, b"", b"\xff\xff\xff") == [
        b"\x00\x00", b"a", b"a\x00", b"ab", b"new", b"\xff", b"\xff\xff",
    ]
    assert filled.get(b"\x00\x00") == b"back"


def test_batch_ops_apply_in_order(engine) -> None:
    batch = engine.batch()
    batch.put(b"k", b"1")
    batch.delete(b"k")
    batch.put(b"j", b"1")
    batch.put(b"j", b"2")
    engine.write(batch)
    assert engine.get(b"k") is None and engine.get(b"j") == b"2"


def test_unwritten_batch_changes_nothing(engine) -> None:
    batch = engine.batch()
    batch.put(b"k", b"1")
    assert engine.get(b"k") is None


def test_scan_forward_bounds(filled) -> None:
    assert scan_keys(filled, b"", b"\xff\xff\xff") == KEYS
    assert scan_keys(filled, b"a", b"b") == [b"a", b"a\x00", b"ab"]
    assert scan_keys(filled, b"a\x00", b"ab") == [b"a\x00"]
    assert scan_keys(filled, b"\x00\x01", b"a\x00") == [b"\x00\xff", b"a"]
    assert scan_keys(filled, b"b", b"b") == []
    assert scan_keys(filled, b"zz", b"\xff") == []


def test_scan_backward_bounds(filled) -> None:
    assert scan_keys(filled, b"", b"\xff\xff\xff", True) == KEYS[::-1]
    assert scan_keys(filled, b"a", b"b", True) == [b"ab", b"a\x00", b"a"]
    # The lower bound holds going down: keys below start never appear.
    assert scan_keys(filled, b"a\x00", b"\xff", True) == [b"b", b"ab", b"a\x00"]
    assert scan_keys(filled, b"\x00\x01", b"a\x00", True) == [b"a", b"\x00\xff"]
    assert scan_keys(filled, b"b", b"b", True) == []
    assert scan_keys(filled, b"\x00\x00\x00", b"\x00\xff", True) == []
    # An end between keys, and an end past the last key.
    assert scan_keys(filled, b"a", b"a\x00\x00", True) == [b"a\x00", b"a"]
    assert scan_keys(filled, b"\xff", b"\xff\xff\xff\xff", True) == [b"\xff\xff", b"\xff"]


def test_scan_backward_with_start_below_every_key(filled) -> None:
    assert scan_keys(filled, b"", b"\x00\x00", True) == [b"\x00"]
    assert scan_keys(filled, b"", b"\x00", True) == []


def test_scan_values_match_keys(filled) -> None:
    assert all(v == b"v" + k for k, v in filled.scan(b"", b"\xff\xff\xff"))
    assert all(v == b"v" + k for k, v in filled.scan(b"", b"\xff\xff\xff", True))


def test_scan_is_a_snapshot(filled) -> None:
    it = iter(filled.scan(b"", b"\xff\xff\xff"))
    first = next(it)
    filled.put(b"a\x01", b"late")
    filled.delete(b"ab")
    rest = [k for k, _ in it]
    assert [first[0], *rest] == KEYS
    back = iter(filled.scan(b"", b"\xff\xff\xff", True))
    next(back)
    filled.put(b"\x00\x01", b"late")
    assert b"\x00\x01" not in [k for k, _ in back]


def test_delete_range_is_half_open(filled) -> None:
    batch = filled.batch()
    batch.delete_range(b"\x00\x00", b"ab")
    filled.write(batch)
    assert scan_keys(filled, b"", b"\xff\xff\xff") == [b"\x00", b"ab", b"b", b"\xff", b"\xff\xff"]


def test_approximate_size_grows_with_data(engine) -> None:
    assert engine.approximate_size(b"", b"\xff") == 0
    engine.put(b"k", b"x" * 1000)
    assert engine.approximate_size(b"", b"\xff") >= 1000
    assert engine.approximate_size(b"l", b"\xff") == 0


def test_batch_is_atomic_to_concurrent_scans(engine) -> None:
    """A reader never sees half a batch: every scan finds all keys at one generation."""
    keys = [b"k%03d" % i for i in range(50)]
    stop = threading.Event()
    errors: list[str] = []

    def write() -> None:
        gen = 0
        while not stop.is_set():
            gen += 1
            batch = engine.batch()
            for k in keys:
                batch.put(k, b"%d" % gen)
            engine.write(batch)

    def read() -> None:
        for _ in range(300):
            got = list(engine.scan(b"k", b"l"))
            gens = {v for _, v in got}
            if got and (len(got) != len(keys) or len(gens) != 1):
                errors.append(f"torn scan: {len(got)} keys, generations {sorted(gens)[:5]}")
                return

    writer = threading.Thread(target=write)
    writer.start()
    try:
        readers = [threading.Thread(target=read) for _ in range(2)]
        for r in readers:
            r.start()
        for r in readers:
            r.join()
    finally:
        stop.set()
        writer.join()
    assert errors == []


@pytest.mark.parametrize("engine_name", ["rocksdb"], indirect=True)
def test_rocksdb_survives_reopen(engine_name, tmp_path) -> None:
    path = str(tmp_path / "r")
    eng = open_engine(path, "rocksdb")
    batch = eng.batch()
    batch.put(b"a", b"1")
    batch.put(b"b", b"2")
    eng.write(batch)
    eng.put(b"c", b"3")
    eng.delete(b"b")
    eng.close()
    eng.close()  # idempotent
    again = open_engine(path, "rocksdb", sync=True)
    try:
        assert scan_keys(again, b"", b"\xff") == [b"a", b"c"]
        again.put(b"d", b"4")
        again.flush()
        assert again.get(b"d") == b"4"
    finally:
        again.close()


@pytest.mark.parametrize("engine_name", ["rocksdb"], indirect=True)
def test_rocksdb_second_open_of_same_directory_fails_cleanly(engine_name, tmp_path) -> None:
    from widetable import WidetableError

    path = str(tmp_path / "r")
    eng = open_engine(path, "rocksdb")
    try:
        with pytest.raises(WidetableError) as info:
            open_engine(path, "rocksdb")
        assert path in info.value.message
    finally:
        eng.close()


def test_memory_engine_starts_empty_each_time(tmp_path) -> None:
    a = open_engine(":memory:")
    a.put(b"k", b"1")
    b = open_engine(None, "memory")
    assert b.get(b"k") is None and a.get(b"k") == b"1"


def test_unknown_engine_is_rejected(tmp_path) -> None:
    from widetable import WidetableError

    with pytest.raises(WidetableError) as info:
        open_engine(str(tmp_path), "lmdb")
    assert info.value.code == "OTSParameterInvalid" and "'lmdb'" in info.value.message
    with pytest.raises(WidetableError) as info:
        open_engine("", "rocksdb")
    assert info.value.code == "OTSParameterInvalid"


def test_compact_keeps_every_key(filled) -> None:
    before = list(filled.scan(b"", b"\xff"))
    filled.compact()
    assert list(filled.scan(b"", b"\xff")) == before
    assert list(filled.scan(b"", b"\xff", reverse=True)) == before[::-1]


@pytest.mark.parametrize("cache_mb", [0, 1, 256])
def test_rocksdb_reads_table_files_with_any_block_cache(tmp_path, cache_mb) -> None:
    """Rows flushed and compacted into table files read back through the block cache
    (or none) and the bloom filters; keys that are not there read as missing."""
    eng = open_engine(str(tmp_path / "r"), "rocksdb", cache_mb=cache_mb)
    try:
        for start in range(0, 4000, 500):
            batch = eng.batch()
            for i in range(start, start + 500, 2):  # even keys only
                batch.put(b"k%06d" % i, b"v" * 200 + b"%d" % i)
            eng.write(batch)
            eng.flush()
        eng.compact()
        for i in range(0, 4000, 7):
            expected = b"v" * 200 + b"%d" % i if i % 2 == 0 else None
            assert eng.get(b"k%06d" % i) == expected
        assert eng.multi_get([b"k000002", b"k000003"]) == [b"v" * 200 + b"2", None]
        assert len(scan_keys(eng, b"k", b"l")) == 2000
    finally:
        eng.close()


@pytest.mark.parametrize("bad", [-1, 1.5, "64", True])
def test_a_bad_cache_size_is_named(tmp_path, bad) -> None:
    import widetable
    from widetable import WidetableError

    with pytest.raises(WidetableError) as info:
        widetable.open(str(tmp_path / "r"), cache_mb=bad)
    assert info.value.code == "OTSParameterInvalid" and "cache_mb" in info.value.message
    assert not (tmp_path / "r").exists()  # nothing was created


def test_rocksdb_runs_with_the_documented_options(tmp_path) -> None:
    """The options a store opens with (``rocks_options``) are those RocksDB runs with, as it
    records them in the store's OPTIONS file: 16 KB data blocks, bloom filters in table
    files and over the memtable, two background jobs."""
    from widetable.storage.rocks import BLOCK_SIZE

    eng = open_engine(str(tmp_path / "r"), "rocksdb")
    eng.close()
    newest = max((tmp_path / "r").glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    recorded = {line.strip() for line in newest.read_text().splitlines()}
    assert BLOCK_SIZE == 16 * 1024
    assert {"block_size=16384", "filter_policy=bloomfilter", "whole_key_filtering=true",
            "memtable_whole_key_filtering=true", "memtable_prefix_bloom_size_ratio=0.020000",
            "max_background_jobs=2"} <= recorded
