"""Index counts (index/counts.py): exact after any mix of writes, under concurrent writers,
after a kill, through backfills, drops and the format-3 migration of an older store."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest

import widetable
from widetable import WidetableError
from widetable.db import format as store_format
from widetable.index import counts as index_counts
from widetable.keys import layout

PK = [("k", "STRING"), ("s", "INTEGER")]
DEFINED = [("c", "STRING"), ("n", "INTEGER"), ("d", "DOUBLE")]
# index -> (declared key, type, the prefix lengths it counts)
INDEXES = {
    "g_c": (["c"], "GLOBAL", (1,)),
    "g_cn": (["c", "n"], "GLOBAL", (2,)),
    "g_nk": (["n", "k"], "GLOBAL", (1, 2)),
    "l_kc": (["k", "c"], "LOCAL", (2,)),
    "l_kn": (["k", "n"], "LOCAL", (2,)),
}


def make_indexes(db, include_base_data: bool = True) -> None:
    for name, (key, kind, _) in INDEXES.items():
        db.create_index("t", name, key, index_type=kind, include_base_data=include_base_data,
                        progress=False)


def check_counts(db, names=INDEXES) -> None:
    """Every index's stored counts are those of its entries, the entries are those of the
    rows (verify_index), and each counted prefix counts the base rows it selects."""
    assert db.wait_for_indexes(30)
    rows = [r for r in db.table("t").scan()]
    for name in names:
        report = db.verify_index("t", name)
        assert report.counted and report.ok, report
        view = db.table(name)
        counts = view._codec.counts
        assert counts.lengths == INDEXES[name][2]
        stored = index_counts.stored_counts(db._engine, counts.index_id)
        assert stored == dict(index_counts.count_entries(db._engine, counts.index_id,
                                                         counts.lengths))
        key = view.schema.pk_names
        for k in counts.lengths:
            pk_pos = {n: i for i, (n, _) in enumerate(PK)}
            want = Counter(tuple(r.primary_key[pk_pos[c]] if c in pk_pos else r.columns.get(c)
                                 for c in key[:k]) for r in rows)
            for prefix, n in want.items():
                if None in prefix:
                    continue
                assert view.prefix_count(prefix) == n, (name, prefix)


def random_writes(db, rnd: random.Random, steps: int) -> None:
    t = db.table("t")
    keys = [(f"k{i}", j) for i in range(6) for j in range(12)]

    def attrs() -> dict:
        out = {}
        if rnd.random() < 0.8:
            out["c"] = rnd.choice("abcd")
        if rnd.random() < 0.7:
            out["n"] = rnd.randrange(4)
        out["d"] = rnd.random()
        return out

    for _ in range(steps):
        op = rnd.random()
        pk = rnd.choice(keys)
        if op < 0.3:
            t.put_row(pk, attrs())
        elif op < 0.5:
            change = {k: v for k, v in attrs().items() if rnd.random() < 0.6}
            drop = [c for c in ("c", "n") if rnd.random() < 0.2]
            if not change and not drop:
                change = {"d": 0.5}
            t.update_row(pk, put=change or None, delete_column=drop or None)
        elif op < 0.6:
            t.delete_row(pk)
        elif op < 0.8:
            items = []
            for pk in {rnd.choice(keys): None for _ in range(rnd.randrange(1, 8))}:
                if rnd.random() < 0.3:
                    items.append(("t", "delete", pk, None))
                elif rnd.random() < 0.3:
                    items.append(("t", "update", pk, {"put": attrs()}))
                else:
                    items.append(("t", "put", pk, attrs()))
            db.batch_write_row(items)
        elif op < 0.9:
            t.update_row(pk, increment={"n": 1})
        else:
            t.put_row(pk, {"d": 1.0})  # a row with none of the indexed columns


@pytest.mark.parametrize("seed", [1, 2])
def test_counts_equal_the_entries_and_the_rows_after_random_writes(db, seed):
    db.create_table("t", PK, defined_columns=DEFINED)
    rnd = random.Random(seed)
    random_writes(db, rnd, 150)  # rows older than the indexes: backfilled
    make_indexes(db)
    check_counts(db)
    random_writes(db, rnd, 500)
    check_counts(db)
    for name, (_, kind, _) in INDEXES.items():
        if kind == "LOCAL":
            assert db.table(name)._codec.counts.mode == index_counts.EXACT


def test_counts_of_indexes_made_without_base_data_count_their_entries(db):
    """Rows older than such an index have no entries: a LOCAL one stays CHECKED (a write
    reads whether the entry it replaces is there), so its counts stay those of its entries."""
    db.create_table("t", PK, defined_columns=DEFINED)
    rnd = random.Random(7)
    random_writes(db, rnd, 200)
    make_indexes(db, include_base_data=False)
    random_writes(db, rnd, 300)
    assert db.wait_for_indexes(30)
    for name, (_, kind, _) in INDEXES.items():
        counts = db.table(name)._codec.counts
        assert counts.mode == (index_counts.CHECKED if kind == "LOCAL" else index_counts.EXACT)
        stored = index_counts.stored_counts(db._engine, counts.index_id)
        assert stored == dict(index_counts.count_entries(db._engine, counts.index_id,
                                                         counts.lengths)), name
        assert not db.verify_index("t", name).wrong_counts


def test_transactions_and_increments_keep_local_counts(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    make_indexes(db)
    t = db.table("t")
    txn = db.start_local_transaction("t", "k1")
    for j in range(5):
        txn.put_row(("k1", j), {"c": "a", "n": j % 2})
    txn.commit()
    txn = db.start_local_transaction("t", "k1")
    txn.delete_row(("k1", 0))
    txn.update_row(("k1", 1), put={"c": "b"})
    txn.commit()
    t.update_row(("k1", 2), increment={"n": 5})
    check_counts(db)
    assert db.table("l_kc").prefix_count(("k1", "a")) == 3
    assert db.table("l_kc").prefix_count(("k1", "b")) == 1


def test_threads_sharing_index_values_lose_no_count(db):
    """Writers of different rows add to the same counters at once (a read, an add, a put):
    the feed's lock (local) and the applier's (global) keep every increment."""
    db.create_table("t", PK, defined_columns=DEFINED)
    make_indexes(db)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            rnd = random.Random(w)
            t = db.table("t")
            for i in range(300):
                pk = ("k1" if i % 2 else "k2", w * 1000 + rnd.randrange(40))
                if rnd.random() < 0.15:
                    t.delete_row(pk)
                elif rnd.random() < 0.3:
                    db.batch_write_row([("t", "put", ("k1", w * 1000 + j),
                                         {"c": rnd.choice("ab"), "n": 1})
                                        for j in rnd.sample(range(40), 3)])
                else:
                    t.put_row(pk, {"c": rnd.choice("ab"), "n": rnd.randrange(2)})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    check_counts(db)


def test_a_backfill_racing_writers_counts_every_entry_once(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    rnd = random.Random(3)
    t = db.table("t")
    for i in range(1500):
        t.put_row((f"k{i % 3}", i), {"c": rnd.choice("abc"), "n": i % 5})
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            w = random.Random(4)
            while not stop.is_set():
                i = w.randrange(1500)
                if w.random() < 0.2:
                    t.delete_row((f"k{i % 3}", i))
                else:
                    t.put_row((f"k{i % 3}", i), {"c": w.choice("abcd"), "n": w.randrange(5)})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    th = threading.Thread(target=writer)
    th.start()
    try:
        make_indexes(db)
    finally:
        stop.set()
        th.join()
    assert not errors, errors
    check_counts(db)


def test_no_ttl_expiry_can_leave_a_count_behind(db):
    """TTL expiry removes rows without a write: a table with an index takes no TTL, so no
    entry (and no count) outlives its row."""
    db.create_table("ttl", PK, ttl=3600, defined_columns=DEFINED)
    with pytest.raises(WidetableError, match="no TTL to take an index"):
        db.create_index("ttl", "ix", ["c"], progress=False)
    db.create_table("t", PK, defined_columns=DEFINED)
    db.create_index("t", "ix", ["c"], progress=False)
    with pytest.raises(WidetableError, match="ttl -1"):
        db.update_table("t", ttl=3600)


def test_drop_index_and_drop_table_delete_the_counts(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    make_indexes(db)
    db.table("t").put_row(("k1", 1), {"c": "a", "n": 1})
    assert db.wait_for_indexes(30)
    ids = {name: db.table(name)._codec.counts.index_id for name in INDEXES}
    for index_id in ids.values():
        assert db._engine.get(layout.index_count_state_key(index_id)) is not None
        assert index_counts.stored_counts(db._engine, index_id)
    db.drop_index("t", "g_c")
    db.drop_index("t", "l_kc")
    for name in ("g_c", "l_kc"):
        assert list(db._engine.scan(*layout.index_count_range(ids[name]))) == []
    db.table("t").put_row(("k1", 2), {"c": "a", "n": 1})
    db.delete_table("t")
    for index_id in ids.values():
        assert list(db._engine.scan(*layout.index_count_range(index_id))) == []


def test_a_store_of_format_2_gets_its_counts_at_open(tmp_path):
    """A store written before index counts (format 2: no 0x09 keys): the migration to
    format 3 counts every index's entries; its local indexes are CHECKED (whether their
    entries are complete is not known), and every later write keeps the counts."""
    path = str(tmp_path / "store")
    with widetable.open(path, purge_interval=None) as db:
        db.create_table("t", PK, defined_columns=DEFINED)
        random_writes(db, random.Random(5), 200)
        make_indexes(db)
        random_writes(db, random.Random(6), 100)
        assert db.wait_for_indexes(30)
        ids = [db.table(name)._codec.counts.index_id for name in INDEXES]
        batch = db._engine.batch()
        for index_id in ids:  # the store as format 2 left it
            batch.delete_range(*layout.index_count_range(index_id))
        batch.put(layout.FORMAT_VERSION_KEY, store_format.encode_version(2))
        db._engine.write(batch)
        assert list(db._engine.scan(layout.INDEX_COUNTS, layout.SEARCH_INDEXES)) == []
    with widetable.open(path, purge_interval=None) as db:
        assert store_format.stored_version(db._engine) == 3
        for name, (_, kind, _) in INDEXES.items():
            assert db.table(name)._codec.counts.mode == (
                index_counts.CHECKED if kind == "LOCAL" else index_counts.EXACT)
        check_counts(db)
        random_writes(db, random.Random(8), 300)
        check_counts(db)


def test_an_index_without_a_count_state_is_not_counted(tmp_path):
    """No state (a store that lost it): no write counts the index, and SQL counts its
    entries instead of reading a count."""
    path = str(tmp_path / "store")
    with widetable.open(path, purge_interval=None) as db:
        db.create_table("t", PK, defined_columns=DEFINED)
        db.create_index("t", "g_c", ["c"], progress=False)
        db.create_index("t", "l_kc", ["k", "c"], index_type="LOCAL", progress=False)
        db.table("t").put_row(("k1", 1), {"c": "a"})
        assert db.wait_for_indexes(30)
        ids = [db.table(n)._codec.counts.index_id for n in ("g_c", "l_kc")]
        batch = db._engine.batch()
        for index_id in ids:
            batch.delete_range(*layout.index_count_range(index_id))
        db._engine.write(batch)
    with widetable.open(path, purge_interval=None) as db:
        t = db.table("t")
        t.put_row(("k1", 2), {"c": "a"})
        t.put_row(("k1", 3), {"c": "b"})
        t.delete_row(("k1", 1))
        assert db.wait_for_indexes(30)
        for index_id in ids:
            assert list(db._engine.scan(*layout.index_count_range(index_id))) == []
        assert db.table("g_c").prefix_count(("a",)) is None
        assert db.table("l_kc").prefix_count(("k1", "a")) is None
        assert db.verify_index("t", "g_c").counted is False
        db.sql("CREATE TABLE t (k VARCHAR(10), s BIGINT, c VARCHAR(10), PRIMARY KEY(k, s))")
        for sql, params in [("SELECT COUNT(*) FROM t WHERE c = ?", ["a"]),
                            ("SELECT COUNT(*) FROM t WHERE k = ? AND c = ?", ["k1", "a"])]:
            assert db.sql("EXPLAIN " + sql, params).rows[-1][1] == "rows counted directly"
            assert db.sql(sql, params).rows == [(1,)]


CHILD = """
import random, sys
import widetable
db = widetable.open(sys.argv[1], purge_interval=None)
if "t" not in db.list_tables():
    db.create_table("t", [("k", "STRING"), ("s", "INTEGER")],
                    defined_columns=[("c", "STRING"), ("n", "INTEGER")])
    db.create_index("t", "g_c", ["c"], progress=False)
    db.create_index("t", "l_kc", ["k", "c"], index_type="LOCAL", progress=False)
