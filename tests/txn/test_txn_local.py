"""Local transactions: buffering, read committed, atomic commit, abort, locking, timeout."""

from __future__ import annotations

import threading
import time

import pytest

import widetable
from widetable import EXPECT_EXIST, EXPECT_NOT_EXIST, INF_MAX, INF_MIN, WidetableError

PK = [("user", "STRING"), ("item", "STRING")]


def code_of(call) -> str:
    with pytest.raises(WidetableError) as err:
        call()
    return err.value.code


@pytest.fixture
def t(table):
    t = table("acct", pk=PK)
    t.put_row(("u1", "balance"), {"v": 100})
    t.put_row(("u2", "balance"), {"v": 7})
    return t


def test_writes_are_invisible_to_others_until_commit(db, t):
    txn = db.start_local_transaction("acct", "u1")
    assert txn.update_row(("u1", "balance"), increment={"v": -30}).increments == {"v": 70}
    txn.put_row(("u1", "order1"), {"amount": 30})
    # the transaction reads its own writes
    assert txn.get_row(("u1", "balance"))["v"] == 70
    assert [r.primary_key for r in txn.scan()] == [("u1", "balance"), ("u1", "order1")]
    page = txn.get_range(("u1", INF_MIN), ("u1", INF_MAX))
    assert [r.primary_key[1] for r in page] == ["balance", "order1"]
    back = txn.get_range(("u1", INF_MAX), ("u1", INF_MIN), direction="backward", limit=1)
    assert [r.primary_key[1] for r in back] == ["order1"]
    assert back.next_start_primary_key == ("u1", "balance")
    # everyone else reads committed data, without waiting
    assert t.get_row(("u1", "balance"))["v"] == 100
    assert t.get_row(("u1", "order1")) is None
    assert [r.primary_key for r in t.scan()] == [("u1", "balance"), ("u2", "balance")]
    txn.commit()
    assert txn.state == "committed"
    assert t.get_row(("u1", "balance"))["v"] == 70
    assert t.get_row(("u1", "order1"))["amount"] == 30


def test_conditions_and_increments_see_own_writes(db, t):
    txn = db.start_local_transaction("acct", "u1")
    txn.put_row(("u1", "new"), {"n": 1}, condition=EXPECT_NOT_EXIST)
    assert code_of(lambda: txn.put_row(("u1", "new"), {"n": 2}, condition=EXPECT_NOT_EXIST)) == (
        "OTSConditionCheckFail"
    )
    assert txn.update_row(("u1", "new"), increment={"n": 5}).increments == {"n": 6}
    txn.delete_row(("u1", "balance"), condition=EXPECT_EXIST)
    assert txn.get_row(("u1", "balance")) is None
    assert code_of(lambda: txn.delete_row(("u1", "balance"), condition=EXPECT_EXIST)) == (
        "OTSConditionCheckFail"
    )
    assert [r.primary_key[1] for r in txn.scan()] == ["new"]
    assert [r.primary_key[1] for r in txn.scan(direction="backward")] == ["new"]
    txn.commit()
    assert t.get_row(("u1", "balance")) is None
    assert t.get_row(("u1", "new"))["n"] == 6


def test_scan_of_a_one_column_key_is_its_row(db, table):
    """With a one-column key the partition is one row: scan returns it (its range would
    have equal bounds, which get_range refuses)."""
    one = table("one", pk=[("k", "STRING")])
    one.put_row("u1", {"n": 1})
    txn = db.start_local_transaction("one", "u1")
    assert [r["n"] for r in txn.scan()] == [1]
    txn.update_row("u1", increment={"n": 1})
    assert [r["n"] for r in txn.scan(direction="backward", columns=["n"])] == [2]
    txn.delete_row("u1")
    assert list(txn.scan()) == []
    txn.abort()


def test_abort_discards(db, t):
    txn = db.start_local_transaction("acct", "u1")
    txn.put_row(("u1", "x"), {"a": 1})
    txn.delete_row(("u1", "balance"))
    txn.abort()
    assert txn.state == "aborted"
    assert t.get_row(("u1", "x")) is None and t.get_row(("u1", "balance"))["v"] == 100
    t.put_row(("u1", "after"), {"a": 1})  # the lock is gone


def test_context_manager_commits_or_aborts(db, t):
    with db.start_local_transaction("acct", "u1") as txn:
        txn.put_row(("u1", "a"), {"x": 1})
    assert t.get_row(("u1", "a"))["x"] == 1
    with pytest.raises(RuntimeError), db.start_local_transaction("acct", "u1") as txn:
        txn.put_row(("u1", "b"), {"x": 1})
        raise RuntimeError("boom")
    assert txn.state == "aborted" and t.get_row(("u1", "b")) is None


