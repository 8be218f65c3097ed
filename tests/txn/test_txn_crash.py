"""Crash tests: SIGKILL a process mid-transaction and mid auto-increment; nothing is torn or reused.

The child commits transactions of 50 rows each and prints each acknowledged
commit, interleaved with auto-increment puts whose values it prints. After a
SIGKILL at a random moment the parent reopens the store and checks that every
transaction is all there or not at all, every acknowledged one is there, and a
new auto-increment value is above every value handed out before the crash.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import widetable
from widetable import AUTO_INCREMENT

pytestmark = pytest.mark.slow

ROWS = 50
CHILD = textwrap.dedent(
    """
    import sys
    import widetable
    from widetable import AUTO_INCREMENT, WidetableError

    db = widetable.open(sys.argv[1], purge_interval=None)
    base = int(sys.argv[2])
    try:
        db.create_table("t", [("p", "STRING"), ("r", "INTEGER")])
        db.create_table("log", [("p", "STRING"), ("seq", "INTEGER", AUTO_INCREMENT)])
    except WidetableError:
        pass
    log = db.table("log")
    print("ready", flush=True)
    gen = base
    while True:
        gen += 1
        with db.start_local_transaction("t", f"g{gen}") as txn:
            for r in range(__ROWS__):
                txn.put_row((f"g{gen}", r), {"gen": gen})
        print(f"txn {gen}", flush=True)
        seq = log.put_row(("p", AUTO_INCREMENT), {"gen": gen}).primary_key[1]
        print(f"seq {seq}", flush=True)
    """
).replace("__ROWS__", str(ROWS))


def test_sigkill_never_tears_a_transaction_or_reuses_a_value(tmp_path):
    path = str(tmp_path / "store")
    rng = random.Random(7)
    acked_txns: set[int] = set()
    max_seq = 0
    base = 0
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, str(base)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        stop_at = time.monotonic() + rng.uniform(0.2, 0.6)
        while time.monotonic() < stop_at:
            line = child.stdout.readline().split()
            if line[0] == "txn":
                acked_txns.add(int(line[1]))
            else:
                max_seq = max(max_seq, int(line[1]))
        child.send_signal(signal.SIGKILL)
        child.wait()
        db = widetable.open(path, purge_interval=None)
        counts: dict[int, int] = {}
        for row in db.table("t").scan():
            gen = int(row.primary_key[0][1:])
            assert row["gen"] == gen
            counts[gen] = counts.get(gen, 0) + 1
        assert all(n == ROWS for n in counts.values()), counts
        assert acked_txns <= set(counts)
        seqs = [r.primary_key[1] for r in db.table("log").scan()]
        assert len(seqs) == len(set(seqs)) and max(seqs, default=0) >= max_seq
        fresh = db.table("log").put_row(("p", AUTO_INCREMENT), {"gen": -1}).primary_key[1]
        assert fresh > max(seqs, default=0)
        db.close()
        base = max(counts, default=base) + 1
