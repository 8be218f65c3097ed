"""Partitions on both engines: pre-split, describe, routing, stats, throttling, retries."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import open_store
from widetable import INF_MAX, INF_MIN
from widetable.errors import WidetableError
from widetable.keys import layout
from widetable.keys.builders import hash_prefix
from widetable.partition import Retrier

HEX = list("123456789abcdef")


def test_presplit_into_16_hex_prefixes_and_describe(store) -> None:
    t = store.create_table("logs", [("k", "STRING")], split_points=HEX)
    for i in range(320):
        t.put_row((hash_prefix(i),), {"v": i})
    d = store.describe_table("logs")
    assert [p.start for p in d.partitions] == [None, *HEX]
    assert [p.end for p in d.partitions] == [*HEX, None]
    assert sum(p.rows for p in d.partitions) == 320
    assert all(p.bytes > 0 and p.state == "serving" for p in d.partitions)
    assert d.split_history[0].reason == "pre-split"
    # every row sits in the partition describe_table says holds its key
    for p in d.partitions:
        assert p.rows > 5  # md5 prefixes spread: 320 rows over 16 partitions


def test_split_points_are_validated_before_anything_is_written(store) -> None:
    with pytest.raises(WidetableError) as e:
        store.create_table("bad", [("k", "INTEGER")], split_points=["x"])
    assert e.value.code == "OTSInvalidPK"
    with pytest.raises(WidetableError):
        store.create_table("dup", [("k", "STRING")], split_points=["a", "a"])
    with pytest.raises(WidetableError) as e:
        store.create_table("opt", [("k", "STRING")], no_such_option=1)
    assert e.value.code == "OTSParameterInvalid"
    assert store.list_tables() == []


def test_one_partition_key_value_never_spans_two_partitions(store) -> None:
    t = store.create_table("t", [("user", "STRING"), ("n", "INTEGER")], split_points=["m"])
    store.split_partition("t", "u")
    parts = store.describe_table("t").partitions
    for user in ("a", "m", "mm", "u", "zz"):
        keys = [t._prefix + t._encode((user, n)) for n in (-(2**63), 0, 2**63 - 1)]
        router = store._partitions.partitions(t).router
        assert len({router.find(k).id for k in keys}) == 1
    assert [p.start for p in parts] == [None, "m", "u"]


def test_partition_map_and_history_survive_reopen(tmp_path) -> None:
    db = open_store(tmp_path / "s", "rocksdb", maintenance_interval=None)
    t = db.create_table("t", [("k", "INTEGER")], split_points=[100, 200], capacity=1000)
    for i in range(300):
        t.put_row((i,), {"v": i})
    db.split_partition("t", 150)
    db.close()
    db = open_store(tmp_path / "s", "rocksdb", maintenance_interval=None)
    d = db.describe_table("t")
    assert [p.start for p in d.partitions] == [None, 100, 150, 200]
    assert [e.reason for e in d.split_history] == ["pre-split", "manual"]
    assert d.split_history[1].key == 150
    assert d.options.capacity == 1000
    assert sum(p.rows for p in d.partitions) == 300
    db.close()


def test_stats_count_reads_writes_and_survive_restart(tmp_path) -> None:
    db = open_store(tmp_path / "s", "rocksdb", maintenance_interval=None)
    t = db.create_table("t", [("k", "STRING")], split_points=["m"])
    for i in range(50):
        t.put_row((f"a{i}",), {"v": "x" * 10})
    for _ in range(3):
        t.get_row(("a1",))
    t.get_row(("z",))
    s = db.table_stats("t")
    rows = [r for b in s["buckets"] for r in b["partitions"]]
    first = [r for r in rows if r["start"] is None]
    assert sum(r["writes"] for r in first) == 50
    assert sum(r["reads"] for r in first) == 3
    assert sum(r["reads"] for r in rows if r["start"] == "m") == 1
    assert sum(r["bytes_written"] for r in first) > 0 and sum(r["bytes_read"] for r in first) > 0
    key, count = first[0]["hot_keys"][0]
    # Reported counts are guaranteed ones: at most the 4 true requests, and at least
    # the 3 reads that came after every write.
    assert key == ("a1",) and 3 <= count <= 4
    db.close()
    db = open_store(tmp_path / "s", "rocksdb", maintenance_interval=None)
    s = db.table_stats("t")
    assert sum(r["writes"] for b in s["buckets"] for r in b["partitions"]) == 50
    assert db._engine.get(layout.partition_key(db.table("t").schema.table_id, layout.PARTITION_MAP))
    db.delete_table("t")
    start, end = layout.stats_range(1)
    assert list(db._engine.scan(start, end)) == []
    db.close()


def test_a_busy_drain_routes_a_sample_and_still_finds_the_hot_key(store) -> None:
    from widetable.partition.stats import DRAIN_LIMIT

    t = store.create_table("t", [("k", "STRING")])
    t.put_row(("hot",), {"v": 1})
    for i in range(500):
        t.put_row((f"k{i:04d}",), {"v": i})
    manager = store._partitions
    manager.tick()  # the writes above drained: only the reads below count
    reads = 0
    for i in range(12_000):
        t.get_row(("hot",) if i % 3 else (f"k{i % 500:04d}",))
        reads += 1
    _, tp, stats = manager._entry(t)
    waiting = len(tp.router.sample)
    assert waiting == reads > DRAIN_LIMIT
    part = tp.router.parts[0]
    before = part.seen
    assert stats.drain() == waiting  # every key leaves the queue...
    routed = part.seen - before
    assert DRAIN_LIMIT * 0.8 <= routed <= DRAIN_LIMIT * 1.2  # ...but about DRAIN_LIMIT are routed
    top = stats.hot[part.id].top()
    # 8,000 of the reads were of "hot", every third one aside (a period a fixed stride
    # could alias with); each routed key counts for the keys it stands for
    assert top[0][0].endswith(b"hot\x00")
    assert 6_500 <= top[0][1] <= 9_500
    assert len(tp.router.sample) == 0


def test_stats_retention_drops_old_buckets(store) -> None:
    t = store.create_table("t", [("k", "STRING")], stats_retention=5)
    tp = store._partitions.partitions(t)
    old = layout.stats_key(tp.table_id, 1000)
    store._engine.put(old, b"\x90")
    t.put_row(("a",), {"v": 1})
    store._partitions.flush()
    assert store._engine.get(old) is None


def test_throttling_fires_over_capacity_and_retry_gets_through(store) -> None:
    t = store.create_table("t", [("k", "STRING")], capacity=50)
    errors = 0
    for i in range(200):
        try:
            t.put_row((f"k{i}",), {"v": i})
        except WidetableError as exc:
            assert exc.code == "OTSServerBusy"
            errors += 1
    assert errors > 100
    throttled = sum(r["throttled"] for b in store.table_stats("t")["buckets"] for r in b["partitions"])
    assert throttled == errors
    retrier = Retrier(max_attempts=50, base_delay=0.01, max_delay=0.05, seed=1)
    rt = retrier.wrap(t)
    for i in range(120):
        rt.put_row((f"r{i}",), {"v": i})
    assert retrier.retries > 0 and retrier.gave_up == 0
    assert all(rt.get_row((f"r{i}",)) is not None for i in range(0, 120, 7))


def test_reserved_throughput_lends_capacity(store) -> None:
    t = store.create_table("t", [("k", "STRING")], capacity=10, reserved_throughput=100)
    ok = 0
    for i in range(100):
        try:
            t.put_row((f"k{i}",), {"v": i})
            ok += 1
        except WidetableError:
            pass
    assert 100 >= ok >= 100  # 10 of its own + 100 borrowed cover the burst


def test_capacity_can_be_switched_on_and_off(store) -> None:
    t = store.create_table("t", [("k", "STRING")])
    for i in range(500):
        t.put_row((f"k{i}",), {"v": i})  # off by default: never throttled
    store.update_table("t", capacity=5)
    with pytest.raises(WidetableError):
        for i in range(50):
            t.get_row((f"k{i}",))
    store.update_table("t", capacity=0)
    for i in range(500):
        t.get_row((f"k{i}",))
    assert store.describe_table("t").options.max_versions == 1


def test_partition_unavailable_while_splitting_is_retried(store) -> None:
    t = store.create_table("t", [("k", "STRING")], capacity=10_000)
    p = store._partitions.partitions(t).router.parts[0]
    p.state = "splitting"
    with pytest.raises(WidetableError) as e:
        t.put_row(("a",), {"v": 1})
    assert e.value.code == "OTSPartitionUnavailable"
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) == 3:
            p.state = "serving"

    r = Retrier(sleep=sleep, seed=3)
    r.call(t.put_row, ("a",), {"v": 1})
    assert r.retries == 3 and t.get_row(("a",))["v"] == 1
    assert all(0 <= s <= 0.005 * 2**i for i, s in enumerate(slept))


def test_batch_write_rows_throttled_one_by_one(store) -> None:
    store.create_table("t", [("k", "STRING")], capacity=20)
    results = store.batch_write_row([("t", "put", (f"k{i}",), {"v": i}) for i in range(100)])
    codes = {r.error.code for r in results if r.error is not None}
    assert codes == {"OTSServerBusy"}
    retrier = Retrier(max_attempts=40, base_delay=0.02, max_delay=0.2, seed=2)
    results = retrier.batch_write_row(store, [("t", "put", (f"b{i}",), {"v": i}) for i in range(60)])
    assert all(r.error is None for r in results)
    assert retrier.retries > 0


def test_batch_within_capacity_takes_its_tokens_at_once(store) -> None:
    """A batch that fits the buckets is admitted whole and spends one token per row;
    one that does not is admitted row by row, and a failed whole-batch try spends nothing."""
    t = store.create_table("t", [("k", "STRING")], split_points=["m"], capacity=300)
    router = store._partitions.partitions(t).router
    left, right = router.parts
    for bucket in (left.bucket, right.bucket):  # a stopped clock: no refill during the test
        bucket.clock = lambda: 0.0
        bucket.last = 0.0
    rows = [(f"{c}{i:03d}",) for c in "az" for i in range(100)]
    results = store.batch_write_row([("t", "put", pk, {"v": 1}) for pk in rows])
    assert all(r.error is None for r in results)
    assert left.bucket.tokens == 200 and right.bucket.tokens == 200
    left.bucket.tokens = 50.0
    # The right partition's rows first: its tokens are taken, then given back when the left fails.
    results = store.batch_write_row([("t", "put", (f"y{i:03d}",), {"v": 2}) for i in range(20)]
                                    + [("t", "put", (f"b{i:03d}",), {"v": 2}) for i in range(80)])
    ok = [r for r in results if r.error is None]
    assert len(ok) == 70  # 50 of 80 on the left, all 20 on the right
    assert {r.error.code for r in results if r.error is not None} == {"OTSServerBusy"}
    assert left.bucket.tokens == 0 and right.bucket.tokens == 180
    store.update_table("t", capacity=0)
    assert sum(t.get_row(r.primary_key) is not None for r in results) == 70


def test_split_point_apis(store) -> None:
    t = store.create_table("t", [("k", "STRING"), ("n", "INTEGER")], split_points=["g", "p"])
    rows = [(f"{chr(97 + i % 26)}{i:04d}", i) for i in range(2000)]
    for i in range(0, len(rows), 200):
        store.batch_write_row([("t", "put", pk, {"v": "x" * 50}) for pk in rows[i : i + 200]])
    store.maintain_partitions("t")
    total = sum(p.bytes for p in store.describe_table("t").partitions)
    ranges = store.compute_split_points_by_size("t", total // 8)
    assert 5 <= len(ranges) <= 20
    got = []
    for r in ranges:
        got += [row.primary_key for row in t.scan(r.start, r.end)]
    assert got == sorted(rows)
    samples = store.sample_row_keys("t")
    offsets = [o for _, o in samples]
    assert offsets == sorted(offsets) and samples[-1] == ((), total)
    assert [k for k, _ in samples[:-1]] == sorted(k for k, _ in samples[:-1])


@pytest.mark.parametrize("ordered", [True, False])
def test_parallel_scan_returns_every_row_once(store, ordered: bool) -> None:
    store.create_table("t", [("k", "STRING")], split_points=HEX)
    keys = [hash_prefix(i) for i in range(3000)]
    for i in range(0, len(keys), 200):
        store.batch_write_row([("t", "put", (k,), {"v": 1}) for k in keys[i : i + 200]])
    got = [r.primary_key[0] for r in store.parallel_scan("t", workers=4, ordered=ordered)]
    assert sorted(got) == sorted(keys)
    if ordered:
        assert got == sorted(keys)
    # stopping early leaves no worker behind
    it = store.parallel_scan("t", workers=3)
    assert next(it) is not None
    it.close()
    assert not [th for th in threading.enumerate() if th.name.startswith("widetable-scan")]


def _reads_by_start(db, name: str) -> dict:
    """``{partition start: (reads, rows read, bytes read)}`` over every bucket."""
    out: dict = {}
    for b in db.table_stats(name)["buckets"]:
        for r in b["partitions"]:
            reads, rows, nbytes = out.get(r["start"], (0, 0, 0))
            out[r["start"]] = (reads + r["reads"], rows + r["rows_read"], nbytes + r["bytes_read"])
    return out


@pytest.mark.parametrize("how", ["plain", "columns", "backward", "backward columns", "stored"])
def test_a_range_read_counts_on_every_partition_it_reads(store, how) -> None:
    """Scan load reaches every partition a page reads (a read there, and its rows and
    bytes), not one op on the first: the statistics (Key Visualizer), load splits and
    throttling see it."""
    t = store.create_table("t", [("k", "STRING")], split_points=["g", "p"])
    keys = [f"{c}{i:02d}" for c in "abhqz" for i in range(20)]
    store.batch_write_row([("t", "put", (k,), {"v": "x" * 50}) for k in keys])
    store.maintain_partitions("t")
    before = _reads_by_start(store, "t")
    columns = ["v"] if "columns" in how else None
    if how == "stored":
        blobs, nxt = t.stored_range((INF_MIN,), (INF_MAX,))
        assert len(blobs) == 100 and nxt is None
    elif how.startswith("backward"):
        got = t.get_range((INF_MAX,), (INF_MIN,), direction="backward", columns=columns)
        assert len(got.rows) == 100
    else:
        assert len(t.get_range((INF_MIN,), (INF_MAX,), columns=columns).rows) == 100
    after = _reads_by_start(store, "t")
    delta = {s: tuple(a - b for a, b in zip(after[s], before.get(s, (0, 0, 0)))) for s in after}
    assert {s: d[0] for s, d in delta.items()} == {None: 1, "g": 1, "p": 1}
    assert {s: d[1] for s, d in delta.items()} == {None: 40, "g": 20, "p": 40}
    assert all(nbytes >= 50 * rows for _, rows, nbytes in delta.values())


def test_a_page_within_one_partition_counts_its_rows(store) -> None:
    t = store.create_table("t", [("k", "STRING")], split_points=["m"])
    store.batch_write_row([("t", "put", (f"a{i:02d}",), {"v": i}) for i in range(30)])
    assert len(t.get_range(("a05",), ("a15",)).rows) == 10
    assert len(t.get_range(("zz",), (INF_MAX,)).rows) == 0  # an empty page counts one read
    reads = _reads_by_start(store, "t")
    assert reads[None][:2] == (1, 10) and reads["m"][:2] == (1, 0)


def test_scan_load_is_throttled(tmp_path) -> None:
    """With capacity on, a page takes a token per 4 KB it read: a large scan leaves the
    partition in debt, and the reads after it are refused until it refills."""
    db = open_store(tmp_path / "s", "rocksdb", maintenance_interval=None)
    try:
        t = db.create_table("t", [("k", "STRING")])
        db.batch_write_row([("t", "put", (f"k{i:03d}",), {"v": "x" * 1000}) for i in range(100)])
        db.update_table("t", capacity=5)
        t.get_row(("k001",))  # a point read takes one token
        assert len(t.get_range((INF_MIN,), (INF_MAX,)).rows) == 100
        with pytest.raises(WidetableError) as err:
            t.get_row(("k001",))
        assert err.value.code == "OTSServerBusy"
    finally:
        db.close()
