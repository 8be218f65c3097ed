"""Random workloads against indexes: a local index matches the table at every step; a
global one converges once writes stop, also after SIGKILL in the middle of applying."""

from __future__ import annotations

import os
import random
import textwrap
import time

import pytest

import widetable
from tests.crashkit import kill_after

PK = [("k", "STRING"), ("s", "INTEGER")]
DEFINED = [("c", "STRING"), ("n", "INTEGER")]


def random_op(db, t, rng: random.Random) -> None:
    k, s = f"k{rng.randrange(5)}", rng.randrange(30)
    op = rng.random()
    if op < 0.35:
        t.put_row((k, s), {"c": f"c{rng.randrange(6)}", "n": rng.randrange(100)})
    elif op < 0.55:
        t.update_row((k, s), put={"c": f"c{rng.randrange(6)}"})
    elif op < 0.65:
        t.update_row((k, s), increment={"n": 1})
    elif op < 0.75:
        t.update_row((k, s), delete_column=["c"])
    elif op < 0.9:
        t.delete_row((k, s))
    else:
        db.batch_write_row([
            ("t", "put", (k, (s + j) % 30), {"c": f"c{rng.randrange(6)}", "n": j}) for j in range(3)
        ])


def test_random_workload_local_always_global_eventually(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    t = db.table("t")
    db.create_index("t", "loc", primary_key=["k", "c"], defined_columns=["n"], index_type="LOCAL")
    db.create_index("t", "glob", primary_key=["c"], defined_columns=["n"])
    rng = random.Random(1234)
    for step in range(600):
        random_op(db, t, rng)
        if step % 10 == 0:
            report = db.verify_index("t", "loc")
            assert report.ok, (step, report)
    assert db.wait_for_indexes(30)
    assert db.verify_index("t", "glob").ok
    assert db.describe_table("t").indexes[1].lag_ms == 0


def test_trim_keeps_records_an_index_has_not_applied(db):
    db.create_table("t", PK, defined_columns=DEFINED, stream_retention=1)
    db.create_index("t", "glob", primary_key=["c"])
    indexer = db._indexer
    indexer.stop()  # nothing applies from here on
    t = db.table("t")
    for i in range(5):
        t.put_row(("a", i), {"c": "x"})
    time.sleep(1.1)
    assert db.trim_change_log() == 0
    assert db.describe_table("t").indexes[0].behind_retention
    assert indexer.run_once() == 5
    assert db.verify_index("t", "glob").ok
    assert db.trim_change_log() == 5


CHILD = textwrap.dedent(
    """
    import random, sys
    import widetable
    from widetable import WidetableError
    path, seed = sys.argv[1], int(sys.argv[2])
    db = widetable.open(path, purge_interval=None)
    try:
        db.create_table("t", [("k", "STRING"), ("s", "INTEGER")],
                        defined_columns=[("c", "STRING"), ("n", "INTEGER")])
        db.create_index("t", "loc", primary_key=["k", "c"], defined_columns=["n"], index_type="LOCAL")
        db.create_index("t", "glob", primary_key=["c"], defined_columns=["n"])
    except WidetableError:
        pass
    t = db.table("t")
    rng = random.Random(seed)
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        k, s = f"k{rng.randrange(5)}", rng.randrange(200)
        r = rng.random()
        if r < 0.5:
            t.put_row((k, s), {"c": f"c{rng.randrange(9)}", "n": i})
        elif r < 0.8:
            t.update_row((k, s), put={"c": f"c{rng.randrange(9)}"})
        else:
            t.delete_row((k, s))
        if i % 50 == 0:
            print(i, flush=True)
    """
)


@pytest.mark.slow
def test_global_index_converges_after_sigkill_mid_application(tmp_path):
    path = str(tmp_path / "store")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(99)
    for round_ in range(4):
        kill_after(str(script), [path, str(round_)], rng.randint(2, 40), lambda line: None)
        with widetable.open(path, purge_interval=None) as db:
            assert db.verify_index("t", "loc").ok  # local: consistent at every moment
            assert db.wait_for_indexes(60)
            report = db.verify_index("t", "glob")
            assert report.ok, (report.missing[:5], report.stale[:5])
            assert os.path.isdir(path)