t = db.table("t")
rnd = random.Random(int(sys.argv[2]))
print("ready", flush=True)
i = 0
while True:
    pk = (f"k{rnd.randrange(4)}", rnd.randrange(300))
    if rnd.random() < 0.2:
        t.delete_row(pk)
    elif rnd.random() < 0.3:
        db.batch_write_row([("t", "put", (f"k{j % 4}", j // 4), {"c": rnd.choice("abcde")})
                            for j in rnd.sample(range(1200), 5)])
    else:
        t.put_row(pk, {"c": rnd.choice("abcde"), "n": i})
    i += 1
    if i % 50 == 0:
        print(i, flush=True)
"""


@pytest.mark.slow
def test_counts_equal_the_entries_after_a_kill_during_writes(tmp_path):
    from tests.crashkit import kill_after

    path = str(tmp_path / "store")
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    for seed in (1, 2):
        kill_after(str(script), [path, str(seed)], 8, lambda line: None, pause=0.05)
    with widetable.open(path, purge_interval=None) as db:
        assert db.wait_for_indexes(30)
        for name in ("g_c", "l_kc"):
            report = db.verify_index("t", name)
            assert report.counted and report.ok, report
            assert report.entries > 0


def test_the_child_script_runs(tmp_path):
    """The crash test's writer parses and starts (so its failure is never a typo)."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD).replace("while True:", "for _ in range(60):"))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "s"), "1"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
