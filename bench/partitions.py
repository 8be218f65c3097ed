"""Partition benchmarks: ``python -m bench.partitions [--size-mb N] [--reads N]``.

1. **Lookup overhead.** Point-read throughput (random ``get_row`` on 50k rows of
   the Core issue's shape, 10 columns of 100 bytes, compacted so every table
   sits in the same LSM state) of a table cut into 1,000 partitions against the
   same table with one partition, and against no partition layer at all. Rounds alternate between
   the setups in one process, so machine noise hits all alike; the best round
   of each is compared. Target: the 1,000-partition table reads at >= 90% of
   the one-partition table.
2. **Split latency.** A partition of ``--size-mb`` of real rows in RocksDB is
   split while a writer thread keeps writing into it: manual splits
   (``db.split_partition``) and a size-triggered ``db.maintain_partitions()``
   pass. Splits only rewrite the partition map, so the time must not grow
   with the partition's size. Target: under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

import widetable
from widetable.table import table as table_module

from .ycsb import build_values


def _reads_per_sec(get, sample) -> float:
    t0 = time.perf_counter()
    for pk in sample:
        get(pk)
    return len(sample) / (time.perf_counter() - t0)


def lookup_overhead(rows: int = 50_000, reads: int = 20_000, rounds: int = 15) -> dict:
    path = tempfile.mkdtemp(prefix="wt-part-")
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    keys = [f"user{i:07d}" for i in range(rows)]
    step = rows // 1000
    one = db.create_table("one", [("k", "STRING")])
    many = db.create_table("many", [("k", "STRING")], split_points=keys[step::step][:999])
    bare = db.create_table("bare", [("k", "STRING")])
    bare._attach_partitions(
        table_module._unrouted, table_module._unrouted, table_module._unrecorded
    )
    # The Core issue's rows (bench.core): 10 columns of 100 bytes, the same in every table.
    rng = random.Random(3)
    values = [build_values(rng) for _ in range(rows)]
    for name in ("one", "many", "bare"):
        for i in range(0, rows, 200):
            db.batch_write_row(
                [(name, "put", (k,), v) for k, v in zip(keys[i : i + 200], values[i : i + 200])]
            )
    db.compact()  # every table in the same LSM state, so reads differ only by routing
    rnd = random.Random(7)
    sample = [(rnd.choice(keys),) for _ in range(reads)]
    best = {"one": 0.0, "many": 0.0, "bare": 0.0}
    ratios = []
    for _ in range(rounds):
        got = {}
        for name, t in (("one", one), ("many", many), ("bare", bare)):
            got[name] = _reads_per_sec(t.get_row, sample)
            best[name] = max(best[name], got[name])
        ratios.append(got["many"] / got["one"])
        for t in (one, many):
            db._partitions.partitions(t).router.sample.clear()
    partitions = len(db.describe_table("many").partitions)
    db.close()
    shutil.rmtree(path, ignore_errors=True)
    return {
        "partitions": partitions,
        "reads_per_sec_1_partition": best["one"],
        "reads_per_sec_1000_partitions": best["many"],
        "reads_per_sec_no_partition_layer": best["bare"],
        "ratio_best": best["many"] / best["one"],
        "ratio_median_round": statistics.median(ratios),
        "ratio_vs_no_layer": best["one"] / best["bare"],
    }


def split_latency(size_mb: int, value_bytes: int = 4000, splits: int = 5) -> dict:
    path = tempfile.mkdtemp(prefix="wt-split-")
    db = widetable.open(path, purge_interval=None, maintenance_interval=None)
    t = db.create_table("big", [("k", "STRING"), ("n", "INTEGER")], split_size=2**62)
    value = os.urandom(value_bytes // 2).hex()
    n_rows = size_mb * 2**20 // (value_bytes + 30)
    t0 = time.perf_counter()
    batch = 100
    for i in range(0, n_rows, batch):
        db.batch_write_row(
            [
                ("big", "put", (f"k{j:09d}", j), {"v": value})
                for j in range(i, min(i + batch, n_rows))
            ]
        )
    load_s = time.perf_counter() - t0
    db.maintain_partitions("big")  # drain samples so the size split has keys to choose from
    est = db.describe_table("big").partitions[0].bytes
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        rnd = random.Random(1)
        while not stop.is_set():
            j = rnd.randrange(n_rows)
            t.put_row((f"k{j:09d}", j), {"v": value})
            written[0] += 1

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    time.sleep(0.2)
    manual = []
    for s in range(splits):
        at = f"k{(s + 1) * n_rows // (splits + 2):09d}"
        t1 = time.perf_counter()
        db.split_partition("big", at)
        manual.append((time.perf_counter() - t1) * 1000)
        time.sleep(0.05)
    # a size-triggered pass: every partition is now over split_size
    db.update_table("big", split_size=max(est // 16, 1))
    t1 = time.perf_counter()
    events = db.maintain_partitions("big")
    pass_ms = (time.perf_counter() - t1) * 1000
    stop.set()
    w.join()
    parts = len(db.describe_table("big").partitions)
    db.close()
    shutil.rmtree(path, ignore_errors=True)
    return {
        "size_mb": size_mb,
        "rows": n_rows,
        "estimated_bytes": est,
        "load_seconds": load_s,
        "writes_during_splits": written[0],
        "manual_split_ms": manual,
        "manual_split_ms_max": max(manual),
        "size_pass_ms": pass_ms,
        "size_pass_events": events,
        "partitions_after": parts,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.partitions", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--size-mb", type=int, default=1024, help="size of the partition to split (default 1024)"
    )
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--reads", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    look = lookup_overhead(args.rows, args.reads, args.rounds)
    print(
        f"lookup: {look['partitions']} partitions vs 1 partition, random get_row on {args.rows} rows"
    )
    print(f"  no partition layer : {look['reads_per_sec_no_partition_layer']:>12,.0f} reads/s")
    print(f"  1 partition        : {look['reads_per_sec_1_partition']:>12,.0f} reads/s")
    print(f"  1000 partitions    : {look['reads_per_sec_1000_partitions']:>12,.0f} reads/s")
    print(f"  ratio 1000/1 (best rounds)  : {look['ratio_best']:.3f}  (target >= 0.90)")
    print(f"  ratio 1000/1 (median round) : {look['ratio_median_round']:.3f}")
    print(f"  ratio 1/none (hook cost)    : {look['ratio_vs_no_layer']:.3f}")
    sp = split_latency(args.size_mb)
    print(
        f"split: {sp['size_mb']} MB partition ({sp['rows']:,} rows, estimate {sp['estimated_bytes'] / 2**20:,.0f} MiB, "
        f"loaded in {sp['load_seconds']:.1f} s), writer running ({sp['writes_during_splits']:,} writes during splits)"
    )
    print(
        f"  manual splits     : {', '.join(f'{m:.2f}' for m in sp['manual_split_ms'])} ms (max {sp['manual_split_ms_max']:.2f}; target < 50)"
    )
    print(
        f"  size-split pass   : {sp['size_pass_ms']:.2f} ms for {sp['size_pass_events']} splits -> {sp['partitions_after']} partitions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
