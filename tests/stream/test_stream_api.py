"""The change log and the stream API: records, order, shards across splits, retention."""

from __future__ import annotations

import base64
import random
import threading

import msgpack
import pytest

from widetable import WidetableError

PK = [("k", "STRING"), ("s", "INTEGER")]


def drain(db, stream_id: str) -> list:
    """Every record of every shard, parents before children, as a consumer would read them."""
    desc = db.describe_stream(stream_id)
    by_id = {s.shard_id: s for s in desc.shards}
    done: set[int] = set()
    out = []
    while len(done) < len(by_id):
        for shard in desc.shards:
            if shard.shard_id in done or any(p not in done for p in shard.parents):
                continue
            it = db.get_shard_iterator(stream_id, shard.shard_id)
            while it is not None:
                page = db.get_stream_record(it, limit=50)
                out.extend(page.records)
                it = page.next_iterator if shard.closed else (page.next_iterator if page.records else None)
            done.add(shard.shard_id)
    return out


def test_records_hold_operation_key_columns_and_commit_order(db):
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    t.put_row(("a", 1), {"x": 1, "y": "s"})
    t.update_row(("a", 1), put={"x": 2}, delete_column=["y"], increment={"n": 5})
    t.delete_row(("a", 1))
    db.batch_write_row([("t", "put", ("b", 1), {"x": 1}), ("t", "delete", ("b", 2))])
    [info] = db.list_stream()
    assert info.table == "t"
    records = drain(db, info.stream_id)
    assert [(r.operation, r.primary_key) for r in records] == [
        ("PUT", ("a", 1)), ("UPDATE", ("a", 1)), ("DELETE", ("a", 1)), ("PUT", ("b", 1)),
        ("DELETE", ("b", 2)),
    ]
    seqs = [r.sequence for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {(c.name, c.kind, c.value) for c in records[1].columns} == {
        ("x", "PUT", 2), ("y", "DELETE_ALL_VERSIONS", None), ("n", "PUT", 5)}
    assert {c.name: c.value for c in records[0].columns} == {"x": 1, "y": "s"}
    assert all(r.timestamp > 0 for r in records)


def test_a_condition_that_checks_nothing_does_not_change_a_batch_s_commit_order(db):
    """A put with a bare Condition(IGNORE) is written as a put without one: same place in
    the batch's commit order (it used to commit after the batch's deletes and updates)."""
    from widetable import Condition, RowExistence

    db.create_table("t", PK, stream=True)
    for cond in (None, Condition(RowExistence.IGNORE)):
        db.batch_write_row([("t", "delete", ("q", 0), None, None),
                            ("t", "put", ("q", 1), {"c": 0}, cond)])
    [info] = db.list_stream()
    ops = [r.operation for r in drain(db, info.stream_id)]
    assert ops[:2] == ops[2:], ops


def test_tables_without_stream_log_nothing_and_stream_can_be_toggled(db):
    db.create_table("t", PK)
    t = db.table("t")
    t.put_row(("a", 1), {"x": 1})
    assert db.list_stream() == []
    assert t._changes is None  # the plain one-put write path
    db.update_table("t", stream=True)
    t.put_row(("a", 2), {"x": 1})
    [info] = db.list_stream()
    assert [r.primary_key for r in drain(db, info.stream_id)] == [("a", 2)]
    db.update_table("t", stream=False)
    with pytest.raises(WidetableError) as err:
        db.describe_stream(info.stream_id)
    assert err.value.code == "OTSObjectNotExist"


def check_positions(db, sid: str) -> None:
    """On table ``t`` of the stream ``sid``, holding records 1-5 in shard 0: LATEST waits for
    the next record, a sequence number starts at that record (also through a server)."""
    latest = db.get_shard_iterator(sid, 0, "LATEST")
    assert db.get_stream_record(latest).records == []
    db.table("t").put_row(("a", 9), {"x": 9})
    assert [r.primary_key for r in db.get_stream_record(latest).records] == [("a", 9)]
    at3 = db.get_shard_iterator(sid, 0, 3)
    assert [r.sequence for r in db.get_stream_record(at3, limit=2).records] == [3, 4]


def test_iterator_positions_and_errors(db):
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    for i in range(5):
        t.put_row(("a", i), {"x": i})
    sid = db.list_stream()[0].stream_id
    check_positions(db, sid)
    for bad in (lambda: db.get_shard_iterator(sid, 7), lambda: db.get_stream_record("nope"),
                lambda: db.get_shard_iterator(sid, 0, "MIDDLE"),
                lambda: db.get_shard_iterator(sid, 0, 2**64), lambda: db.get_shard_iterator(sid, 0, -1)):
        with pytest.raises(WidetableError) as err:
            bad()
        assert err.value.code == "OTSParameterInvalid"
    # Iterators are opaque tokens; forged ones with fields out of their ranges are refused.
    table_id = t.schema.table_id
    forged = [(table_id, -1, -1), (table_id, 0, -5), (2**40, 0, -1), (table_id, 0, 2**64 - 1),
              (table_id, 0, "x"), (table_id, 2**32, -1)]
    for fields in forged:
        token = base64.urlsafe_b64encode(msgpack.packb([1, *fields])).decode()
        with pytest.raises(WidetableError, match="invalid shard iterator") as err:
            db.get_stream_record(token)
        assert err.value.code == "OTSParameterInvalid", fields
    far = db.get_shard_iterator(sid, 0, 2**63)  # past every record: an empty page
    assert db.get_stream_record(far).records == []


def test_transactions_and_auto_increment_are_logged(db):
    from widetable import AUTO_INCREMENT

    db.create_table("t", PK, stream=True)
    with db.start_local_transaction("t", "a") as txn:
        txn.put_row(("a", 1), {"x": 1})
        txn.put_row(("a", 2), {"x": 2})
    db.create_table("m", [("c", "STRING"), ("seq", "INTEGER", AUTO_INCREMENT)], stream=True)
    pk = db.table("m").put_row(("c", AUTO_INCREMENT), {"x": 1}).primary_key
    streams = {s.table: s.stream_id for s in db.list_stream()}
    assert [r.primary_key for r in drain(db, streams["t"])] == [("a", 1), ("a", 2)]
    assert [r.primary_key for r in drain(db, streams["m"])] == [pk]


def test_log_survives_splits_without_loss_duplication_or_reordering(db):
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    rng = random.Random(7)
    expected: dict[tuple, list[int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(seed: int) -> None:
        r = random.Random(seed)
        n = 0
        while not stop.is_set() or n < 200:
            key = (f"k{r.randrange(40):02d}", r.randrange(3))
            with lock:  # the order of one key's writes is the order we record
                n += 1
                gen = seed * 1_000_000 + n
                t.put_row(key, {"g": gen})
                expected.setdefault(key, []).append(gen)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(1, 4)]
    for th in threads:
        th.start()
    for at in ("k10", "k20", "k30", "k05"):
        db.split_partition("t", at)
    db.merge_partitions("t", 0)
    stop.set()
    for th in threads:
        th.join()
    sid = db.list_stream()[0].stream_id
    desc = db.describe_stream(sid)
    assert any(s.closed and s.children for s in desc.shards)
    assert any(s.parents for s in desc.shards)
    records = drain(db, sid)
    seen = [r.sequence for r in records]
    assert len(seen) == len(set(seen)) == sum(map(len, expected.values()))
    got: dict[tuple, list[int]] = {}
    for r in records:
        got.setdefault(r.primary_key, []).append(r.columns[0].value)
    assert got == expected
    del rng


def test_retention_is_enforced_in_the_background_without_any_index(db, monkeypatch):
    import time

    from widetable.index import global_

    monkeypatch.setattr(global_, "TRIM_INTERVAL", 0.1)  # instead of every 10 s
    # Retention 3 s: records are read back before it passes even if a loaded machine
    # pauses this test for a second or two.
    db.create_table("t", PK, stream=True, stream_retention=3)
    t = db.table("t")
    for i in range(5):
        t.put_row(("a", i), {"x": i})
    sid = db.list_stream()[0].stream_id
    assert len(drain(db, sid)) == 5
    deadline = time.monotonic() + 20
    while drain(db, sid):
        assert time.monotonic() < deadline, "records past retention were never trimmed"
        time.sleep(0.1)
    t.put_row(("a", 9), {"x": 9})
    assert [r.primary_key for r in drain(db, sid)] == [("a", 9)]


def test_retention_trims_only_what_consumers_applied(db):
    db.create_table("t", PK, stream=True, stream_retention=1, defined_columns=[("c", "STRING")])
    t = db.table("t")
    for i in range(10):
        t.put_row(("a", i), {"c": "x"})
    import time

    time.sleep(1.1)
    assert db.trim_change_log() == 10
    sid = db.list_stream()[0].stream_id
    assert drain(db, sid) == []
    t.put_row(("a", 11), {"c": "y"})
    assert [r.primary_key for r in drain(db, sid)] == [("a", 11)]
    assert [d.stream_retention for d in [db.describe_table("t")]] == [1]


def test_trim_visits_only_the_shards_that_hold_records(db, monkeypatch):
    import time

    from widetable.stream import log

    db.create_table("t", PK, stream=True, stream_retention=1)
    t = db.table("t")
    for at in "mfsckpwbdhjnqux":  # 15 splits: shards 0 .. 30, 15 of them closed
        db.split_partition("t", at)
    live = {p.id for p in db.describe_table("t").partitions}
    for k in ("a", "g", "p", "y", "z"):
        t.put_row((k, 1), {"x": 1})
    tid = t.schema.table_id
    holding = {s for s in range(31) if log.first_seq(db._engine, tid, s) is not None}
    assert holding <= live and len(holding) == 4
    assert list(log.shards_with_records(db._engine, tid)) == sorted(holding)
    seeks = []
    scan = db._engine.scan
    monkeypatch.setattr(db._engine, "scan", lambda lo, hi, reverse=False: seeks.append(lo) or scan(lo, hi, reverse))
    time.sleep(1.1)
    assert db.trim_change_log() == 5
    # Per shard with records: find it, trim it; then the end. Not one seek per shard id.
    assert len(seeks) == 2 * len(holding) + 1 < 31
    assert list(log.shards_with_records(db._engine, tid)) == []
    t.put_row(("z", 2), {"x": 2})
    assert [r.primary_key for r in drain(db, db.list_stream()[0].stream_id)] == [("z", 2)]


def test_shard_links_outlive_the_history_limit(db, monkeypatch):
    from widetable.partition import meta

    monkeypatch.setattr(meta, "HISTORY_LIMIT", 10)
    db.create_table("t", [("k", "STRING")], stream=True)
    db.create_table("plain", [("k", "STRING")])
    t = db.table("t")
    t.put_row(("a",), {"v": 0})  # shard 0
    db.split_partition("t", "m")  # 0 -> 1, 2
    t.put_row(("a",), {"v": 1})  # shard 1
    for _ in range(10):  # 20 more events, twice the limit
        db.merge_partitions("t", 0)
        db.split_partition("t", "m")
        db.split_partition("plain", "m")
        db.merge_partitions("plain", 0)
    t.put_row(("a",), {"v": 2})
    sid = db.list_stream("t")[0].stream_id
    shards = {s.shard_id: s for s in db.describe_stream(sid).shards}
    assert shards[0].children == (1, 2) and shards[1].parents == (0,)
    # Every shard's parents are known, so a reader that takes each shard after its parents
    # (highest id first among those ready) sees the key's versions in commit order.
    done: set[int] = set()
    seen = []
    while len(done) < len(shards):
        for s in sorted(shards.values(), key=lambda s: -s.shard_id):
            if s.shard_id in done or any(p not in done for p in s.parents):
                continue
            seen += [r.columns[0].value for r in db.get_stream_record(
                db.get_shard_iterator(sid, s.shard_id, "TRIM_HORIZON"), limit=1000).records]
            done.add(s.shard_id)
    assert seen == [0, 1, 2]
    # A table without a stream keeps just the last HISTORY_LIMIT events.
    assert len(db.describe_table("plain").split_history) == 10


@pytest.mark.parametrize("with_global_index", [False, True])
def test_turning_a_stream_on_again_makes_a_new_stream(db, with_global_index):
    db.create_table("t", PK, stream=True, defined_columns=[("c", "STRING")])
    if with_global_index:  # keeps the log while the stream is off
        db.create_index("t", "g", ["c"], progress=False)
    t = db.table("t")
    t.put_row(("a", 1), {"c": "x"})
    [old] = db.list_stream()
    it = db.get_shard_iterator(old.stream_id, 0, "TRIM_HORIZON")
    page = db.get_stream_record(it)
    assert [r.primary_key for r in page.records] == [("a", 1)]
    db.update_table("t", stream=False)
    t.put_row(("a", 2), {"c": "y"})  # while off: in no stream
    db.update_table("t", stream=True)
    t.put_row(("a", 3), {"c": "z"})
    [new] = db.list_stream()
    assert new.stream_id != old.stream_id
    for stale in (lambda: db.get_stream_record(page.next_iterator),
                  lambda: db.describe_stream(old.stream_id)):
        with pytest.raises(WidetableError) as err:
            stale()
        assert err.value.code == "OTSObjectNotExist"
    assert [r.primary_key for r in drain(db, new.stream_id)] == [("a", 3)]
    first = db.get_stream_record(db.get_shard_iterator(new.stream_id, 0, 1)).records
    assert [r.primary_key for r in first] == [("a", 3)]  # no position reaches before it


def test_a_new_streams_id_survives_reopening(open_db, engine_name):
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("t", PK, stream=True)
    db.table("t").put_row(("a", 1), {"x": 1})
    db.update_table("t", stream=False)
    db.update_table("t", stream=True)
    db.table("t").put_row(("a", 2), {"x": 2})
    sid = db.list_stream()[0].stream_id
    db.close()
    db = open_db()
    assert db.list_stream()[0].stream_id == sid
    assert [r.primary_key for r in drain(db, sid)] == [("a", 2)]


@pytest.mark.parametrize("with_global_index", [False, True])
def test_a_stream_turned_on_again_is_new_even_if_the_process_dies_at_once(
        open_db, engine_name, monkeypatch, with_global_index):
    """The catalog learns that the stream is on, and where the new one starts, in one write:
    a process dying right after it (before the change capture is set up) reopens to the new
    stream, not to the old one with the records written while it was off."""
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("t", PK, stream=True, defined_columns=[("c", "STRING")])
    if with_global_index:  # keeps the log while the stream is off
        db.create_index("t", "g", ["c"], progress=False)
    db.table("t").put_row(("a", 1), {"c": "x"})
    [old] = db.list_stream()
    db.update_table("t", stream=False)
    db.table("t").put_row(("a", 2), {"c": "y"})  # while off: in no stream

    def dies(table):
        raise RuntimeError("the process died here")

    monkeypatch.setattr(db._indexes, "configure", dies)
    with pytest.raises(RuntimeError):
        db.update_table("t", stream=True)
    monkeypatch.undo()
    db.close()
    db = open_db()
    [new] = db.list_stream()
    assert new.stream_id != old.stream_id
    db.table("t").put_row(("a", 3), {"c": "z"})
    assert [r.primary_key for r in drain(db, new.stream_id)] == [("a", 3)]


def test_a_trim_cut_short_never_hands_a_seq_out_again(open_db, engine_name, monkeypatch):
    import time

    from widetable.stream import log

    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("t", PK, stream=True, stream_retention=1)
    for i in range(5):
        db.table("t").put_row(("a", i), {"x": i})
    time.sleep(1.1)
    trim_shard = log.trim_shard

    def dies_after_trimming(*args, **kwargs):
        trim_shard(*args, **kwargs)
        raise RuntimeError("the process died here")

    monkeypatch.setattr(log, "trim_shard", dies_after_trimming)
    with pytest.raises(RuntimeError):
        db.trim_change_log()
    monkeypatch.undo()
    db.close()
    db = open_db()
    db.table("t").put_row(("b", 1), {"x": 1})
    [record] = drain(db, db.list_stream()[0].stream_id)
    assert record.sequence == 6  # after the five trimmed ones, not 1 again


def test_an_iterator_behind_a_trim_gets_trimmed_data_access(db):
    """A reader whose next records were trimmed is told so (OTSTrimmedDataAccess), not handed
    the later records as if nothing was missed; TRIM_HORIZON then starts after the trim."""
    import time

    from widetable.errors import TrimmedDataAccess

    db.create_table("t", PK, stream=True, stream_retention=1)
    t = db.table("t")
    for i in range(5):
        t.put_row(("a", i), {"x": i})
    sid = db.list_stream()[0].stream_id
    behind = db.get_shard_iterator(sid, 0)
    page = db.get_stream_record(behind, limit=2)
    assert [r.sequence for r in page.records] == [1, 2]
    time.sleep(1.1)
    assert db.trim_change_log() == 5
    t.put_row(("a", 5), {"x": 5})
    for it in (behind, page.next_iterator, db.get_shard_iterator(sid, 0, 3)):
        with pytest.raises(TrimmedDataAccess, match="after sequence .* up to 5 .* trimmed"):
            db.get_stream_record(it)
    assert [r.sequence for r in db.get_stream_record(db.get_shard_iterator(sid, 0)).records] == [6]
    assert [r.sequence for r in db.get_stream_record(db.get_shard_iterator(sid, 0, 6)).records] == [6]
    # Turned off and on: a new stream; the old one's trim marks go with its records.
    db.update_table("t", stream=False)
    db.update_table("t", stream=True)
    t.put_row(("a", 6), {"x": 6})
    sid = db.list_stream()[0].stream_id
    assert [r.sequence for r in db.get_stream_record(db.get_shard_iterator(sid, 0)).records] == [7]
