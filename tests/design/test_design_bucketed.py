"""BucketedTable: rows under bucket prefixes, range reads merged back into key order."""

from __future__ import annotations

import random

import pytest

import widetable
from widetable import INF_MAX, INF_MIN, WidetableError
from widetable.design.bucketed import BucketedTable
from widetable.keys.builders import bucket


@pytest.fixture
def db(tmp_path):
    d = widetable.open(str(tmp_path / "s"), purge_interval=None, maintenance_interval=None)
    yield d
    d.close()


def test_round_trip_and_order(db) -> None:
    bt = BucketedTable.create(db, "metrics", [("ts", "INTEGER"), ("ip", "STRING")], buckets=16)
    rows = [(1718000000 + i, f"10.0.0.{i % 7}") for i in range(400)]
    random.Random(1).shuffle(rows)
    for pk in rows:
        bt.put_row(pk, {"v": pk[0] % 100})
    got = bt.get_range((1718000100, INF_MIN), (1718000200, INF_MIN))
    assert [r.primary_key for r in got] == sorted(pk for pk in rows if 1718000100 <= pk[0] < 1718000200)
    assert bt.get_row(rows[0])["v"] == rows[0][0] % 100
    assert bt.get_row(rows[0]).primary_key == rows[0]
    # each row sits under its bucket in the stored table
    stored = {r.primary_key for r in db.table("metrics").scan()}
    assert all((bucket(pk[0], 16), *pk) in stored for pk in rows)
    assert len({pk[0] for pk in stored}) == 16  # writes spread over every bucket
    assert [r.primary_key for r in bt.scan()] == sorted(rows)
    limited = bt.get_range((INF_MIN, INF_MIN), (INF_MAX, INF_MAX), limit=25)
    assert [r.primary_key for r in limited] == sorted(rows)[:25]
    assert bt.read_fanout == 16
    assert len(db.describe_table("metrics").partitions) == 16  # pre-split at each bucket


def test_delete_and_update(db) -> None:
    bt = BucketedTable.create(db, "t", [("k", "STRING")], buckets=4)
    bt.put_row(("a",), {"n": 1})
    bt.update_row(("a",), increment={"n": 2})
    assert bt.get_row(("a",))["n"] == 3
    bt.delete_row(("a",))
    assert bt.get_row(("a",)) is None


def test_refuses_a_table_without_a_bucket_column(db) -> None:
    t = db.create_table("plain", [("k", "STRING")])
    with pytest.raises(WidetableError, match="not bucketed"):
        BucketedTable(t, 4)
