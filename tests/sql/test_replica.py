"""Columnar replicas (``sql/replica.py``): full scans read a DuckDB copy of the table kept
by its change log. Answers stay exact (compared with SQLite and with the row path after
writes of every kind), a replica that cannot serve falls back to the rows with the reason
in EXPLAIN, and after SIGKILL a replica resumes from the log position it recorded."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import widetable
from widetable import WidetableError

from .test_differential import _norm, _templates, loaded  # noqa: F401 - the fixture

GROUP = ("SELECT DeviceID, COUNT(*), SUM(Amount), COUNT(Canteen) FROM consumption "
         "GROUP BY DeviceID ORDER BY DeviceID")


def ready(db, table: str = "consumption") -> None:
    db.sql(f"SELECT COUNT(*) FROM {table}", max_scan_rows=None).rows  # starts the build
    assert db.wait_for_sql_replicas(60)
    plan = db.sql(f"EXPLAIN SELECT COUNT(*) FROM {table}").rows
    assert plan[0][1].startswith("full scan of the columnar replica"), plan


def test_replica_answers_match_sqlite(loaded) -> None:  # noqa: F811
    db, lite, rows = loaded
    ready(db)
    ready(db, "cards")
    rnd = random.Random(7)
    checked = replica_scans = 0
    for sql, params, ordered in _templates(rnd, rows):
        got = [_norm(r) for r in db.sql(sql, params).rows]
        want = [_norm(r) for r in lite.execute(sql, params).fetchall()]
        if not ordered:
            got, want = sorted(got, key=repr), sorted(want, key=repr)
        assert got == want, f"{sql} {params}"
        checked += 1
        plan = "\n".join(r[1] for r in db.sql("EXPLAIN " + sql, params).rows)
        replica_scans += "columnar replica" in plan
    assert checked > 80 and replica_scans > 10


def _mirror(db, lite, rnd: random.Random, rows: list) -> None:
    """Random puts, updates, deletes and batches, made on both stores."""
    t = db.table("consumption")
    for step in range(60):
        pk, _ = rnd.choice(rows)
        kind = rnd.choice(["put", "update", "delete", "batch"])
        where = "CardID = ? AND DeviceID = ? AND SellerID = ? AND OrderNumber = ?"
        if kind == "put":
            new = (pk[0], pk[1], pk[2], 5000 + step)
            t.put_row(new, {"Amount": float(step), "Canteen": "north"})
            lite.execute("INSERT INTO consumption (CardID, DeviceID, SellerID, OrderNumber, "
                         "Amount, Canteen) VALUES (?, ?, ?, ?, ?, ?)", (*new, float(step), "north"))
        elif kind == "update":
            t.update_row(pk, put={"Amount": 1.25}, delete_column=["Canteen"])
            done = lite.execute(f"UPDATE consumption SET Amount = 1.25, Canteen = NULL "
                                f"WHERE {where}", pk)
            if done.rowcount == 0:  # an update of a missing row inserts it
                lite.execute("INSERT INTO consumption (CardID, DeviceID, SellerID, "
                             "OrderNumber, Amount) VALUES (?, ?, ?, ?, 1.25)", pk)
        elif kind == "delete":
            t.delete_row(pk)
            lite.execute(f"DELETE FROM consumption WHERE {where}", pk)
        else:
            batch = [("consumption", "put", (pk[0], "devZ", "sZ", step), {"Amount": 2.0})]
            db.batch_write_row(batch)
            lite.execute("INSERT INTO consumption (CardID, DeviceID, SellerID, OrderNumber, "
                         "Amount) VALUES (?, 'devZ', 'sZ', ?, 2.0)", (pk[0], step))


def test_every_write_is_seen_by_the_next_query(loaded) -> None:  # noqa: F811
    db, lite, rows = loaded
    ready(db)
    rnd = random.Random(3)
    for _ in range(4):
        _mirror(db, lite, rnd, rows)
        # read-your-writes: no wait between the writes and the query
        got = [_norm(r) for r in db.sql(GROUP).rows]
        want = [_norm(r) for r in lite.execute(GROUP).fetchall()]
        assert got == want
        assert got == [_norm(r) for r in db.sql(GROUP, columnar=False).rows]
    plan = db.sql("EXPLAIN " + GROUP).rows
    assert plan[0][1].startswith("full scan of the columnar replica")
    # its state: in the store's background loops (describe_table, /health) and the registry
    states = [s for s in db.background_state() if "columnar replica" in s.name]
    assert [s.name for s in states] == ["SQL columnar replica of table 'consumption'"]
    assert states[0].ok and states[0].errors == 0
    consumer = db._ctx.changelog.get("sql-replica:consumption")
    assert db._ctx.changelog.lag_ms(consumer) is not None


def test_a_value_of_another_type_falls_back_to_the_rows(loaded) -> None:  # noqa: F811
    db, _, rows = loaded
    db.sql("ALTER TABLE consumption ADD COLUMN Note MEDIUMTEXT")  # not predefined
    pk = rows[0][0]
    db.table("consumption").update_row(rows[1][0], put={"Note": "fine"})
    ready(db)
    db.table("consumption").update_row(pk, put={"Note": 7})  # mapped MEDIUMTEXT
    plan = db.sql("EXPLAIN SELECT COUNT(Note) FROM consumption").rows
    assert "rows read (no columnar replica: row" in plan[0][2]
    assert "'Note'" in plan[0][2]
    with pytest.raises(WidetableError) as info:  # the row path's error, as without a replica
        db.sql("SELECT COUNT(Note) FROM consumption").rows
    assert "mapped as MEDIUMTEXT" in info.value.message
    # columns the bad cell is not in still read the replica
    plan = db.sql("EXPLAIN SELECT SUM(Amount) FROM consumption").rows
    assert plan[0][1].startswith("full scan of the columnar replica")
    db.table("consumption").update_row(pk, put={"Note": "fixed"})
    assert db.sql("SELECT Note, COUNT(*) FROM consumption WHERE Note IS NOT NULL GROUP BY Note "
                  "ORDER BY Note").rows == [("fine", 1), ("fixed", 1)]
    plan = db.sql("EXPLAIN SELECT COUNT(Note) FROM consumption").rows
    assert plan[0][1].startswith("full scan of the columnar replica")


def test_mapping_changes_rebuild_or_drop_the_replica(loaded) -> None:  # noqa: F811
    db, _, rows = loaded
    ready(db)
    db.table("consumption").update_row(rows[0][0], put={"Extra": 5})
    db.sql("ALTER TABLE consumption ADD COLUMN Extra BIGINT")
    plan = db.sql("EXPLAIN SELECT SUM(Extra) FROM consumption").rows
    assert "the replica lacks columns its mappings declare now" in plan[0][2]
    assert db.sql("SELECT SUM(Extra) FROM consumption", max_scan_rows=None).rows == [(5,)]
    ready(db)
    assert db.sql("SELECT SUM(Extra) FROM consumption").rows == [(5,)]
    db.sql("DROP MAPPING TABLE consumption")
    names = [c.name for c in db._ctx.changelog.consumers()]
    assert "sql-replica:consumption" not in names  # the table stops logging for it
    assert "sql-replica:cards" not in names  # never scanned in full: never built


def test_a_dropped_table_drops_its_replica(tmp_path) -> None:
    db = widetable.open(str(tmp_path / "s"), purge_interval=None, maintenance_interval=None)
    try:
        for round_ in range(2):
            t = db.create_table("t", [("k", "INTEGER")])
            for i in range(50):
                t.put_row((i,), {"v": i * (round_ + 1)})
            if round_ == 0:
                db.sql("CREATE TABLE t (k BIGINT, v BIGINT, PRIMARY KEY(k))")
            ready(db, "t")
            assert db.sql("SELECT SUM(v) FROM t").rows == [(1225 * (round_ + 1),)]
            db.delete_table("t")
    finally:
        db.close()


def test_a_reopened_store_resumes_its_replica(tmp_path) -> None:
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    t = db.create_table("t", [("k", "INTEGER")])
    for i in range(300):
        t.put_row((i,), {"v": 1})
    db.sql("CREATE TABLE t (k BIGINT, v BIGINT, PRIMARY KEY(k))")
    ready(db, "t")
    db.close()
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    try:
        # written before any SQL runs: the replica is a consumer from the store's open on
        db.table("t").put_row((1000,), {"v": 100})
        db.table("t").delete_row((0,))
        plan = db.sql("EXPLAIN SELECT SUM(v) FROM t").rows
        assert plan[0][1].startswith("full scan of the columnar replica")
        assert db.sql("SELECT COUNT(*), SUM(v) FROM t").rows == [(300, 399)]
    finally:
        db.close()


CRASH_CHILD = textwrap.dedent("""
    import sys, threading, widetable
    db = widetable.open(sys.argv[1], purge_interval=None, maintenance_interval=None)
    t = db.table("t")
    def query():
        while True:
            db.sql("SELECT COUNT(*), SUM(v) FROM t", max_scan_rows=None).rows
    threading.Thread(target=query, daemon=True).start()
    n = int(sys.argv[2])
    while True:
        db.batch_write_row([("t", "put", (n + i,), {"v": 1}) for i in range(50)])
        t.delete_row((n - 25,))
        print(n + 49, flush=True)  # acknowledged: rows up to here, one deleted per batch
        n += 50
