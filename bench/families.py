"""``python -m bench.families``: column families' storage options, measured (issue 23 §1, §5).

Three measures, each against its peer in the same run:

* **compression**: ``--rows`` rows (default 200,000) of one compressible 1 KB cell
  (words of a small vocabulary, as text and JSON are) in a zstd family, against the
  same rows in an uncompressed family; bytes on disk after a full compaction
  (each in its own store). Target: zstd / none <= 0.5.
* **block cache**: a hot family (cache on, ``--hot-rows`` 1 KB rows that fit the
  ``--cache-mb`` block cache) read at random while a cold family several times the
  cache's size is scanned between rounds; once with the cold family's block cache
  on, once off. Reported: the hot reads' block-cache hit ratio (RocksDB's data-block
  tickers, counted over the hot reads alone) and their mean latency. The cache-off
  cold family leaves the cache to the hot one.
* **one family of four**: rows of 4 families of one 1 KB cell each; ``read_row``
  with a filter naming one family against ``read_row`` of the whole row. Target:
  one family / whole row <= 0.4 of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from widetable.bigtable import FamilySpec, SetCell
from widetable.bigtable.filters import FamilyNameRegex
from widetable.db.database import Database
from widetable.storage.rocks import RocksEngine

WORDS = [w.encode() for w in (
    "row key family qualifier cell value timestamp tablet split compaction bloom filter cache "
    "block memtable write ahead log region server client tenant order user event metric").split()]
BATCH = 500


def compressible(rng: random.Random, size: int = 1024) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += rng.choice(WORDS) + b" "
    return bytes(out[:size])


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.suffix == ".sst")


def _open(path: Path, cache_mb: int = 64, statistics: bool = False) -> Database:
    return Database(RocksEngine(str(path), cache_mb=cache_mb, statistics=statistics),
                    purge_interval=None, maintenance_interval=None)


def _load(t, keys: list[bytes], families: list[str], value_of) -> None:
    for i in range(0, len(keys), BATCH):
        t.mutate_rows([(k, [SetCell(f, b"q", 1000, value_of(k, f)) for f in families])
                       for k in keys[i:i + BATCH]])


def measure_compression(root: Path, rows: int) -> dict:
    rng = random.Random(1)
    values = [compressible(rng) for _ in range(min(rows, 5000))]
    keys = [b"user%08d" % i for i in range(rows)]
    out = {}
    for compression in ("none", "zstd"):
        path = root / f"compress-{compression}"
        db = _open(path)
        db.bigtable.create_table("t", [FamilySpec("cold", compression=compression)])
        _load(db.bigtable.table("t"), keys, ["cold"], lambda k, f: values[hash(k) % len(values)])
        db.compact()
        db.close()
        out[compression] = dir_bytes(path)
        shutil.rmtree(path)
    return {"rows": rows, "none_bytes": out["none"], "zstd_bytes": out["zstd"],
            "ratio": out["zstd"] / out["none"], "target": 0.5}


def measure_cache(root: Path, hot_rows: int, cold_rows: int, cache_mb: int, reads: int,
                  rounds: int) -> dict:
    """Two stores, the cold family's block cache on in one and off in the other; the
    rounds alternate between them (a cold scan, then hot reads timed and counted), so
    both see the same machine."""
    rng = random.Random(2)
    value = os.urandom(1024)  # incompressible: blocks are what they hold
    stores = {}
    for cold_cache in (True, False):
        path = root / f"cache-{cold_cache}"
        db = _open(path, cache_mb=cache_mb, statistics=True)
        db.bigtable.create_table("t", [FamilySpec("hot"),
                                       FamilySpec("cold", block_cache=cold_cache)])
        t = db.bigtable.table("t")
        hot = [b"h%08d" % i for i in range(hot_rows)]
        _load(t, hot, ["hot"], lambda k, f: value)
        _load(t, [b"c%08d" % i for i in range(cold_rows)], ["cold"], lambda k, f: value)
        db.compact()
        for k in hot:  # warm the hot family
            t.read_row(k, FamilyNameRegex("hot"))
        stores[cold_cache] = (db, t, {"hits": 0, "misses": 0, "seconds": 0.0})
    only_hot, only_cold = FamilyNameRegex("hot"), FamilyNameRegex("cold")
    for _ in range(rounds):
        sample = [b"h%08d" % rng.randrange(hot_rows) for _ in range(reads)]
        for cold_cache in (True, False):
            db, t, acc = stores[cold_cache]
            for _row in t.read_rows(filter=only_cold):  # the cold scan
                pass
            before = db._engine.cache_stats()
            start = time.perf_counter()
            for k in sample:
                t.read_row(k, only_hot)
            acc["seconds"] += time.perf_counter() - start
            after = db._engine.cache_stats()
            acc["hits"] += after.get("data.hit", 0) - before.get("data.hit", 0)
            acc["misses"] += after.get("data.miss", 0) - before.get("data.miss", 0)
    result = {}
    for cold_cache, (db, _t, acc) in stores.items():
        db.close()
        result["cold_cache_on" if cold_cache else "cold_cache_off"] = {
            "hot_hit_ratio": acc["hits"] / max(acc["hits"] + acc["misses"], 1),
            "hot_misses_per_round": acc["misses"] / rounds,
            "hot_read_us": acc["seconds"] / (rounds * reads) * 1e6}
    result.update(hot_mb=hot_rows * 1024 / 2**20, cold_mb=cold_rows * 1024 / 2**20, cache_mb=cache_mb)
    return result


def measure_one_family(root: Path, rows: int, reads: int, rounds: int) -> dict:
    rng = random.Random(3)
    path = root / "four"
    db = _open(path)
    fams = ["f1", "f2", "f3", "f4"]
    db.bigtable.create_table("t", [FamilySpec(f) for f in fams])
    t = db.bigtable.table("t")
    keys = [b"row%08d" % i for i in range(rows)]
    _load(t, keys, fams, lambda k, f: compressible(rng))
    db.compact()
    one = FamilyNameRegex("f2")
    best_one = best_all = float("inf")
    for _ in range(rounds):
        sample = [rng.choice(keys) for _ in range(reads)]
        start = time.perf_counter()
        for k in sample:
            t.read_row(k, one)
        best_one = min(best_one, time.perf_counter() - start)
        start = time.perf_counter()
        for k in sample:
            t.read_row(k)
        best_all = min(best_all, time.perf_counter() - start)
    db.close()
    shutil.rmtree(path)
    return {"rows": rows, "one_family_us": best_one / reads * 1e6, "whole_row_us": best_all / reads * 1e6,
            "ratio": best_one / best_all, "target": 0.4}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.families", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000, help="rows of the compression measure")
    p.add_argument("--hot-rows", type=int, default=6_000, help="1 KB rows of the hot family")
    p.add_argument("--cold-rows", type=int, default=60_000, help="1 KB rows of the cold family")
    p.add_argument("--cache-mb", type=int, default=8, help="the store's block cache")
    p.add_argument("--hot-reads", type=int, default=1_500,
                   help="hot point reads after each cold scan (of a few times as many rows as "
                        "the hot family has blocks, so misses show)")
    p.add_argument("--four-rows", type=int, default=20_000, help="rows of 4 families of 1 KB")
    p.add_argument("--reads", type=int, default=20_000, help="point reads per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    console = Console()
    root = Path(tempfile.mkdtemp(prefix="bench-families-"))
    try:
        comp = measure_compression(root, args.rows)
        cache = measure_cache(root, args.hot_rows, args.cold_rows, args.cache_mb, args.hot_reads, args.rounds)
        four = measure_one_family(root, args.four_rows, args.reads, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table(title="bench.families: column families' storage options, same run")
    for col in ("measure", "figure", "peer", "ratio", "target"):
        table.add_column(col)
    table.add_row(f"zstd family on disk ({comp['rows']:,} x 1 KB)", f"{comp['zstd_bytes'] / 2**20:.1f} MB",
                  f"none: {comp['none_bytes'] / 2**20:.1f} MB", f"{comp['ratio']:.2f}",
                  "<= 0.5 " + ("PASS" if comp["ratio"] <= 0.5 else "MISS"))
    on, off = cache["cold_cache_on"], cache["cold_cache_off"]
    table.add_row(f"hot family hit ratio, cold scanned ({cache['hot_mb']:.0f} MB hot, "
                  f"{cache['cold_mb']:.0f} MB cold, {cache['cache_mb']} MB cache)",
                  f"cold cache off: {off['hot_hit_ratio']:.3f} ({off['hot_misses_per_round']:.0f} misses)",
                  f"cold cache on: {on['hot_hit_ratio']:.3f} ({on['hot_misses_per_round']:.0f} misses)",
                  "", "")
    table.add_row("hot family read latency", f"cold cache off: {off['hot_read_us']:.1f} us",
                  f"cold cache on: {on['hot_read_us']:.1f} us",
                  f"{off['hot_read_us'] / on['hot_read_us']:.2f}", "")
    table.add_row(f"read_row of 1 of 4 families ({four['rows']:,} rows)", f"{four['one_family_us']:.1f} us",
                  f"whole row: {four['whole_row_us']:.1f} us", f"{four['ratio']:.2f}",
                  "<= 0.4 " + ("PASS" if four["ratio"] <= 0.4 else "MISS"))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps({"compression": comp, "cache": cache, "one_family": four}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
