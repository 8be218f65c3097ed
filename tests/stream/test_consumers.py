"""The change-log consumer registry: logging, reading, checkpoints, trim, purges, lag, errors.

Consumers here are registered from outside ``index/``, the way the search index and
replication will be: through ``StoreContext.changelog``.
"""

from __future__ import annotations

import time

import pytest

from widetable import WidetableError
from widetable.keys import layout

PK = [("k", "STRING")]


def _log_keys(db, table) -> list[bytes]:
    return [k for k, _ in db._engine.scan(*layout.change_log_range(table.schema.table_id))]


def _new_id(db) -> int:
    batch = db._engine.batch()
    cid = db._ctx.ids.take(batch)
    db._engine.write(batch)
    return cid


def _ops(page) -> list[tuple[str, tuple]]:
    return [(r.operation, r.primary_key) for r in page.records]


def test_a_registered_consumer_makes_the_table_log_and_reads_after_its_checkpoint(db) -> None:
    db.create_table("t", PK)
    t = db.table("t")
    t.put_row(("before",), {"x": 0})
    assert t._changes is None and _log_keys(db, t) == []  # no consumer: no log
    log = db._ctx.changelog
    c = log.register("test:reader", t, _new_id(db))
    assert [x.name for x in log.consumers(t)] == ["test:reader"]
    t.put_row(("b",), {"x": 1})
    t.update_row(("b",), put={"x": 2})
    t.delete_row(("before",))
    page = log.read(c)
    assert _ops(page) == [("PUT", ("b",)), ("UPDATE", ("b",)), ("DELETE", ("before",))]
    assert not page.more
    c.commit(page.checkpoints)
    assert log.read(c).records == []
    db.batch_write_row([("t", "put", ("c",), {"x": 3}), ("t", "put", ("d",), {"x": 4})])
    first = log.read(c, limit=1)
    assert _ops(first) == [("PUT", ("c",))] and first.more
    c.commit(first.checkpoints)
    assert _ops(log.read(c)) == [("PUT", ("d",))]


def test_checkpoints_survive_reopening(open_db, engine_name) -> None:
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("t", PK)
    cid = _new_id(db)
    c = db._ctx.changelog.register("test:reader", db.table("t"), cid)
    start = c.start_seq
    db.table("t").put_row(("a",), {"x": 1})
    db.table("t").put_row(("b",), {"x": 2})
    page = db._ctx.changelog.read(c, limit=1)
    c.commit(page.checkpoints)
    db.close()
    db = open_db()
    c = db._ctx.changelog.register("test:reader", db.table("t"), cid, start_seq=start)
    assert _ops(db._ctx.changelog.read(c)) == [("PUT", ("b",))]


def test_a_consumer_sees_only_writes_after_it_registered_by_default(db) -> None:
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    t.put_row(("old",), {"x": 1})
    c = db._ctx.changelog.register("test:late", t, _new_id(db))
    t.put_row(("new",), {"x": 1})
    assert _ops(db._ctx.changelog.read(c)) == [("PUT", ("new",))]
    early = db._ctx.changelog.register("test:all", t, _new_id(db), start_seq=-1)
    assert _ops(db._ctx.changelog.read(early)) == [("PUT", ("old",)), ("PUT", ("new",))]


def test_trim_keeps_every_record_a_consumer_has_not_applied(db) -> None:
    db.create_table("t", PK, stream_retention=1)
    t = db.table("t")
    log = db._ctx.changelog
    c = log.register("test:slow", t, _new_id(db))
    for k in "abc":
        t.put_row((k,), {"x": 1})
    time.sleep(1.1)  # every record is past retention now
    assert db.trim_change_log() == 0  # none applied
    page = log.read(c, limit=2)
    c.commit(page.checkpoints)
    assert db.trim_change_log() == 2
    assert _ops(log.read(c)) == [("PUT", ("c",))]
    assert len(_log_keys(db, t)) == 1


def test_the_last_consumer_leaving_stops_and_deletes_the_log(db) -> None:
    db.create_table("t", PK)
    t = db.table("t")
    log = db._ctx.changelog
    log.register("test:reader", t, _new_id(db))
    t.put_row(("a",), {"x": 1})
    assert len(_log_keys(db, t)) == 1
    log.unregister("test:reader")
    assert t._changes is None and _log_keys(db, t) == []
    t.put_row(("b",), {"x": 1})
    assert _log_keys(db, t) == []