""")


@pytest.mark.slow
def test_sigkill_leaves_the_replica_exact(tmp_path) -> None:
    """A writer and a querying thread are killed at random points, three times; after each
    reopen the replica's answers equal the rows' and hold every acknowledged write."""
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    db.create_table("t", [("k", "INTEGER")])
    db.batch_write_row([("t", "put", (i,), {"v": 1}) for i in range(100)])
    db.sql("CREATE TABLE t (k BIGINT, v BIGINT, PRIMARY KEY(k))")
    ready(db, "t")
    db.close()
    start = 100
    rnd = random.Random(5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", CRASH_CHILD, path, str(start)],
                                 stdout=subprocess.PIPE, text=True, env=env)
        acked = []
        deadline = time.monotonic() + rnd.uniform(2.0, 4.0)
        while time.monotonic() < deadline or len(acked) < 3:
            line = child.stdout.readline()
            if not line:
                break
            acked.append(int(line))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert acked, "the child acknowledged nothing"
        db = widetable.open(path, purge_interval=None, maintenance_interval=None)
        try:
            rows = db.sql("SELECT COUNT(*), SUM(v), MAX(k) FROM t", columnar=False,
                          max_scan_rows=None).rows[0]
            plan = db.sql("EXPLAIN SELECT COUNT(*) FROM t").rows
            assert plan[0][1].startswith("full scan of the columnar replica"), plan
            assert db.sql("SELECT COUNT(*), SUM(v), MAX(k) FROM t",
                          max_scan_rows=None).rows[0] == rows
            assert rows[2] >= acked[-1]  # every acknowledged write is there
            keys = db.sql("SELECT k FROM t ORDER BY k", max_scan_rows=None).rows
            assert [k for (k,) in keys] == [k for (k,) in db.sql(
                "SELECT k FROM t ORDER BY k", columnar=False, max_scan_rows=None).rows]
            start = rows[2] + 1
        finally:
            db.close()


def test_a_damaged_replica_is_built_again(tmp_path) -> None:
    import duckdb
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    t = db.create_table("t", [("k", "INTEGER")])
    for i in range(50):
        t.put_row((i,), {"v": i})
    db.sql("CREATE TABLE t (k BIGINT, v BIGINT, PRIMARY KEY(k))")
    ready(db, "t")
    db.close()
    con = duckdb.connect(os.path.join(path, "sql", "replica.duckdb"))
    (tid,), = con.execute("SELECT table_id FROM meta").fetchall()
    con.execute(f'DROP TABLE "t_{tid}"')  # its rows are gone, its meta row stays
    con.close()
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    try:
        assert db.sql("SELECT COUNT(*), SUM(v) FROM t").rows == [(50, 1225)]  # rows read
        ready(db, "t")
        assert db.sql("SELECT COUNT(*), SUM(v) FROM t").rows == [(50, 1225)]
    finally:
        db.close()
