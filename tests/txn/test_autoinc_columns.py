"""Auto-increment key columns: declaration, assigned values, uniqueness under threads, reopen."""

from __future__ import annotations

import threading

import pytest

import widetable
from widetable import AUTO_INCREMENT, WidetableError
from widetable.keys import layout
from widetable.table import autoinc
from widetable.table.schema import TableSchema

PK = [("user", "STRING"), ("seq", "INTEGER", AUTO_INCREMENT)]


def test_declaration_forms(db):
    for i, seq in enumerate(
        [("seq", "INTEGER", AUTO_INCREMENT), ("seq", "INTEGER", "auto_increment"), ("seq", AUTO_INCREMENT)]
    ):
        db.create_table(f"t{i}", [("user", "STRING"), seq])
        desc = db.describe_table(f"t{i}")
        assert desc.auto_increment == "seq"
        assert desc.primary_key == [("user", "STRING"), ("seq", "INTEGER")]
    assert db.describe_table("t0") == db.describe_table("t0")
    db.create_table("plain", [("k", "STRING")])
    assert db.describe_table("plain").auto_increment is None


@pytest.mark.parametrize(
    "pk, message",
    [
        ([("seq", "INTEGER", AUTO_INCREMENT), ("b", "STRING")], "partition key"),
        ([("a", "STRING"), ("seq", "STRING", AUTO_INCREMENT)], "must be INTEGER"),
        ([("a", "STRING"), ("x", AUTO_INCREMENT), ("y", AUTO_INCREMENT)], "only one"),
        ([("a", "STRING"), ("x", "INTEGER", "SOMETIMES")], "SOMETIMES"),
    ],
)
def test_declaration_rejected(db, pk, message):
    with pytest.raises(WidetableError) as err:
        db.create_table("t", pk)
    assert err.value.code == "OTSParameterInvalid"
    assert message in err.value.message
    assert db.list_tables() == []


def test_schema_json_is_backward_compatible():
    plain = TableSchema("t", 1, (("k", "STRING"),))
    assert b"auto_increment" not in plain.to_json()
    assert TableSchema.from_json(plain.to_json()).auto_increment is None
    auto = TableSchema("t", 1, (("k", "STRING"), ("n", "INTEGER")), auto_increment="n")
    assert TableSchema.from_json(auto.to_json()) == auto


def test_put_assigns_increasing_values_per_partition_key(table):
    t = table(pk=PK)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for i in range(20):
        user = "ab"[i % 2]
        result = t.put_row((user, AUTO_INCREMENT), {"i": i})
        assert result.primary_key[0] == user
        seen[user].append(result.primary_key[1])
        assert t.get_row(result.primary_key)["i"] == i
    for values in seen.values():
        assert values == sorted(values) and len(set(values)) == len(values)
    assert [r.primary_key[1] for r in t.scan(("a",), ("b",))] == seen["a"]


def test_dict_and_list_keys_take_the_placeholder(table):
    t = table(pk=PK)
    a = t.put_row({"user": "u", "seq": AUTO_INCREMENT}, {"x": 1}).primary_key
    b = t.put_row(["u", AUTO_INCREMENT], {"x": 2}).primary_key
    assert a[1] < b[1]


def test_concrete_value_writes_that_row_and_raises_the_counter(table):
    t = table(pk=PK)
    first = t.put_row(("u", AUTO_INCREMENT), {"v": 1}).primary_key
    t.put_row(first, {"v": 2})  # replace a row by its value
    assert t.get_row(first)["v"] == 2
    t.put_row(("u", 2**62), {"v": 3})
    assert t.put_row(("u", AUTO_INCREMENT), {"v": 4}).primary_key[1] == 2**62 + 1


