"""``python -m bench.sql``: SQL (issue 24) against the store's own calls, DuckDB, SQLite
and PostgreSQL.

Data, loaded in the same run: the YCSB table of ``bench`` (10 fields of 100 bytes,
``--ycsb-rows``) and the seed-000 student-card consumption table (``--rows``, 100
records per card, a global index on ``Device``). Measures, as in the issue:

* ``point SELECT``: a full-key SELECT with its plan cached, ÷ ``get_row`` (>= 0.3);
* ``prefix range``: ``WHERE CardID = ?`` of 100 rows ÷ ``get_range`` of them (>= 0.5);
* ``GROUP BY``: SUM and COUNT over every row ÷ DuckDB over a Parquet file of the
  same columns (>= 0.3): from the table's columnar replica (``sql/replica.py``,
  built before the timing), and reading the rows (``columnar=False``) for reference;
* ``vs SQLite`` / ``vs PostgreSQL``: each query of the set ÷ the peer with its best
  indexes (the primary key and an index on ``Device``) (> 1: ahead); the selective
  ``COUNT(*) ... WHERE Device = ?`` reads the count the index keeps for that value
  (``index/counts.py``; checked in EXPLAIN), as SQLite and PostgreSQL walk theirs;
* ``index``: a selective non-key predicate served by the secondary index ÷ the
  same query as a full scan (``USE INDEX()``), of the replica and of the rows
  (>= 20 times faster);
* ``memory``: peak RSS above idle while a full-table aggregation runs (<= 500 MB).

Each timing is the best of ``--rounds``, the systems of one measure taking turns round
by round (so a burst of load from elsewhere does not land on one of them only). Ratios
are speeds (ours / theirs). The store is compacted after the load (its steady state, as
PostgreSQL is vacuumed and analyzed), so reads do not pay for the load's compaction
debt. ``--no-postgres`` leaves PostgreSQL out (it is started from ``bench/postgres.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import widetable
from widetable.keys.codec import INF_MAX, INF_MIN

from .ycsb import FIELDS, build_values

CONSUMPTION = ("CREATE TABLE consumption (CardID VARCHAR(16), DeviceID VARCHAR(16), "
               "SellerID VARCHAR(16), OrderNumber BIGINT, Amount DOUBLE, Device MEDIUMTEXT, "
               "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))")
GROUP = "SELECT DeviceID, SUM(Amount), COUNT(*) FROM consumption GROUP BY DeviceID"


def _best(fn: Callable[[], int], rounds: int) -> float:
    """Operations per second of ``fn`` (which returns how many it did), best round."""
    return _turns([fn], rounds)[0]


def _turns(fns: list[Callable[[], int]], rounds: int) -> list[float]:
    """Operations per second of each of ``fns``, best round, the functions taking turns
    within each round."""
    best = [0.0] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            n = fn()
            best[i] = max(best[i], n / max(time.perf_counter() - t, 1e-9))
    return best


def _load(db, rows: int, ycsb_rows: int, seed: int) -> tuple[list, list]:
    rnd = random.Random(seed)
    db.create_table("usertable", [("YCSB_KEY", "STRING")])
    keys = [f"user{i:010d}" for i in range(ycsb_rows)]
    for i in range(0, ycsb_rows, 200):
        db.batch_write_row([("usertable", "put", (k,), build_values(rnd)) for k in keys[i:i + 200]])
    db.create_table("consumption", [("CardID", "STRING"), ("DeviceID", "STRING"),
                                    ("SellerID", "STRING"), ("OrderNumber", "INTEGER")],
                    defined_columns=[("Amount", "DOUBLE"), ("Device", "STRING")])
    cards = [f"card{i:06d}" for i in range(max(rows // 100, 1))]
    batch = []
    for n in range(rows):
        card = cards[n // 100 % len(cards)]
        pk = (card, f"dev{n % 7}", f"s{n % 5}", n)
        batch.append(("consumption", "put", pk,
                      {"Amount": round(rnd.uniform(1, 50), 2), "Device": f"pos{rnd.randrange(5000)}"}))
        if len(batch) == 200:
            db.batch_write_row(batch)
            batch = []
    if batch:
        db.batch_write_row(batch)
    db.create_index("consumption", "by_device", ["Device"], progress=False)
    db.wait_for_indexes(600)
    db.sql("CREATE TABLE usertable (YCSB_KEY VARCHAR(32), "
           + ", ".join(f"{f} MEDIUMBLOB" for f in FIELDS) + ", PRIMARY KEY(YCSB_KEY))")
    db.sql(CONSUMPTION)
    return keys, cards


def _sqlite(db, path: Path) -> sqlite3.Connection:
    lite = sqlite3.connect(str(path))
    lite.execute("CREATE TABLE consumption (CardID TEXT, DeviceID TEXT, SellerID TEXT, "
                 "OrderNumber INTEGER, Amount REAL, Device TEXT, "
                 "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))")
    lite.executemany("INSERT INTO consumption VALUES (?, ?, ?, ?, ?, ?)",
                     ((*r.primary_key, r.columns.get("Amount"), r.columns.get("Device"))
                      for r in db.table("consumption").scan()))
    lite.execute("CREATE INDEX by_device ON consumption(Device)")
    lite.commit()
    return lite


def _postgres(db, say):
    """A throwaway PostgreSQL server holding the consumption table with its best indexes,
    and a connection to it; ``(None, None)`` if it cannot be started."""
    from .postgres import PostgresInstance
    from .systems.base import SystemUnavailable
    pg = PostgresInstance(say)
    try:
        pg.start()
        conn = pg.connect()
    except (SystemUnavailable, Exception) as exc:  # noqa: BLE001 - the peer is optional
        say(f"PostgreSQL left out: {exc}")
        pg.stop()
        return None, None
    cur = conn.cursor()
    cur.execute("CREATE TABLE consumption (CardID TEXT, DeviceID TEXT, SellerID TEXT, "
                "OrderNumber BIGINT, Amount DOUBLE PRECISION, Device TEXT, "
                "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))")
    with cur.copy("COPY consumption FROM STDIN") as copy:
        for r in db.table("consumption").scan():
            copy.write_row((*r.primary_key, r.columns.get("Amount"), r.columns.get("Device")))
    cur.execute("CREATE INDEX by_device ON consumption(Device)")
    cur.execute("VACUUM ANALYZE consumption")
    return pg, conn


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _peak_during(fn: Callable[[], object]) -> int:
    idle = _rss()
    peak = [idle]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        fn()
    finally:
        done.set()
        t.join()
    return peak[0] - idle


def run(rows: int, ycsb_rows: int, rounds: int, seed: int, console: Console,
        postgres: bool = True) -> list[tuple]:
    import duckdb

    from widetable.sql import interchange

    tmp = Path(tempfile.mkdtemp(prefix="bench-sql-"))
    db = widetable.open(str(tmp / "store"), purge_interval=None, maintenance_interval=None)
    try:
        console.print(f"loading {rows:,} consumption rows and {ycsb_rows:,} YCSB rows ...")
        keys, cards = _load(db, rows, ycsb_rows, seed)
        db.compact()
        rnd = random.Random(seed)
        user = db.table("usertable")
        table = db.table("consumption")
        probe = [rnd.choice(keys) for _ in range(2000)]
        point = "SELECT * FROM usertable WHERE YCSB_KEY = ?"
        out = []

        for k in probe:  # warm the block cache and the plan cache: rounds compare like with like
            user.get_row((k,))
        db.sql(point, [probe[0]])
        sql_point, get_row = _turns(
            [lambda: sum(len(db.sql(point, [k]).rows) for k in probe),
             lambda: sum(user.get_row((k,)) is not None for k in probe)], rounds)
        out.append(("point SELECT / get_row", sql_point, get_row, 0.3))

        pick = [rnd.choice(cards) for _ in range(200)]
        prefix = "SELECT * FROM consumption WHERE CardID = ?"
        n = len(table.schema.pk_names)
        for c in pick:  # warm the block cache
            table.get_range((c,) + (INF_MIN,) * (n - 1), (c,) + (INF_MAX,) * (n - 1))
        sql_range, native = _turns(
            [lambda: sum(len(db.sql(prefix, [c]).rows) for c in pick),
             lambda: sum(len(table.get_range((c,) + (INF_MIN,) * (n - 1),
                                             (c,) + (INF_MAX,) * (n - 1)).rows) for c in pick)],
            rounds)
        out.append(("prefix range (100 rows) / get_range", sql_range, native, 0.5))

        parquet = tmp / "consumption.parquet"
        interchange.write_file(interchange.table_batches(table, columns=["Amount"]),
                               str(parquet), "parquet")
        unlimited = {"max_scan_rows": None, "max_scan_bytes": None, "timeout": None}
        t0 = time.perf_counter()
        len(db.sql(GROUP, **unlimited).rows)  # the first full scan starts the columnar replica
        if not db.wait_for_sql_replicas(1800):
            raise RuntimeError("the columnar replica of consumption was not built in 30 min")
        console.print(f"columnar replica built in {time.perf_counter() - t0:.1f} s")
        plan = db.sql("EXPLAIN " + GROUP).rows[0][1]
        assert "columnar replica" in plan, plan
        duck = duckdb.connect()
        ours, theirs = _turns(
            [lambda: len(db.sql(GROUP, **unlimited).rows) and rows,
             lambda: len(duck.execute(GROUP.replace("consumption", f"'{parquet}'")).fetchall())
             and rows], rounds)
        out.append(("GROUP BY over every row (replica) / DuckDB on Parquet", ours, theirs, 0.3))
        rowwise = _best(lambda: len(db.sql(GROUP, columnar=False, **unlimited).rows) and rows,
                        min(rounds, 2))
        out.append(("GROUP BY over every row (rows read) / DuckDB on Parquet", rowwise, theirs,
                    0.3))

        lite = _sqlite(db, tmp / "lite.db")
        pg, pconn = _postgres(db, console.print) if postgres else (None, None)
        device = db.table("consumption").get_row(table.scan().__next__().primary_key)["Device"]
        sel = "SELECT COUNT(*) FROM consumption WHERE Device = ?"
        plan = db.sql("EXPLAIN " + sel, [device]).rows[-1][1]
        assert plan.startswith("index count: by_device"), plan
        queries = [
            ("point", "SELECT * FROM consumption WHERE CardID = ? AND DeviceID = ? AND "
                      "SellerID = ? AND OrderNumber = ?", list(next(table.scan()).primary_key)),
            ("prefix", prefix, [cards[len(cards) // 2]]),
            ("group by", GROUP, []),
            ("selective", sel, [device]),
        ]
        try:
            pcur = pconn.cursor() if pconn is not None else None
            for name, q, params in queries:
                reps = 200 if name in ("point", "prefix", "selective") else 1
                limits = {} if reps > 1 else unlimited
                fns = [lambda: sum(1 for _ in range(reps) if db.sql(q, params, **limits).rows),
                       lambda: sum(1 for _ in range(reps) if lite.execute(q, params).fetchall())]
                if pcur is not None:
                    pq = q.replace("?", "%s")

                    def pg_run(pq: str = pq, params: list = params, reps: int = reps) -> int:
                        n = 0
                        for _ in range(reps):
                            pcur.execute(pq, params, prepare=True)
                            n += bool(pcur.fetchall())
                        return n
                    fns.append(pg_run)
                speeds = _turns(fns, rounds)
                out.append((f"{name} / SQLite", speeds[0], speeds[1], 1.0))
                if pcur is not None:
                    out.append((f"{name} / PostgreSQL", speeds[0], speeds[2], 1.0))
        finally:
            if pconn is not None:
                pconn.close()
            if pg is not None:
                pg.stop()

        scan = sel.replace("consumption", "consumption USE INDEX()")
        indexed, scanned = _turns(
            [lambda: sum(len(db.sql(sel, [device]).rows) for _ in range(100)),
             lambda: sum(len(db.sql(scan, [device], **unlimited).rows) for _ in range(10))],
            rounds)
        out.append(("selective predicate: index / full scan of the replica", indexed, scanned,
                    20.0))
        scanned = _best(lambda: len(db.sql(scan, [device], columnar=False, **unlimited).rows),
                        min(rounds, 2))
        out.append(("selective predicate: index / full scan of the rows", indexed, scanned,
                    20.0))

        peak = _peak_during(lambda: db.sql(GROUP, **unlimited).rows)
        out.append(("peak memory of the aggregation, replica (MB)", peak / 2**20, 500.0, None))
        peak = _peak_during(lambda: db.sql(GROUP, columnar=False, **unlimited).rows)
        out.append(("peak memory of the aggregation, rows read (MB)", peak / 2**20, 500.0, None))
        return out
    finally:
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)  # the store, SQLite's file, the Parquet file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sql", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="consumption rows (1,000,000)")
    p.add_argument("--ycsb-rows", type=int, default=100_000, help="YCSB rows (100,000)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-postgres", action="store_true", help="leave PostgreSQL out")
    args = p.parse_args(argv)
    console = Console()
    if not console.is_terminal:  # a log file: one line a measure
        console = Console(width=132)
    before = os.getloadavg()
    measures = run(args.rows, args.ycsb_rows, args.rounds, args.seed, console,
                   not args.no_postgres)
    after = os.getloadavg()
    t = Table(title="SQL (issue 24), same run", title_justify="left")
    for col in ("measure", "ours", "theirs", "ratio", "target", "result"):
        t.add_column(col, justify="left" if col == "measure" else "right")
    for name, ours, theirs, target in measures:
        if target is None:  # memory: lower is better, theirs is the limit
            ok = ours <= theirs
            t.add_row(name, f"{ours:,.0f}", f"<= {theirs:,.0f}", "", "", "PASS" if ok else "MISS")
            continue
        ratio = ours / theirs if theirs else float("inf")
        t.add_row(name, f"{ours:,.1f}/s", f"{theirs:,.1f}/s", f"{ratio:.2f}", f">= {target:g}",
                  "PASS" if ratio >= target else "MISS")
    console.print(t)
    console.print(f"load average (1, 5, 15 min) at the start {_loads(before)}, at the end "
                  f"{_loads(after)}, on {os.cpu_count()} cores")
    return 0


def _loads(loads: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.1f}" for v in loads)


if __name__ == "__main__":
    raise SystemExit(main())