def test_ended_transactions_refuse_operations(db, t):
    txn = db.start_local_transaction("acct", "u1")
    txn.commit()
    for call in (txn.commit, txn.abort, lambda: txn.get_row(("u1", "balance")),
                 lambda: txn.put_row(("u1", "z"), {"a": 1})):
        with pytest.raises(WidetableError) as err:
            call()
        assert err.value.code == "OTSSessionNotExist"
        assert txn.transaction_id in err.value.message and "committed" in err.value.message


def test_by_id(db, t):
    txn = db.start_local_transaction("acct", "u1")
    assert db.transaction(txn.transaction_id) is txn
    txn.put_row(("u1", "a"), {"x": 1})
    db.commit_transaction(txn.transaction_id)
    assert t.get_row(("u1", "a"))["x"] == 1
    other = db.start_local_transaction("acct", "u1")
    other.put_row(("u1", "b"), {"x": 1})
    db.abort_transaction(other.transaction_id)
    assert t.get_row(("u1", "b")) is None
    assert code_of(lambda: db.commit_transaction(txn.transaction_id)) == "OTSSessionNotExist"
    assert code_of(lambda: db.abort_transaction("0" * 32)) == "OTSSessionNotExist"  # unknown
    # not a transaction id at all: the service's OTSParameterInvalid "TransactionID is invalid."
    for call in (lambda: db.abort_transaction("nope"), lambda: db.transaction(42)):
        assert code_of(call) == "OTSParameterInvalid"


def test_operations_outside_the_partition_key_are_rejected(db, t):
    txn = db.start_local_transaction("acct", "u1")
    for call in (
        lambda: txn.get_row(("u2", "balance")),
        lambda: txn.put_row(("u2", "x"), {"a": 1}),
        lambda: txn.update_row({"user": "u2", "item": "x"}, put={"a": 1}),
        lambda: txn.delete_row(["u2", "balance"]),
        lambda: txn.get_range(("u1", INF_MIN), ("u2", INF_MAX)),
        lambda: txn.get_range((INF_MIN, INF_MIN), ("u1", INF_MAX)),
    ):
        with pytest.raises(WidetableError) as err:
            call()
        assert err.value.code == "OTSParameterInvalid"
        assert txn.transaction_id in err.value.message
        assert "'u1'" in err.value.message
    txn.commit()
    assert t.get_row(("u2", "balance"))["v"] == 7


def test_bad_arguments(db, t, table):
    assert code_of(lambda: db.start_local_transaction("nope", "u1")) == "OTSObjectNotExist"
    assert code_of(lambda: db.start_local_transaction("acct", 5)) == "OTSInvalidPK"
    assert code_of(lambda: db.start_local_transaction("acct", "u1", timeout=0)) == "OTSParameterInvalid"
    assert not db._txn_locks


def test_other_writers_conflict(db, t):
    db._txns.conflict_wait = 0.01
    txn = db.start_local_transaction("acct", "u1")
    for call in (
        lambda: t.put_row(("u1", "x"), {"a": 1}),
        lambda: t.update_row(("u1", "balance"), increment={"v": 1}),
        lambda: t.delete_row(("u1", "balance")),
        lambda: db.start_local_transaction("acct", "u1"),
    ):
        with pytest.raises(WidetableError) as err:
            call()
        assert err.value.code == "OTSRowOperationConflict"
        assert txn.transaction_id in err.value.message
    results = db.batch_write_row([
        ("acct", "put", ("u1", "x"), {"a": 1}),
        ("acct", "put", ("u2", "x"), {"a": 1}),
        ("acct", "update", ("u1", "balance"), {"put": {"a": 1}}),
    ])
    assert [r.error.code if r.error else None for r in results] == [
        "OTSRowOperationConflict", None, "OTSRowOperationConflict"
    ]
    # other partition keys, other tables and reads go on
    t.put_row(("u2", "y"), {"a": 1})
    other = db.start_local_transaction("acct", "u2")
    other.abort()
    assert t.get_row(("u1", "balance"))["v"] == 100
    txn.commit()
    t.put_row(("u1", "x"), {"a": 1})
    assert t.get_row(("u1", "x"))["a"] == 1


def test_writer_waits_for_a_short_transaction(db, t):
    db._txns.conflict_wait = 5.0
    txn = db.start_local_transaction("acct", "u1")
    txn.put_row(("u1", "balance"), {"v": 1})
    done: list[object] = []
    writer = threading.Thread(
        target=lambda: done.append(t.update_row(("u1", "balance"), increment={"v": 10}))
    )
    writer.start()
    time.sleep(0.1)
    assert not done  # still waiting
    txn.commit()
    writer.join(5)
    assert done and done[0].increments == {"v": 11}