def test_rows_updates_create_are_never_overwritten_by_assigned_values(db, table):
    """update_row (alone or in a batch) may create a row with a concrete key: values given
    out later land above it (the stored counter is raised) instead of replacing it."""
    t = table(pk=PK)
    t.update_row(("u", 2**62), put={"v": "update"})
    db.batch_write_row([(t.name, "update", ("u", 2**62 + 1), {"put": {"v": "batch"}})])
    t.update_row(("u", 5), put={"v": "low"})  # below the counter: it stays as it is
    assigned = t.put_row(("u", AUTO_INCREMENT), {"v": "new"}).primary_key
    assert assigned == ("u", 2**62 + 2)
    assert [t.get_row(("u", v))["v"] for v in (2**62, 2**62 + 1, 5)] == ["update", "batch", "low"]
    stored = db._engine.get(autoinc.counter_key(t, "u"))
    assert autoinc.decode_counter(stored) == 2**62 + 2
    with pytest.raises(WidetableError, match="must be INTEGER, got _AutoIncrement") as exc:
        t.update_row(("u", AUTO_INCREMENT), put={"v": 1})
    assert exc.value.code == "OTSInvalidPK"


def test_placeholder_only_where_a_value_is_assigned(table):
    t = table(pk=PK)
    t2 = table(pk=[("a", "STRING"), ("b", "INTEGER"), ("seq", AUTO_INCREMENT)])
    for call in (
        lambda: t.get_row(("u", AUTO_INCREMENT)),
        lambda: t.delete_row(("u", AUTO_INCREMENT)),
        lambda: t.update_row(("u", AUTO_INCREMENT), put={"x": 1}),
    ):
        with pytest.raises(WidetableError) as err:
            call()
        assert err.value.code == "OTSInvalidPK" and "AUTO_INCREMENT" in err.value.message
    with pytest.raises(WidetableError) as err:
        t2.put_row(("a", AUTO_INCREMENT, AUTO_INCREMENT), {"x": 1})
    assert err.value.code == "OTSParameterInvalid" and "'b'" in err.value.message
    assert list(t.scan()) == [] and list(t2.scan()) == []


def test_a_key_of_the_wrong_length_is_invalid_pk(table):
    t = table(pk=PK)
    for pk in [("u",), (), ["u"], ("u", AUTO_INCREMENT, 3)]:
        with pytest.raises(WidetableError) as err:
            t.put_row(pk, {"x": 1})
        assert err.value.code == "OTSInvalidPK" and "needs 2 columns" in err.value.message
    assert list(t.scan()) == []


def test_rejected_put_consumes_nothing_visible(table):
    t = table(pk=PK)
    with pytest.raises(WidetableError):
        t.put_row(("u", AUTO_INCREMENT), {"bad name": 1})
    with pytest.raises(WidetableError):
        t.put_row(("u", AUTO_INCREMENT), {"x": 1}, condition=widetable.EXPECT_EXIST)
    assert list(t.scan()) == []


def test_update_and_delete_by_returned_key(table):
    t = table(pk=PK)
    pk = t.put_row(("u", AUTO_INCREMENT), {"n": 1}).primary_key
    assert t.update_row(pk, increment={"n": 2}).increments == {"n": 3}
    t.delete_row(pk)
    assert t.get_row(pk) is None


def test_batch_write_row_assigns_values(db, table):
    t = table("log", pk=PK)
    results = db.batch_write_row(
        [("log", "put", ("u", AUTO_INCREMENT), {"i": i}) for i in range(5)]
        + [("log", "delete", ("u", AUTO_INCREMENT))]
    )
    assert all(r.ok for r in results[:5]) and not results[5].ok
    keys = [r.primary_key for r in results[:5]]
    assert [r.result.primary_key for r in results[:5]] == keys
    assert [k[1] for k in keys] == sorted({k[1] for k in keys})
    assert [r.primary_key for r in t.scan()] == keys


def test_unique_and_increasing_under_concurrent_writers(table):
    t = table(pk=PK)
    users = ["p0", "p1", "p2"]
    per_thread: list[list[tuple]] = [[] for _ in range(8)]
    errors: list[Exception] = []
    start = threading.Barrier(8)

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(500):
                pk = t.put_row((users[i % 3], AUTO_INCREMENT), {"w": n, "i": i}).primary_key
                per_thread[n].append(pk)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    every = [pk for keys in per_thread for pk in keys]
    assert len(set(every)) == 8 * 500
    for keys in per_thread:  # one thread's writes to one partition key come out increasing
        for user in users:
            mine = [s for u, s in keys if u == user]
            assert mine == sorted(mine)
    rows = list(t.scan())
    assert len(rows) == 8 * 500
    assert sorted(r.primary_key for r in rows) == sorted(every)


