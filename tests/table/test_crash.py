"""Crash tests: SIGKILL a writer at a random moment; every acknowledged write survives, no row is torn.

A child process writes to a RocksDB store and prints one line after each write
returns (an acknowledgement). The parent reads those lines, kills the child with
SIGKILL at a random point, reopens the store and checks:

* every acknowledged write is there (a row's generation is at least the acked one);
* no row is torn: every column of a row carries the same generation;
* the two counters bumped by one update_row are equal.

Several rounds run against the same store, so recovery after recovery is checked too.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import widetable
from tests.crashkit import kill_after

pytestmark = pytest.mark.slow

COLS = 5
CHILD = textwrap.dedent(
    """
    import sys
    import widetable
    from widetable import WidetableError

    path, sync, base = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    db = widetable.open(path, sync=sync, purge_interval=None)
    try:
        t = db.create_table("crash", [("kind", "STRING"), ("i", "INTEGER")])
    except WidetableError:
        t = db.table("crash")
    cols = %d
    print("ready", flush=True)
    gen = base
    while True:
        gen += 1
        op = gen %% 3
        if op == 0:
            i = gen %% 50
            t.put_row(("p", i), {f"c{c}": gen for c in range(cols)})
            print(f"put {i} {gen}", flush=True)
        elif op == 1:
            r = t.update_row(("c", 0), put={"g": gen}, increment={"a": 1, "b": 1})
            print(f"inc {r.increments['a']} {gen}", flush=True)
        else:
            rows = [(gen * 3 + j) %% 40 for j in range(10)]
            res = db.batch_write_row(
                [("crash", "put", ("b", i), {f"c{c}": gen for c in range(cols)}) for i in rows]
            )
            assert all(x.ok for x in res), res
            print("batch " + ",".join(map(str, rows)) + f" {gen}", flush=True)
    """
    % COLS
)


class Acked:
    """What the parent knows was acknowledged, across rounds."""

    def __init__(self) -> None:
        self.rows: dict[tuple, int] = {}  # (kind, i) -> newest acked generation
        self.counter = 0

    def record(self, line: str) -> None:
        kind, what, gen = line.split()
        if kind == "put":
            self.rows[("p", int(what))] = int(gen)
        elif kind == "inc":
            self.counter = int(what)
        elif kind == "batch":
            for i in what.split(","):
                self.rows[("b", int(i))] = int(gen)
        else:
            raise AssertionError(f"unexpected line {line!r}")


def run_child_and_kill(path: str, sync: bool, base: int, acked: Acked, rng: random.Random) -> int:
    script = os.path.join(os.path.dirname(path), "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    lines = rng.randint(5, 300)
    pause = rng.random() * 0.01 if rng.random() < 0.5 else 0.0
    return kill_after(script, [path, "1" if sync else "0", str(base)], lines, acked.record, pause)


def check_store(path: str, acked: Acked) -> None:
    with widetable.open(path, purge_interval=None) as db:
        t = db.table("crash")
        for key, gen in acked.rows.items():
            row = t.get_row(key)
            assert row is not None, f"acknowledged row {key} (gen {gen}) is missing"
            got = set(row.columns.values())
            assert len(row.columns) == COLS and len(got) == 1, f"torn row {key}: {row.columns}"
            assert got.pop() >= gen, f"row {key} lost acknowledged generation {gen}: {row.columns}"
        for row in t.scan():
            assert len(row.columns) != 0
            if row.primary_key[0] in ("p", "b"):
                assert len(set(row.columns.values())) == 1, f"torn row {row.primary_key}"
        counter = t.get_row(("c", 0))
        if acked.counter:
            assert counter is not None, "acknowledged increments are missing"
        if counter is not None:
            assert counter["a"] == counter["b"], f"half-applied update: {counter.columns}"
            assert acked.counter <= counter["a"] <= acked.counter + 1


@pytest.mark.parametrize("sync", [False, True], ids=["nosync", "sync"])
def test_sigkill_keeps_every_acknowledged_write(tmp_path, sync) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"crash test seed {seed}")  # shown by pytest on failure
    rng = random.Random(seed)
    path = str(tmp_path / "store")
    acked = Acked()
    total = 0
    for round_ in range(1, 5):
        total += run_child_and_kill(path, sync, round_ * 1_000_000, acked, rng)
        check_store(path, acked)
    assert total > 0 and acked.rows
