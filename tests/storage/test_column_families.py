"""Column families of storage profiles (``Engine.column_family``), on both engines: each is
a keyspace apart from the default one, written through the store's atomic batches."""

from __future__ import annotations

import pytest

from widetable.storage import open_engine, parse_profile, profile_name

ZSTD = profile_name("zstd", block_cache=False, bloom_filter=True)
PLAIN = profile_name()


@pytest.fixture
def engine(engine_name, tmp_path):
    eng = open_engine(str(tmp_path / "e"), engine_name)
    try:
        yield eng
    finally:
        eng.close()


def test_profile_names_round_trip() -> None:
    assert PLAIN == "wt.none.cache.bloom"  # DO NOT CHANGE: names of column families on disk
    assert ZSTD == "wt.zstd.nocache.bloom"
    for c in ("none", "lz4", "zstd"):
        for cache in (True, False):
            for bloom in (True, False):
                assert parse_profile(profile_name(c, cache, bloom)) == (c, cache, bloom)
    for bad in ("default", "wt.snappy.cache.bloom", "wt.zstd.cache", "x.none.cache.bloom"):
        with pytest.raises(ValueError):
            parse_profile(bad)
    with pytest.raises(ValueError):
        profile_name("snappy")


def test_families_are_apart_from_the_default_keyspace(engine) -> None:
    a, b = engine.column_family(ZSTD), engine.column_family(PLAIN)
    assert engine.column_family(ZSTD) is a  # made once
    assert engine.column_families() == sorted([ZSTD, PLAIN])
    batch = engine.batch()
    batch.put(b"k", b"default")
    batch.put(b"k", b"zstd", a.handle)
    batch.put(b"k2", b"zstd2", a.handle)
    batch.put(b"k", b"plain", b.handle)
    engine.write(batch)
    assert engine.get(b"k") == b"default" and a.get(b"k") == b"zstd" and b.get(b"k") == b"plain"
    assert engine.get(b"k2") is None and b.get(b"k2") is None
    assert a.multi_get([b"k2", b"x", b"k"]) == [b"zstd2", None, b"zstd"]
    assert list(a.scan(b"", b"\xff")) == [(b"k", b"zstd"), (b"k2", b"zstd2")]
    assert list(a.scan(b"", b"\xff", reverse=True)) == [(b"k2", b"zstd2"), (b"k", b"zstd")]
    assert list(a.scan(b"k", b"k2", reverse=True)) == [(b"k", b"zstd")]
    assert list(a.values(b"k\x00", b"\xff")) == [b"zstd2"]
    assert list(engine.scan(b"", b"\xff")) == [(b"k", b"default")]
    batch = engine.batch()
    batch.delete(b"k", a.handle)
    batch.delete_range(b"", b"\xff", b.handle)
    engine.write(batch)
    assert a.get(b"k") is None and a.get(b"k2") == b"zstd2" and b.get(b"k") is None
    assert engine.get(b"k") == b"default"


def test_an_unwritten_batch_touches_no_family(engine) -> None:
    a = engine.column_family(ZSTD)
    batch = engine.batch()
    batch.put(b"k", b"v", a.handle)
    batch.put(b"k", b"v")
    assert a.get(b"k") is None and engine.get(b"k") is None


def test_a_name_that_is_no_profile_is_refused(engine) -> None:
    with pytest.raises(ValueError):
        engine.column_family("default")


def test_rocksdb_families_survive_reopen_with_their_options(tmp_path) -> None:
    path = str(tmp_path / "r")
    eng = open_engine(path, "rocksdb")
    fam = eng.column_family(ZSTD)
    lz4 = eng.column_family(profile_name("lz4", True, False))
    batch = eng.batch()
    for i in range(200):
        batch.put(b"k%04d" % i, b"x" * 100, fam.handle)
    batch.put(b"a", b"lz4", lz4.handle)
    eng.write(batch)
    eng.compact()
    eng.close()
    eng = open_engine(path, "rocksdb")  # opens the store with the families it has
    try:
        assert eng.column_families() == sorted([ZSTD, "wt.lz4.cache.nobloom"])
        assert eng.column_family(ZSTD).get(b"k0199") == b"x" * 100
        assert eng.column_family("wt.lz4.cache.nobloom").get(b"a") == b"lz4"
        assert eng.get(b"k0001") is None
    finally:
        eng.close()
    newest = max((tmp_path / "r").glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    text = newest.read_text()
    sections = {s.split('"')[1]: s for s in text.split("[CFOptions ")[1:]}
    tables = {s.split('"')[1]: s for s in text.split("[TableOptions/BlockBasedTable ")[1:]}
    assert "compression=kZSTD" in sections[ZSTD]
    assert "compression=kLZ4Compression" in sections["wt.lz4.cache.nobloom"]
    assert "no_block_cache=true" in tables[ZSTD]
    assert "no_block_cache=false" in tables["wt.lz4.cache.nobloom"]
    assert "filter_policy=bloomfilter" in tables[ZSTD]
    assert "filter_policy=nullptr" in tables["wt.lz4.cache.nobloom"]