def test_no_value_reused_after_reopen(engine_name, tmp_path, monkeypatch):
    if engine_name == "memory":
        pytest.skip("a memory store does not survive reopening")
    # A stopped clock leaves the persisted counter as the only source of order.
    monkeypatch.setattr(autoinc.time, "time_ns", lambda: 1_000_000_000)
    path = tmp_path / "store"
    db = widetable.open(str(path), purge_interval=None)
    t = db.create_table("log", PK)
    first = [t.put_row(("u", AUTO_INCREMENT), {"i": i}).primary_key[1] for i in range(5)]
    assert first == [1_000_000 + i for i in range(5)]
    db.close()
    db = widetable.open(str(path), purge_interval=None)
    t = db.table("log")
    after = t.put_row(("u", AUTO_INCREMENT), {"i": 5}).primary_key[1]
    assert after == first[-1] + 1
    assert db.describe_table("log").auto_increment == "seq"
    db.close()


def test_drop_table_drops_its_counters(db, table):
    t = table("log", pk=PK)
    t.put_row(("u", AUTO_INCREMENT), {"i": 1})
    start, end = layout.auto_increment_range(t.schema.table_id)
    assert len(list(db._engine.scan(start, end))) == 1
    db.delete_table("log")
    assert list(db._engine.scan(start, end)) == []


def test_counter_key_pretty_prints(table):
    t = table(pk=PK)
    key = autoinc.counter_key(t, "u1")
    assert layout.pretty(key) == f'/AutoIncrement/{t.schema.table_id}/"u1"'


def test_no_local_transactions_on_auto_increment_tables(db, table):
    table("log", pk=PK)
    with pytest.raises(WidetableError) as err:
        db.start_local_transaction("log", "u")
    assert err.value.code == "OTSParameterInvalid"


def test_an_explicit_top_value_never_exhausts_the_counter(db, table):
    """A concrete value of 2**63-1 (or anything in the reserved range above the counter)
    is refused and changes nothing; a value just below the range leaves values to assign."""
    t = table(pk=PK)

    def batch_put(value: int) -> None:
        error = db.batch_write_row([(t.name, "put", ("u", value), {"x": 1})])[0].error
        if error is not None:
            raise error

    for write in (
        lambda v: t.put_row(("u", v), {"x": 1}),
        lambda v: t.update_row(("u", v), put={"x": 1}),
        batch_put,
    ):
        for value in (2**63 - 1, autoinc.RESERVED_START):
            with pytest.raises(WidetableError) as err:
                write(value)
            assert err.value.code == "OTSParameterInvalid"
            assert str(value) in err.value.message and "reserved" in err.value.message
    assert list(t.scan()) == []
    assert db._engine.get(autoinc.counter_key(t, "u")) is None
    t.put_row(("u", autoinc.RESERVED_START - 1), {"x": 1})
    assigned = [t.put_row(("u", AUTO_INCREMENT), {"x": 2}).primary_key[1] for _ in range(3)]
    assert assigned == [autoinc.RESERVED_START + i for i in range(3)]
    # An assigned value in the range, written back, is a row like any other.
    t.put_row(("u", assigned[0]), {"x": 3})
    t.update_row(("u", assigned[1]), put={"x": 4})
    assert t.get_row(("u", assigned[0]))["x"] == 3 and t.get_row(("u", assigned[1]))["x"] == 4


def test_counter_cache_is_bounded(db, table, monkeypatch):
    monkeypatch.setattr(autoinc, "CACHE_LIMIT", 50)
    t = table(pk=PK)
    first = {}
    for i in range(200):
        first[f"u{i}"] = t.put_row((f"u{i}", AUTO_INCREMENT), {"x": i}).primary_key[1]
    assert len(db._autoinc._last) <= 50
    # Evicted counters come back from the engine: values still only go up.
    monkeypatch.setattr(autoinc.time, "time_ns", lambda: 0)
    for user in ("u0", "u199"):
        assert t.put_row((user, AUTO_INCREMENT), {"x": 0}).primary_key[1] == first[user] + 1
