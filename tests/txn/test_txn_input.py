"""Edges of transactions, batches and auto-increment: a concrete key below the counter after
reopening, bytes-like partition keys while a transaction is open, a row named twice in a
batch of an auto-increment table, and transaction timeouts out of range."""

from __future__ import annotations

import time

import pytest

from widetable import AUTO_INCREMENT, WidetableError

AUTO_PK = [("chat", "STRING"), ("seq", "INTEGER", AUTO_INCREMENT)]


def test_a_concrete_key_below_the_counter_never_lowers_it(open_db, engine_name):
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("m", AUTO_PK)
    ahead = time.time_ns() // 1000 + 10**10  # a restored row, hours ahead of the clock
    db.table("m").put_row(("c", ahead), {"text": "restored"})  # raises the counter to it
    first = db.table("m").put_row(("c", AUTO_INCREMENT), {"text": "first"}).primary_key
    assert first == ("c", ahead + 1)
    db.close()
    db = open_db()  # nothing cached: the counter is read from the store
    m = db.table("m")
    m.put_row(("c", ahead), {"text": "restored again"})  # below the counter
    second = m.put_row(("c", AUTO_INCREMENT), {"text": "second"}).primary_key
    assert second == ("c", ahead + 2)
    assert m.get_row(first)["text"] == "first"


@pytest.mark.parametrize("make", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_bytes_like_partition_keys_while_a_transaction_is_open(db, make):
    db.create_table("b", [("k", "BINARY"), ("n", "INTEGER")])
    db.create_table("other", [("k", "STRING")])
    t = db.table("b")
    with db.start_local_transaction("other", "x"):  # on another table
        t.put_row((make(b"x"), 1), {"v": 1})
        t.update_row((make(b"x"), 1), put={"v": 2})
        results = db.batch_write_row([("b", "put", (make(b"y"), 1), {"v": 1}),
                                      ("b", "update", (make(b"z"), 1), {"put": {"v": 1}})])
        assert all(r.ok for r in results)
        t.delete_row((make(b"x"), 1))
    with db.start_local_transaction("b", make(b"y")):  # one on that very key blocks writers
        with pytest.raises(WidetableError) as err:
            t.put_row((make(b"y"), 2), {"v": 1})
        assert err.value.code == "OTSRowOperationConflict"
    assert [r.primary_key for r in t.scan()] == [(b"y", 1), (b"z", 1)]


@pytest.mark.parametrize("ops", [("put", "put"), ("update", "delete")])
def test_a_row_named_twice_rejects_a_batch_of_an_auto_increment_table(db, ops):
    db.create_table("m", AUTO_PK)
    payload = {"put": {"v": 1}, "update": {"put": {"v": 2}}, "delete": None}
    with pytest.raises(WidetableError, match="names row .* twice") as err:
        db.batch_write_row([("m", op, ("c", 5), payload[op]) for op in ops])
    assert err.value.code == "OTSParameterInvalid"
    assert db.table("m").get_row(("c", 5)) is None
    results = db.batch_write_row([("m", "put", ("c", AUTO_INCREMENT), {"v": i}) for i in range(3)])
    assert len({r.primary_key for r in results}) == 3  # assigned rows are never the same row


@pytest.mark.parametrize("timeout", [1e10, float("inf"), float("nan"), 0, -1, "60"])
def test_transaction_timeouts_out_of_range_are_refused(db, timeout):
    db.create_table("t", [("k", "STRING")])
    with pytest.raises(WidetableError, match="timeout must be seconds") as err:
        db.start_local_transaction("t", "a", timeout=timeout)
    assert err.value.code == "OTSParameterInvalid"
    db.table("t").put_row(("a",), {"v": 1})  # nothing was left locked
    with db.start_local_transaction("t", "a", timeout=86_400) as txn:
        txn.put_row(("a",), {"v": 2})
    assert db.table("t").get_row(("a",))["v"] == 2