def test_idle_timeout_aborts(db, t):
    db._txns.conflict_wait = 0.01
    txn = db.start_local_transaction("acct", "u1", timeout=1.5)
    txn.put_row(("u1", "x"), {"a": 1})
    for _ in range(4):  # activity keeps it alive past its timeout (with a second to spare:
        time.sleep(0.5)  # a loaded machine may pause this process that long)
        txn.get_row(("u1", "x"))
    deadline = time.monotonic() + 6
    while db._txn_locks and time.monotonic() < deadline:  # the reaper aborts it unprompted
        time.sleep(0.02)
    assert not db._txn_locks
    assert txn.state == "timed out"
    with pytest.raises(WidetableError) as err:
        txn.commit()
    assert err.value.code == "OTSSessionNotExist" and "idle" in err.value.message
    assert t.get_row(("u1", "x")) is None
    t.put_row(("u1", "y"), {"a": 1})
    assert code_of(lambda: db.commit_transaction(txn.transaction_id)) == "OTSSessionNotExist"


def test_writer_takes_over_an_expired_lock(db, t):
    db._txns.conflict_wait = 2.0
    txn = db.start_local_transaction("acct", "u1", timeout=0.2)
    start = time.monotonic()
    t.put_row(("u1", "x"), {"a": 1})  # waits for the timeout, then writes
    assert time.monotonic() - start < 1.5
    assert txn.state == "timed out"


def test_close_aborts_open_transactions(engine_name, tmp_path):
    kwargs = {"engine": "memory"} if engine_name == "memory" else {}
    db = widetable.open(str(tmp_path / "s") if not kwargs else ":memory:", purge_interval=None, **kwargs)
    db.create_table("acct", PK)
    txn = db.start_local_transaction("acct", "u1")
    txn.put_row(("u1", "x"), {"a": 1})
    db.close()
    assert txn.state == "aborted"
    assert code_of(txn.commit) == "OTSSessionNotExist"


def test_commit_after_drop_fails_and_aborts(db, t):
    txn = db.start_local_transaction("acct", "u1")
    txn.put_row(("u1", "x"), {"a": 1})
    db.delete_table("acct")
    assert code_of(txn.commit) == "OTSObjectNotExist"
    assert txn.state == "aborted" and not db._txn_locks


def test_commit_is_atomic_for_concurrent_readers(db, t):
    seen: set[int] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.add(len(t.get_range(("u1", "r"), ("u1", "s")).rows))

    th = threading.Thread(target=reader)
    th.start()
    try:
        for round_ in range(20):
            with db.start_local_transaction("acct", "u1") as txn:
                for j in range(50):
                    if round_ % 2 == 0:
                        txn.put_row(("u1", f"r{j:02d}"), {"round": round_})
                    else:
                        txn.delete_row(("u1", f"r{j:02d}"))
    finally:
        stop.set()
        th.join()
    assert seen <= {0, 50}


def test_no_lost_updates_between_transactions_and_plain_writers(db, t):
    """Transactions read-modify-write a counter while plain increments race them."""
    db._txns.conflict_wait = 0.001
    done = {"txn": 0, "plain": 0}
    lock = threading.Lock()

    def txn_worker() -> None:
        n = 0
        while n < 40:
            try:
                with db.start_local_transaction("acct", "u1") as txn:
                    v = txn.get_row(("u1", "balance"))["v"]
                    txn.put_row(("u1", "balance"), {"v": v + 1})
                n += 1
            except WidetableError as exc:
                assert exc.code == "OTSRowOperationConflict"
        with lock:
            done["txn"] += n

    def plain_worker() -> None:
        n = 0
        while n < 200:
            try:
                t.update_row(("u1", "balance"), increment={"v": 1})
                n += 1
            except WidetableError as exc:
                assert exc.code == "OTSRowOperationConflict"
        with lock:
            done["plain"] += n

    threads = [threading.Thread(target=txn_worker) for _ in range(3)]
    threads += [threading.Thread(target=plain_worker) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert done == {"txn": 120, "plain": 600}
    assert t.get_row(("u1", "balance"))["v"] == 100 + 120 + 600


def test_close_waits_for_a_commit_in_flight(db):
    """TransactionRegistry.close() ends each transaction under its lock: a commit racing it
    writes its rows together with their local-index entries (and change records), never
    rows alone."""
    db.create_table("t", PK, defined_columns=[("c", "STRING")])
    db.create_index("t", "l", ["user", "c"], index_type="LOCAL", progress=False)
    txn = db.start_local_transaction("t", "u1")
    txn.put_row(("u1", "a"), {"c": "x"})
    key = db.table("t")._key(("u1", "a"))[1]
    stripe = db._row_locks[hash(key) & (len(db._row_locks) - 1)]
    errors: list[BaseException] = []

    def run(call):
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    stripe.acquire()  # the commit builds its batch, then waits here for the row's lock
    try:
        committer = threading.Thread(target=run, args=(txn.commit,))
        committer.start()
        time.sleep(0.2)
        closer = threading.Thread(target=run, args=(db._txns.close,))
        closer.start()
        time.sleep(0.2)
    finally:
        stripe.release()
    committer.join(10)
    closer.join(10)
    assert not errors
    assert txn.state == "committed"
    assert db.table("t").get_row(("u1", "a"))["c"] == "x"
    assert [r.primary_key for r in db.table("l").scan()] == [("u1", "x", "a")]