def test_a_table_with_a_stream_keeps_logging_when_another_consumer_leaves(db) -> None:
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    log = db._ctx.changelog
    assert [c.name for c in log.consumers(t)] == ["stream:t"]
    log.register("test:reader", t, _new_id(db))
    log.unregister("test:reader")
    t.put_row(("a",), {"x": 1})
    assert len(_log_keys(db, t)) == 1


def test_streams_and_global_indexes_are_consumers(db) -> None:
    db.create_table("t", [("k", "STRING"), ("s", "INTEGER")], stream=True,
                    defined_columns=[("v", "STRING")])
    db.create_index("t", "by_v", ["v"], index_type="GLOBAL")
    names = sorted(c.name for c in db._ctx.changelog.consumers(db.table("t")))
    assert names == ["index:by_v", "stream:t"]
    gi = next(iter(db._indexer.indexes.values()))
    assert db._ctx.changelog.get("index:by_v").health is gi.health  # one error state
    db.drop_index("t", "by_v")
    assert [c.name for c in db._ctx.changelog.consumers(db.table("t"))] == ["stream:t"]
    db.delete_table("t")
    assert db._ctx.changelog.consumers() == []


def test_consumer_names_are_unique(db) -> None:
    db.create_table("t", PK)
    db._ctx.changelog.register("test:reader", db.table("t"))
    with pytest.raises(WidetableError, match="test:reader") as err:
        db._ctx.changelog.register("test:reader", db.table("t"))
    assert err.value.code == "OTSObjectAlreadyExist"


def test_internal_consumers_see_ttl_purges_and_the_stream_does_not(db) -> None:
    db.create_table("t", PK, ttl=1, stream=True)
    t = db.table("t")
    log = db._ctx.changelog
    internal = log.register("test:internal", t, _new_id(db))
    external = log.register("test:external", t, _new_id(db), sees_purges=False)
    old = int(time.time() * 1000) - 5000
    t.put_row(("a",), [("x", 1, old)])
    assert db.purge_expired("t") == 1
    assert [r.operation for r in log.read(internal).records] == ["PUT", "PURGE"]
    assert [r.operation for r in log.read(external).records] == ["PUT"]
    stream_id = db.list_stream("t")[0].stream_id
    page = db.get_stream_record(db.get_shard_iterator(stream_id, 0))
    assert [r.operation for r in page.records] == ["PUT"]


def test_lag_and_error_state(db) -> None:
    db.create_table("t", PK)
    t = db.table("t")
    log = db._ctx.changelog
    c = log.register("test:reader", t, _new_id(db))
    assert log.lag_ms(c) == 0 and log.oldest_unapplied(c) is None
    t.put_row(("a",), {"x": 1})
    time.sleep(0.02)
    assert log.lag_ms(c) >= 10
    assert c.failed(OSError("index disk full")) > 0  # a back-off delay
    c.failed(OSError("index disk full"))
    state = c.health.state()
    assert state.error == "OSError: index disk full" and state.errors == 2 and not state.ok
    assert state.error_at is not None
    c.commit(log.read(c).checkpoints)
    c.ok()
    state = c.health.state()
    assert state.ok and state.error is None and state.errors == 2 and state.ok_at is not None
    assert log.lag_ms(c) == 0
    assert log.lag_ms(log.register("test:nockpt", t)) is None  # keeps no checkpoints


def test_a_waker_runs_on_every_logged_commit(db) -> None:
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    calls: list[int] = []
    db._ctx.changelog.register("test:woken", t, wake=lambda: calls.append(1))
    t.put_row(("a",), {"x": 1})
    db.batch_write_row([("t", "put", ("b",), {"x": 1})])
    assert len(calls) == 2


def test_records_of_a_key_come_in_commit_order_across_a_split(db) -> None:
    db.create_table("t", [("k", "STRING"), ("s", "INTEGER")])
    t = db.table("t")
    log = db._ctx.changelog
    c = log.register("test:reader", t, _new_id(db))
    for i in range(30):
        t.put_row(("m", i), {"x": i})
    db.split_partition("t", "m")
    for i in range(30, 40):
        t.put_row(("m", i), {"x": i})
    seen = []
    while True:
        page = log.read(c, limit=7)
        seen += [r.primary_key[1] for r in page.records]
        c.commit(page.checkpoints)
        if not page.more:
            break
    assert seen == list(range(40))
