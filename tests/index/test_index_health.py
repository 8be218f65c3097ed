"""A global index's health: rows too long to index are counted, never invisible (describe_table,
verify_index); an applier error on one index is logged, backed off, reported with the lag,
and the other indexes go on."""

from __future__ import annotations

import logging
import time

import pytest

from widetable.keys.codec import MAX_KEY_VALUE_BYTES

LONG = "x" * (MAX_KEY_VALUE_BYTES + 1)


@pytest.fixture
def t(db):
    db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING"), ("d", "STRING")])
    return db.table("t")


def _index(db, table: str, name: str):
    return next(i for i in db.describe_table(table).indexes if i.name == name)


def test_rows_too_long_for_a_global_index_are_counted(db, t):
    t.put_row(("old",), {"c": LONG})  # before the index: the backfill counts it
    db.create_index("t", "by_c", ["c"])
    t.put_row(("a",), {"c": "short"})
    t.put_row(("b",), {"c": LONG})
    db.batch_write_row([("t", "put", ("e",), {"c": LONG}), ("t", "put", ("f",), {"c": "fine"})])
    assert db.wait_for_indexes(10)
    assert _index(db, "t", "by_c").too_long_rows == 3
    report = db.verify_index("t", "by_c")
    assert report.ok and report.too_long_rows == 3
    assert sorted(report.too_long) == [("b",), ("e",), ("old",)]
    t.put_row(("b",), {"c": "now short"})  # no longer too long: indexed, no longer counted
    t.put_row(("e",), {"c": LONG + "y"})  # still too long: counted once
    t.delete_row(("old",))  # gone: not counted
    assert db.wait_for_indexes(10)
    assert _index(db, "t", "by_c").too_long_rows == 1
    report = db.verify_index("t", "by_c")
    assert report.ok and report.too_long_rows == 1 and report.too_long == [("e",)]
    assert [r.primary_key for r in db.table("by_c").scan()] == [("fine", "f"), ("now short", "b"),
                                                                 ("short", "a")]


def test_the_count_survives_reopening(engine_name, open_db):
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db("s")
    db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
    db.create_index("t", "by_c", ["c"])
    db.table("t").put_row(("a",), {"c": LONG})
    assert db.wait_for_indexes(10)
    db.close()
    db = open_db("s")
    assert _index(db, "t", "by_c").too_long_rows == 1


def test_a_failing_index_is_reported_and_the_others_go_on(db, t):
    db.create_index("t", "by_c", ["c"])
    db.create_index("t", "by_d", ["d"])
    indexer = db._indexer
    gi = next(g for g in indexer.indexes.values() if g.codec.spec.name == "by_c")
    gi.health.base = 0.01
    real = indexer._apply_tail
    failing = [True]

    def apply_tail(g):
        if g is gi and failing[0]:
            raise OSError("the index's disk went away")
        return real(g)

    indexer._apply_tail = apply_tail
    t.put_row(("a",), {"c": "x", "d": "y"})
    deadline = time.monotonic() + 10
    while _index(db, "t", "by_c").errors < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    by_c, by_d = _index(db, "t", "by_c"), _index(db, "t", "by_d")
    assert by_c.errors >= 2 and by_c.error == "OSError: the index's disk went away"
    assert by_c.error_at is not None and by_c.lag_ms is not None and by_c.lag_ms > 0
    assert by_d.error is None and by_d.lag_ms == 0  # the other index went on
    assert [r.primary_key for r in db.table("by_d").scan()] == [("y", "a")]
    assert db.background_state()[-1].ok  # the loop itself is fine
    failing[0] = False
    assert db.wait_for_indexes(10)
    by_c = _index(db, "t", "by_c")
    assert by_c.error is None and by_c.errors >= 2 and by_c.lag_ms == 0
    assert [r.primary_key for r in db.table("by_c").scan()] == [("x", "a")]


def test_a_stuck_index_pinning_the_log_is_logged(db, caplog):
    """A global index that cannot apply keeps its unapplied records from being trimmed:
    the log then grows, and that is logged (once) and shown (lag, behind retention)."""
    db.create_table("s", [("k", "STRING")], defined_columns=[("c", "STRING")], stream_retention=1)
    db.create_index("s", "by_c", ["c"])
    indexer = db._indexer
    gi = next(g for g in indexer.indexes.values() if g.codec.spec.name == "by_c")
    gi.health.base = 0.01
    real = indexer._apply_tail
    failing = [True]

    def apply_tail(g):
        if g is gi and failing[0]:
            raise OSError("stuck")
        return real(g)

    indexer._apply_tail = apply_tail
    caplog.set_level(logging.INFO, logger="widetable.background")
    db.table("s").put_row(("a",), {"c": "x"})
    time.sleep(1.2)
    db.trim_change_log()
    db.trim_change_log()
    warned = [r for r in caplog.records if "has not applied change records" in r.getMessage()]
    assert len(warned) == 1 and "'index:by_c'" in warned[0].getMessage()
    ix = _index(db, "s", "by_c")
    assert ix.behind_retention and ix.error == "OSError: stuck" and ix.lag_ms >= 1000
    failing[0] = False
    assert db.wait_for_indexes(10)
    db.trim_change_log()
    assert any("back within retention" in r.getMessage() for r in caplog.records)
    assert not _index(db, "s", "by_c").behind_retention
