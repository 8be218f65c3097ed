"""The global-index applier: following the feed's in-memory tail, falling back to the log,
images against reads, and the tail's bounds. The applier thread is stopped in these tests
and ``run_once`` is driven by hand, so each step is deterministic."""

from __future__ import annotations

import random

import pytest

from widetable.index import global_
from widetable.stream import feed as feed_module

from .test_index_workloads import DEFINED, PK, random_op


@pytest.fixture
def manual(db):
    """A table ``t`` with a global index ``glob`` whose applier runs only when called."""
    db.create_table("t", PK, defined_columns=DEFINED)
    db.create_index("t", "glob", primary_key=["c"], defined_columns=["n"])
    indexer = db._indexer
    indexer.stop()
    indexer.run_once()  # caught up with the empty log: from here on the tail serves it
    return db, db.table("t"), indexer, indexer.indexes[next(iter(indexer.indexes))]


def drain(indexer) -> int:
    total = 0
    while n := indexer.run_once():
        total += n
    return total


def index_values(db) -> list[tuple]:
    return [tuple(r.primary_key) for r in db.table("glob").scan()]


def test_applier_reads_the_tail_and_converges(manual):
    db, t, indexer, gi = manual
    rng = random.Random(5)
    for _ in range(300):
        random_op(db, t, rng)
    pending = gi.feed.seq - gi.seen_seq
    assert len(gi.feed.tail) == pending and gi.seen_seq == gi.feed.tail_from  # all in memory
    assert drain(indexer) == pending
    assert gi.seen_seq == gi.checkpoint(0) == gi.feed.seq
    assert db.verify_index("t", "glob").ok


def test_an_overflowing_tail_sends_the_applier_back_to_the_log(manual, monkeypatch):
    db, t, indexer, gi = manual
    monkeypatch.setattr(feed_module, "TAIL_BYTES", 2_000)  # about ten records
    rng = random.Random(6)
    for _ in range(200):
        random_op(db, t, rng)
    assert gi.seen_seq < gi.feed.tail_from  # records were dropped from the tail
    drain(indexer)
    assert gi.seen_seq == gi.feed.seq
    assert db.verify_index("t", "glob").ok
    assert db.describe_table("t").indexes[0].lag_ms == 0


def test_rows_without_an_image_are_read(manual, monkeypatch):
    db, t, indexer, gi = manual
    monkeypatch.setattr(feed_module, "IMAGE_MAX", 0)  # no row image is kept
    rng = random.Random(7)
    for _ in range(200):
        random_op(db, t, rng)
    assert all(item[3] in (feed_module.NO_IMAGE, None) for item in gi.feed.tail)
    drain(indexer)
    assert db.verify_index("t", "glob").ok


def test_entries_never_go_back_to_an_older_image(manual, monkeypatch):
    db, t, indexer, gi = manual
    monkeypatch.setattr(global_, "GROUP", 1)  # one record per step
    t.put_row(("a", 1), {"c": "old"})
    t.put_row(("a", 1), {"c": "new"})
    # A sync (as backfill does) reads the row as it is now, ahead of both records.
    batch = db._engine.batch()
    with gi.lock:
        indexer.sync(gi, [t._key(("a", 1))[1]], batch)
    db._engine.write(batch)
    assert index_values(db) == [("new", "a", 1)]
    while indexer.run_once():
        assert index_values(db) == [("new", "a", 1)]  # the "old" image is not applied
    assert db.verify_index("t", "glob").ok


def test_the_tail_is_trimmed_once_every_index_applied_it(db, monkeypatch):
    monkeypatch.setattr(global_, "TAIL_TRIM", 10)
    db.create_table("t", PK, defined_columns=DEFINED)
    db.create_index("t", "g1", primary_key=["c"])
    db.create_index("t", "g2", primary_key=["n"])
    t = db.table("t")
    for i in range(100):
        t.put_row(("k", i), {"c": f"c{i % 3}", "n": i})
    assert db.wait_for_indexes(30)
    feed = t._changes
    db._indexer.run_once()
    assert len(feed.tail) <= 10 and feed.tail_from >= 90
    assert feed.tail_bytes == feed_module._size(feed.tail)
    assert db.verify_index("t", "g1").ok and db.verify_index("t", "g2").ok


def test_dropping_the_last_global_index_stops_the_tail(db):
    db.create_table("t", PK, defined_columns=DEFINED, stream=True)
    db.create_index("t", "glob", primary_key=["c"])
    t = db.table("t")
    assert t._changes.tail is not None
    db.drop_index("t", "glob")
    assert t._changes.tail is None  # the stream alone keeps no tail
    t.put_row(("a", 1), {"c": "x"})
    assert t._changes.tail is None
