"""SIGKILL a Bigtable-model writer: every acknowledged mutation survives, and no row is
torn across its families (they are separate records, in separate RocksDB column
families, written in one batch).

The child writes rows of three families: ``a`` (uncompressed), ``b`` (zstd, no block
cache: another column family) and ``c`` (an int64 sum). Each mutate_row sets a:g and
b:g to the write's generation, a:s to the running sum the child keeps, and adds the
generation to c:n. After the kill, every row must have a:g == b:g and a:s == c:n, and
every acknowledged generation must be there. Three rounds run against one store.
"""

from __future__ import annotations

import random
import textwrap

import pytest

import widetable
from tests.crashkit import kill_after
from widetable.bigtable import RowSet

pytestmark = pytest.mark.slow

ROWS = 30
CHILD = textwrap.dedent(
    """
    import sys
    import widetable
    from widetable import WidetableError
    from widetable.bigtable import AddToCell, FamilySpec, SetCell

    path, base = sys.argv[1], int(sys.argv[2])
    db = widetable.open(path, purge_interval=None)
    bt = db.bigtable
    try:
        bt.create_table("crash", [FamilySpec("a"), FamilySpec("b", compression="zstd",
                                  block_cache=False), FamilySpec("c", aggregate="sum")])
    except WidetableError:
        pass
    t = bt.table("crash")
    sums = {}
    for row in t.read_rows():
        for cell in row.cells:
            if cell.family == "c":
                sums[row.key] = int.from_bytes(cell.value, "big", signed=True)
    print("ready", flush=True)
    gen = base
    def muts(key, gen):
        sums[key] = sums.get(key, 0) + gen
        return [SetCell("a", b"g", 0, b"%%d" %% gen), SetCell("b", b"g", 0, b"%%d" %% gen),
                SetCell("a", b"s", 0, sums[key].to_bytes(8, "big", signed=True)),
                AddToCell("c", b"n", 0, gen)]
    while True:
        gen += 1
        if gen %% 2:
            key = b"r%%02d" %% (gen %% %d)
            t.mutate_row(key, muts(key, gen))
            print(f"row {key.decode()} {gen}", flush=True)
        else:
            keys = sorted({b"r%%02d" %% ((gen * 7 + j) %% %d) for j in range(5)})
            statuses = t.mutate_rows([(k, muts(k, gen)) for k in keys])
            assert all(s is None for s in statuses), statuses
            print("rows " + ",".join(k.decode() for k in keys) + f" {gen}", flush=True)
    """ % (ROWS, ROWS)
)


def check(path: str, acked: dict[bytes, int]) -> int:
    with widetable.open(path, purge_interval=None) as db:
        t = db.bigtable.table("crash")
        rows = {r.key: {(c.family, c.qualifier): c.value for c in r.cells} for r in t.read_rows()}
        for key, cells in rows.items():
            assert cells[("a", b"g")] == cells[("b", b"g")], f"row {key!r} torn across families"
            assert cells[("a", b"s")] == cells[("c", b"n")], f"row {key!r}: sum torn from its aggregate"
        for key, gen in acked.items():
            assert key in rows, f"acknowledged row {key!r} lost"
            assert int(rows[key][("a", b"g")]) >= gen, f"row {key!r} lost acknowledged generation {gen}"
        assert t.read_row(b"r00", None) == next(iter(t.read_rows(RowSet(keys=(b"r00",)))), None)
        return max((int(c[("a", b"g")]) for c in rows.values()), default=0)


def test_sigkill_loses_no_acknowledged_mutation_and_tears_no_row(tmp_path) -> None:
    path = str(tmp_path / "store")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    acked: dict[bytes, int] = {}
    rng = random.Random(23)
    base = 0

    def on_line(line: str) -> None:
        _, keys, gen = line.split()
        for k in keys.split(","):
            acked[k.encode()] = max(acked.get(k.encode(), 0), int(gen))

    for _ in range(3):
        kill_after(str(script), [path, str(base)], rng.randrange(50, 400), on_line, pause=rng.random() / 20)
        base = check(path, acked) + 1000
    assert len(acked) == ROWS


BULK_ROWS = 200
BULK_CHILD = textwrap.dedent(
    """
    import sys
    import widetable
    from widetable import WidetableError
    from widetable.bigtable import FamilySpec, SetCell

    path, base = sys.argv[1], int(sys.argv[2])
    db = widetable.open(path, purge_interval=None)
    try:
        db.bigtable.create_table("bulk", [FamilySpec("a")])
    except WidetableError:
        pass
    t = db.bigtable.table("bulk")
    print("ready", flush=True)
    gen = base
    while True:
        gen += 1
        keys = sorted({b"r%%03d" %% ((gen * 13 + j * 7) %% %d) for j in range(40)})
        # one SetCell per row (the one-entry rows' path), and the first row again
        entries = [(k, [SetCell("a", b"g%%d" %% gen, 1000, b"%%d" %% gen)]) for k in keys]
        entries.append((keys[0], [SetCell("a", b"last", 1000, b"%%d" %% gen)]))
        assert t.mutate_rows(entries) == [None] * len(entries)
        print(f"batch {gen}", flush=True)
    """ % BULK_ROWS
)


def bulk_keys(gen: int) -> list[bytes]:
    return sorted({b"r%03d" % ((gen * 13 + j * 7) % BULK_ROWS) for j in range(40)})


def test_sigkill_during_mutate_rows_keeps_every_acknowledged_call_whole(tmp_path) -> None:
    """The rows of one mutate_rows call are one engine batch: after SIGKILL, an
    acknowledged call is there in every row it wrote, and any call found in one row
    (acknowledged or not) is found in all of its rows."""
    path = str(tmp_path / "store")
    script = tmp_path / "bulk_child.py"
    script.write_text(BULK_CHILD)
    acked: list[int] = []
    rng = random.Random(29)
    base = 0
    for _ in range(3):
        kill_after(str(script), [path, str(base)], rng.randrange(50, 300),
                   lambda line: acked.append(int(line.split()[1])), pause=rng.random() / 20)
        with widetable.open(path, purge_interval=None) as db:
            rows = {r.key: {c.qualifier: c.value for c in r.cells}
                    for r in db.bigtable.table("bulk").read_rows()}
        found = {int(q[1:]) for cells in rows.values() for q in cells if q.startswith(b"g")}
        assert set(acked) <= found, f"acknowledged calls lost: {sorted(set(acked) - found)[:5]}"
        for gen in found:
            whole = [k for k in bulk_keys(gen) if rows.get(k, {}).get(b"g%d" % gen) == b"%d" % gen]
            assert whole == bulk_keys(gen), f"call {gen} is in rows {whole} only"
        newest = max(found)
        assert rows[bulk_keys(newest)[0]][b"last"] == b"%d" % newest  # the row written twice
        base = newest + 1000
