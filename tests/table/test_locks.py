"""RowLocks: one key's stripe, key sets in stripe order, try_acquire without blocking, barrier."""

from __future__ import annotations

import random
import threading
import time

import pytest

from widetable.table.locks import RowLocks


def test_a_key_always_maps_to_one_stripe() -> None:
    locks = RowLocks(16)
    assert locks.lock(b"row-a") is locks.lock(b"row-a")
    assert len(locks) == 16 and locks.mask == 15
    with pytest.raises(ValueError, match="power of two"):
        RowLocks(12)


def test_stripes_of_a_key_set_are_distinct_and_in_stripe_order() -> None:
    locks = RowLocks(8)
    keys = [bytes([i]) * 3 for i in range(40)]
    held = locks.stripes_of(keys)
    order = [locks.stripes.index(lock) for lock in held]
    assert order == sorted(set(order))


def test_try_acquire_never_blocks_and_holds_nothing_when_it_fails() -> None:
    locks = RowLocks(64)
    keys = [b"k%d" % i for i in range(30)]
    busy = locks.lock(keys[7])
    taken = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with busy:
            taken.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert taken.wait(5)
        start = time.monotonic()
        assert locks.try_acquire(keys) is None
        assert time.monotonic() - start < 0.5
        others = [lock for lock in locks.stripes_of(keys) if lock is not busy]
        assert not any(lock.locked() for lock in others)  # what it took, it gave back
    finally:
        release.set()
        t.join()
    held = locks.try_acquire(keys)
    assert held is not None and all(lock.locked() for lock in held)
    locks.release(held)
    assert not any(lock.locked() for lock in locks.stripes)


def test_overlapping_key_sets_taken_from_many_threads_never_deadlock() -> None:
    locks = RowLocks(32)
    keys = [b"row%d" % i for i in range(200)]
    counter = [0]
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(300):
                chosen = rng.sample(keys, 20)
                rng.shuffle(chosen)  # callers pass keys in any order
                with locks.holding(chosen):
                    counter[0] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    assert not errors and counter[0] == 6 * 300


def test_barrier_waits_for_a_writer_holding_a_stripe() -> None:
    locks = RowLocks(8)
    inside = threading.Event()
    done: list[str] = []

    def writer() -> None:
        with locks.lock(b"x"):
            inside.set()
            time.sleep(0.2)
            done.append("write")

    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(5)
    locks.barrier()
    done.append("barrier")
    t.join()
    assert done == ["write", "barrier"]
