"""``python -m bench.core``: widetable's core data path against raw rocksdict (Core issue §9).

Both stores hold the same rows in the same run: 10 columns of 100 bytes each.
Raw rocksdict stores each row as one opaque blob -- the 10 values concatenated,
1000 bytes -- under the row key, with the RocksDB options widetable's engine uses;
it is the ceiling of our storage path. Three measures, as widetable / raw:

* ``batch_write_row load``: rows/s loading every row in 200-row batches, widetable's
  ``batch_write_row`` against one rocksdict ``WriteBatch`` per 200 rows (target >= 0.5);
* ``get_row``: point reads/s of random existing rows, ``get_row`` against ``get``
  returning the blob (target >= 0.5);
* ``range read``: rows/s reading a key range forward, ``Table.scan`` (which pages
  through ``get_range``) against ``Rdict.items()`` bounded to the same range
  (target >= 0.25).

Every row's values are made in load order, and raw rocksdict's blobs are
joined in that order too, so both sides read their inputs from memory in the
order they write them. Loads and reads alternate raw and widetable for
``--rounds`` rounds (loads into fresh stores each time, raw first, its memtable
flushed before widetable starts) and keep each side's best, to damp the noise
of a shared machine. Inputs are built before timing: bytes keys for raw, tuples
for widetable.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from widetable.storage.rocks import rocks_options

from .ycsb import FIELDS, build_values

TARGETS = {"batch_write_row load": 0.5, "get_row": 0.5, "range read": 0.25}
BATCH = 200
TABLE = "core"


@dataclass(frozen=True, slots=True)
class Measure:
    name: str
    widetable_per_s: float
    raw_per_s: float
    target: float

    @property
    def ratio(self) -> float:
        return self.widetable_per_s / self.raw_per_s if self.raw_per_s > 0 else 0.0

    @property
    def status(self) -> str:
        return "PASS" if self.ratio >= self.target else "MISS"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "status": self.status}


def _timed(fn: Callable[[], int]) -> float:
    """Items per second of one call of ``fn``, which returns how many items it did."""
    start = time.perf_counter_ns()
    n = fn()
    return n / (max(time.perf_counter_ns() - start, 1) / 1e9)


def run(
    rows: int = 100_000,
    gets: int = 50_000,
    range_rows: int = 50_000,
    rounds: int = 3,
    seed: int = 1,
    workdir: Path | None = None,
) -> list[Measure]:
    """Measure in a temp folder (removed afterwards) and return the three measures."""
    from rocksdict import Rdict, ReadOptions

    import widetable

    rng = random.Random(f"{seed}:core")
    keys = [f"row{n:09d}" for n in range(rows)]
    load_order = list(range(rows))
    rng.shuffle(load_order)  # rows arrive in random key order, as in YCSB's hashed load
    # Each row's values are made in load order, so both sides read their inputs from
    # memory in the order they write them (raw rocksdict's joined blobs are made in
    # that order below); otherwise widetable alone would chase values scattered in
    # key order, a cost of the harness, not of the store.
    data: list[dict] = [{} for _ in range(rows)]
    for i in load_order:
        data[i] = build_values(rng)
    raw_batches = [
        [(keys[i].encode(), b"".join(data[i][f] for f in FIELDS)) for i in chunk]
        for chunk in _chunks(load_order, BATCH)
    ]
    wt_batches = [
        [(TABLE, "put", (keys[i],), data[i]) for i in chunk] for chunk in _chunks(load_order, BATCH)
    ]
    picks = [rng.randrange(rows) for _ in range(gets)]
    raw_keys = [keys[i].encode() for i in picks]
    wt_keys = [(keys[i],) for i in picks]
    first = rng.randrange(max(rows - range_rows, 0) + 1)
    lo, hi = keys[first], keys[min(first + range_rows, rows) - 1] + "\x00"  # [lo, hi)

    gc.collect()
    gc.freeze()  # the inputs live to the end: keep them out of the timed GC passes
    root = Path(tempfile.mkdtemp(prefix="widetable-core-", dir=workdir))
    raw = Rdict(str(root / "raw"), rocks_options())
    db = widetable.open(str(root / "widetable"))
    try:
        db.create_table(TABLE, primary_key=[("k", "STRING")], max_versions=1)
        table = db.table(TABLE)

        def raw_load() -> int:
            return _load_raw(raw, raw_batches, rows)

        def wt_load() -> int:
            return _load_widetable(db, wt_batches, rows)

        def raw_gets() -> int:
            get = raw.get
            return sum(1 for k in raw_keys if get(k) is not None)

        def wt_gets() -> int:
            get_row = table.get_row
            return sum(1 for k in wt_keys if get_row(k) is not None)

        def raw_range() -> int:
            opts = ReadOptions()
            opts.set_iterate_upper_bound(hi.encode())
            return sum(1 for _ in raw.items(from_key=lo.encode(), read_opt=opts))

        def wt_range() -> int:
            return sum(1 for _ in table.scan(start=(lo,), end=(hi,)))

        # Loads alternate too: ``rounds - 1`` trial loads into scratch stores, then the
        # load of the stores the reads use; each side keeps its best. Raw goes first each
        # time, its memtable flushed untimed, so none of its background work runs while
        # widetable loads (widetable's own flushes are its own cost).
        raw_best = wt_best = 0.0
        for trial in range(rounds - 1):
            scratch = root / f"trial{trial}"
            raw_best = max(raw_best, _scratch_load(scratch / "raw", raw_batches, rows, raw=True))
            wt_best = max(wt_best, _scratch_load(scratch / "wt", wt_batches, rows, raw=False))
            shutil.rmtree(scratch, ignore_errors=True)
        raw_best = max(raw_best, _timed(raw_load))
        raw.flush(wait=True)
        wt_best = max(wt_best, _timed(wt_load))
        load = Measure("batch_write_row load", wt_best, raw_best, TARGETS["batch_write_row load"])
        best = {"raw_gets": 0.0, "wt_gets": 0.0, "raw_range": 0.0, "wt_range": 0.0}
        for _ in range(rounds):
            for name, fn in (
                ("raw_gets", raw_gets),
                ("wt_gets", wt_gets),
                ("raw_range", raw_range),
                ("wt_range", wt_range),
            ):
                best[name] = max(best[name], _timed(fn))
        return [
            load,
            Measure("get_row", best["wt_gets"], best["raw_gets"], TARGETS["get_row"]),
            Measure("range read", best["wt_range"], best["raw_range"], TARGETS["range read"]),
        ]
    finally:
        db.close()
        raw.close()
        shutil.rmtree(root, ignore_errors=True)
        gc.unfreeze()


def _load_raw(store: Any, batches: list, rows: int) -> int:
    """Write ``batches`` of (key, blob) to raw rocksdict, one WriteBatch each; return rows."""
    from rocksdict import WriteBatch

    for batch in batches:
        wb = WriteBatch(raw_mode=True)
        for k, v in batch:
            wb.put(k, v)
        store.write(wb)
    return rows


def _load_widetable(db: Any, batches: list, rows: int) -> int:
    """Send ``batches`` through ``batch_write_row``, checking every row; return rows."""
    for batch in batches:
        for result in db.batch_write_row(batch):
            if not result.ok:
                raise RuntimeError(f"batch_write_row failed: {result.error}")
    return rows


def _scratch_load(path: Path, batches: list, rows: int, raw: bool) -> float:
    """Rows/s loading ``batches`` into a fresh store at ``path`` (closed afterwards)."""
    from rocksdict import Rdict

    import widetable

    if raw:
        store = Rdict(str(path), rocks_options())
        rate = _timed(lambda: _load_raw(store, batches, rows))
        store.flush(wait=True)
        store.close()
        return rate
    db = widetable.open(str(path))
    db.create_table(TABLE, primary_key=[("k", "STRING")], max_versions=1)
    rate = _timed(lambda: _load_widetable(db, batches, rows))
    db.close()
    return rate


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def print_measures(console: Console, measures: list[Measure]) -> None:
    table = Table(
        title="widetable vs raw rocksdict (one opaque blob per row), same run", title_justify="left"
    )
    for col in ("measure", "widetable /s", "raw rocksdict /s", "ratio", "target", "result"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    for m in measures:
        colour = "green" if m.status == "PASS" else "red"
        table.add_row(
            m.name,
            f"{m.widetable_per_s:,.0f}",
            f"{m.raw_per_s:,.0f}",
            f"{m.ratio:.2f}",
            f">= {m.target:g}",
            f"[{colour}]{m.status}[/{colour}]",
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """Run, print ratios and PASS/MISS; exit 0 (1 with --strict when a target is missed)."""
    p = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="rows loaded (default 100000)")
    p.add_argument("--gets", type=int, default=50_000, help="point reads per round")
    p.add_argument("--range-rows", type=int, default=50_000, help="rows in the range read")
    p.add_argument("--rounds", type=int, default=3, help="read rounds, best kept (default 3)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write the measures to this JSON file")
    p.add_argument("--strict", action="store_true", help="exit 1 if any target is missed")
    args = p.parse_args(argv)
    if args.rows < 1 or args.gets < 1 or args.range_rows < 1 or args.rounds < 1:
        p.error("--rows, --gets, --range-rows and --rounds must be positive")
    console = Console()
    console.print(
        f"bench.core: {args.rows:,} rows of 10 x 100 bytes, {args.gets:,} gets, "
        f"{args.range_rows:,}-row range, best of {args.rounds}"
    )
    measures = run(args.rows, args.gets, args.range_rows, args.rounds, args.seed)
    print_measures(console, measures)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([m.to_json() for m in measures], indent=2) + "\n")
    missed = [m for m in measures if m.status == "MISS"]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
