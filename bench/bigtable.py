"""The Bigtable paper's single-server benchmarks (Chang et al., OSDI 2006, section 7, Figure 6).

The paper writes R rows of one 1000-byte value each, with row keys ``0..R-1``:

* ``seq-writes``: keys in order, one single-row write each;
* ``random-writes``: the same keys in a random order (the paper hashes them mod R);
* ``seq-reads`` / ``random-reads``: one single-row read per key, in order / at random;
* ``random-reads-mem``: random reads of a data set small enough to live in memory
  (the paper: 100 MB instead of 1 GB per server; here R/10 rows, read once to warm);
* ``scans``: the whole range through the scan API, 100 values per call.

Our data set fits in the OS page cache, so ``random-reads`` is not disk-bound as in
2006; the figures are shown for scale, not as a like-for-like comparison.
Throughput is values (rows) per second; for ``scans`` one op is one 100-row call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .systems.base import TableSpec
from .ycsb import INSERT, READ, SCAN, Op, random_value

VALUE_LENGTH = 1000
SCAN_PAGE = 100
SPEC = TableSpec("bigtable", "rowkey", ("value",))

EXPERIMENTS = (
    "random-reads",
    "random-reads-mem",
    "random-writes",
    "seq-reads",
    "seq-writes",
    "scans",
)

# Figure 6, values read/written per second per tablet server, with 1 tablet server.
PAPER_2006: dict[str, int] = {
    "random-reads": 1212,
    "random-reads-mem": 10811,
    "random-writes": 8850,
    "seq-reads": 4425,
    "seq-writes": 8547,
    "scans": 15385,
}


def row_key(n: int) -> str:
    """Zero-padded so that byte order is numeric order, as in the paper's key space."""
    return f"row{n:010d}"


@dataclass(slots=True)
class Plan:
    """Pre-generated ops for every experiment, replayed against every system.

    ``main`` is the R-row table: written by ``seq_writes`` (or loaded untimed from
    ``main_rows`` when that experiment is not selected), then read. ``random_writes``
    fills a second, fresh table; ``mem_rows`` loads the small in-memory table.
    """

    main_rows: list[tuple[str, dict[str, bytes]]]
    mem_rows: list[tuple[str, dict[str, bytes]]]
    ops: dict[str, list[Op]]


def make_plan(record_count: int, operation_count: int, seed: int) -> Plan:
    rng = random.Random(f"{seed}:bigtable")
    main_rows = [
        (row_key(n), {"value": random_value(rng, VALUE_LENGTH)}) for n in range(record_count)
    ]
    small = max(record_count // 10, 1)
    mem_rows = main_rows[:small]
    reads = min(operation_count, record_count)
    order = list(range(record_count))
    rng.shuffle(order)
    ops: dict[str, list[Op]] = {
        "seq-writes": [(INSERT, k, cols) for k, cols in main_rows],
        "random-writes": [(INSERT, *main_rows[n]) for n in order],
        "seq-reads": [(READ, row_key(n), None) for n in range(reads)],
        "random-reads": [(READ, row_key(rng.randrange(record_count)), None) for _ in range(reads)],
        "random-reads-mem": [(READ, row_key(rng.randrange(small)), None) for _ in range(reads)],
        "scans": [(SCAN, row_key(n), SCAN_PAGE) for n in range(0, record_count, SCAN_PAGE)],
    }
    return Plan(main_rows, mem_rows, ops)
