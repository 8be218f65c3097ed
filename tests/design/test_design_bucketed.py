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


@pytest.fixture
def ts4(db):
    bt = BucketedTable.create(db, "ts4", [("ts", "INTEGER"), ("ip", "STRING")], buckets=4)
    for i in range(40):
        bt.put_row((i, f"ip{i % 3}"), {"v": i})
    return bt


@pytest.mark.parametrize("direction", ["backward", "BACKWARD"])
def test_backward_reads_merge_newest_first(ts4, direction) -> None:
    """Uppercase BACKWARD is what a Table accepts, so the merge must honour it too."""
    want = sorted(((i, f"ip{i % 3}") for i in range(40)), reverse=True)
    got = ts4.get_range((INF_MAX, INF_MAX), (INF_MIN, INF_MIN), limit=5, direction=direction)
    assert [r.primary_key for r in got] == want[:5]
    assert [r.primary_key for r in ts4.scan(direction=direction)] == want
    assert [r.primary_key for r in ts4.scan(limit=3)] == sorted(want)[:3]
    with pytest.raises(WidetableError, match="direction must be") as info:
        ts4.get_range((INF_MIN,), (INF_MAX,), direction="sideways")
    assert info.value.code == "OTSParameterInvalid"


def test_keys_take_the_forms_a_table_takes(ts4) -> None:
    ts4.put_row([100, "x"], {"v": 1})
    ts4.put_row({"ts": 101, "ip": "y"}, {"v": 2})
    ts4.put_row([("ts", 102), ("ip", "z")], {"v": 3})
    assert ts4.get_row((100, "x"))["v"] == 1
    assert ts4.get_row({"ip": "y", "ts": 101})["v"] == 2
    assert ts4.get_row([102, "z"]).primary_key == (102, "z")
    assert [r.primary_key[0] for r in ts4.get_range([100], [102])] == [100, 101]
    with pytest.raises(WidetableError, match="must not name '_bucket'"):
        ts4.put_row({"_bucket": 0, "ts": 1, "ip": "a"}, {"v": 1})


@pytest.mark.parametrize("first", [INF_MIN, True, 1.5, None])
def test_a_key_without_a_bucketable_first_value_is_refused(ts4, first) -> None:
    with pytest.raises(WidetableError, match="first key value") as info:
        ts4.get_row((first, "x"))
    assert info.value.code == "OTSParameterInvalid"


@pytest.mark.parametrize("buckets", [0, -1, True, 2.0, "4"])
def test_create_with_bad_buckets_creates_nothing(db, buckets) -> None:
    with pytest.raises(WidetableError, match="buckets must be a positive integer") as info:
        BucketedTable.create(db, "nope", [("k", "STRING")], buckets=buckets)
    assert info.value.code == "OTSParameterInvalid"
    assert "nope" not in db.list_tables()


def test_wrapping_with_fewer_buckets_than_written_is_refused(db) -> None:
    """Reading 4 buckets of an 8-bucket table would silently drop rows."""
    bt = BucketedTable.create(db, "eight", [("k", "INTEGER")], buckets=8)
    for i in range(64):
        bt.put_row((i,), {"v": i})
    with pytest.raises(WidetableError, match="bucket 7") as info:
        BucketedTable(db.table("eight"), 4)
    assert info.value.code == "OTSParameterInvalid"
    assert len(list(BucketedTable(db.table("eight"), 8).scan())) == 64


@pytest.mark.parametrize("wrong", [9, 16, 64])
def test_wrapping_with_more_buckets_than_written_is_refused(db, wrong) -> None:
    """Looking 8-bucket rows up with more buckets would miss most of them: the first row of
    each bucket must lie where the count puts its key."""
    bt = BucketedTable.create(db, "eight", [("k", "INTEGER")], buckets=8)
    for i in range(64):
        bt.put_row((i,), {"v": i})
    with pytest.raises(WidetableError, match="another bucket count") as info:
        BucketedTable(db.table("eight"), wrong)
    assert info.value.code == "OTSParameterInvalid"
    again = BucketedTable(db.table("eight"), 8)
    assert all(again.get_row((i,))["v"] == i for i in range(64))


def test_the_bucket_check_reads_at_most_a_sample(db, monkeypatch) -> None:
    """A wrapper of many buckets checks the first row of up to SAMPLE_BUCKETS of them."""
    from widetable.design import bucketed

    bt = BucketedTable.create(db, "many", [("k", "INTEGER")], buckets=1000)
    for i in range(300):
        bt.put_row((i,), {"v": i})
    calls = []
    get_range = type(db.table("many")).get_range
    monkeypatch.setattr(type(db.table("many")), "get_range",
                        lambda self, *a, **k: calls.append(a) or get_range(self, *a, **k))
    BucketedTable(db.table("many"), 1000)
    assert 1 < len(calls) <= bucketed.SAMPLE_BUCKETS + 2
