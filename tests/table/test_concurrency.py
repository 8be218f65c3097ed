"""Threads against one table: conditional writes, compare-and-set, increments, batches vs ranges.

A row's writes hold that row's lock from read to write, so conditions and
increments are linearizable. These tests count: exactly one winner per row, an
exact final counter, an exact sum, and no torn rows under concurrent range reads.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from widetable import (
    EXPECT_EXIST,
    EXPECT_NOT_EXIST,
    INF_MAX,
    INF_MIN,
    Condition,
    WidetableError,
    col,
)

THREADS = 8


def run_threads(target, n: int = THREADS, args=()) -> None:
    """Start ``n`` threads at once on ``target(i, *args)``; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            target(i, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]


def test_expect_not_exist_has_exactly_one_winner_per_row(table) -> None:
    t = table(pk=[("k", "INTEGER")])
    rows = 200
    wins: Counter = Counter()
    lock = threading.Lock()

    def contend(i: int) -> None:
        for r in range(rows):
            try:
                t.put_row(r, {"owner": i}, condition=EXPECT_NOT_EXIST)
            except WidetableError as exc:
                assert exc.code == "OTSConditionCheckFail"
                continue
            with lock:
                wins[(r, i)] += 1

    run_threads(contend)
    per_row = Counter(r for r, _ in wins)
    assert all(per_row[r] == 1 for r in range(rows)), per_row
    for (r, i) in wins:
        assert t.get_row(r)["owner"] == i


def test_update_row_expect_not_exist_one_winner(table) -> None:
    t = table()
    winners: list[int] = []

    def contend(i: int) -> None:
        try:
            t.update_row("only", put={"by": i}, increment={"n": 1}, condition=EXPECT_NOT_EXIST)
            winners.append(i)
        except WidetableError as exc:
            assert exc.code == "OTSConditionCheckFail"

    run_threads(contend, 16)
    assert len(winners) == 1
    row = t.get_row("only")
    assert row["by"] == winners[0] and row["n"] == 1


def test_compare_and_set_counter_is_exact(table) -> None:
    t = table()
    t.put_row("c", {"n": 0})
    per_thread = 40

    def bump(i: int) -> None:
        done = 0
        while done < per_thread:
            n = t.get_row("c")["n"]
            try:
                t.update_row("c", put={"n": n + 1},
                             condition=Condition(EXPECT_EXIST, col("n").eq(n, pass_if_missing=False)))
                done += 1
            except WidetableError as exc:
                assert exc.code == "OTSConditionCheckFail"

    run_threads(bump)
    assert t.get_row("c")["n"] == THREADS * per_thread


def test_compare_and_set_with_put_row(table) -> None:
    t = table()
    t.put_row("c", {"n": 0, "log": ""})
    per_thread = 25

    def append(i: int) -> None:
        done = 0
        while done < per_thread:
            row = t.get_row("c")
            n, log = row["n"], row["log"]
            try:
                t.put_row("c", {"n": n + 1, "log": log + chr(65 + i)},
                          condition=Condition(EXPECT_EXIST, col("n") == n))
                done += 1
            except WidetableError as exc:
                assert exc.code == "OTSConditionCheckFail"

    run_threads(append)
    row = t.get_row("c")
    assert row["n"] == THREADS * per_thread
    assert Counter(row["log"]) == {chr(65 + i): per_thread for i in range(THREADS)}


def test_concurrent_increments_sum_exactly(table, db) -> None:
    t = table("inc")
    per_thread = 200
    seen: list[int] = []
    lock = threading.Lock()

    def inc(i: int) -> None:
        mine = []
        for j in range(per_thread):
            if j % 10 == 0:
                res = db.batch_write_row([("inc", "update", "hot", {"increment": {"n": 1, "m": i}})])
                mine.append(res[0].result.increments["n"])
            else:
                mine.append(t.update_row("hot", increment={"n": 1, "m": i}).increments["n"])
        with lock:
            seen.extend(mine)

    run_threads(inc)
    total = THREADS * per_thread
    row = t.get_row("hot")
    assert row["n"] == total
    assert row["m"] == per_thread * sum(range(THREADS))
    # Linearizable: every increment saw a distinct value, and together they are 1..total.
    assert sorted(seen) == list(range(1, total + 1))


def test_increments_on_many_rows_do_not_interfere(table) -> None:
    t = table(pk=[("k", "INTEGER")])

    def inc(i: int) -> None:
        for j in range(300):
            t.update_row(j % 30, increment={"n": 1})

    run_threads(inc)
    assert [r["n"] for r in t.scan()] == [THREADS * 10] * 30


def test_batch_writes_and_range_reads_never_see_torn_rows(table, db) -> None:
    t = table("wide", pk=[("k", "INTEGER")])
    rows, cols, writers = 60, 8, 3
    done = threading.Barrier(writers)
    finished = threading.Event()
    problems: list[str] = []

    def check(r, where: str) -> bool:
        if len(r.columns) != cols or len(set(r.columns.values())) != 1:
            problems.append(f"torn row {r.primary_key} in {where}: {r.columns}")
            return False
        return True

    def writer(i: int) -> None:
        for gen in range(1, 61):
            stamp = i * 1000 + gen
            lo = (gen * 7) % rows
            batch = [("wide", "put", ((lo + j) % rows,), {f"c{c}": stamp for c in range(cols)})
                     for j in range(20)]
            assert all(r.ok for r in db.batch_write_row(batch))
            t.update_row((gen % rows,), put={f"c{c}": stamp for c in range(cols)})
        if done.wait() == 0:
            finished.set()

    def reader(i: int) -> None:
        n = 0
        while not finished.is_set() or n < 20:
            n += 1
            page = t.get_range(INF_MIN, INF_MAX) if n % 2 else t.get_range(
                INF_MAX, INF_MIN, "backward")
            if not all(check(r, "get_range") for r in page):
                return
            if not all(check(r, "scan") for r in t.scan(page_size=7)):
                return

    run_threads(lambda i: writer(i) if i < writers else reader(i))
    assert problems == []
    assert len(list(t.scan())) == rows


@pytest.mark.parametrize("engine_name", ["rocksdb"], indirect=True)
def test_purge_runs_alongside_writers(table, db, now) -> None:
    # The counters must not expire meanwhile: a TTL well past a loaded machine's pauses.
    t = table("p", pk=[("k", "INTEGER")], ttl=10, max_versions=2)

    def work(i: int) -> None:
        for j in range(100):
            if i == 0:
                db.purge_expired("p")
            else:
                t.update_row((j % 10,), put={"old": (1, now - 100_000)}, increment={"n": 1})

    run_threads(work, 4)
    assert sum(r["n"] for r in t.scan()) == 300
    assert all("old" not in r for r in t.scan())
