"""``python -m bench.bigtable_sql``: GoogleSQL (PrepareQuery + ExecuteQuery) through
widetable's Bigtable port, against the same answers through the data API, in one run.

One ``widetable serve --bigtable-port`` subprocess on a fresh store holding the bench
table of ``bench.bigtable_grpc`` (10,000 rows of one 100-byte cell); the official data
client (one thread, sync) asks each question both ways:

1. a point read: ``SELECT _key, cf['field0'] ... WHERE _key = @k`` against ``read_row``
   (the direct path: no DuckDB);
2. a 100-row key range: ``WHERE _key >= @lo AND _key < @hi`` against ``read_rows`` of the
   range (the direct path);
3. a count over the table: ``SELECT COUNT(*) ...`` (DuckDB over the scan) against a
   ``read_rows`` scan counted by the client (values stripped by a filter).

Each figure is operations per second over ``--seconds`` with the server's CPU per
operation; the ratio is SQL / data API. Google's emulator is not a peer here: it answers
PrepareQuery UNIMPLEMENTED. A query pays for two RPCs (PrepareQuery, then ExecuteQuery),
as the official client always sends both.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from . import bigtable_grpc
from .bigtable_grpc import INSTANCE, TABLE, _data_client, load, start_widetable, timed


def figures(host: str, seconds: float, pid: int | None) -> dict:
    from google.cloud.bigtable.data import ReadRowsQuery, RowRange
    from google.cloud.bigtable.data.row_filters import (
        CellsRowLimitFilter,
        RowFilterChain,
        StripValueTransformerFilter,
    )

    client = _data_client(host)
    t = client.get_table(INSTANCE, TABLE)
    rows_ = bigtable_grpc.ROWS
    long = max(seconds, 3.0) if rows_ >= 10_000 else seconds

    def key(r) -> bytes:
        return b"user%06d" % r.randrange(rows_)

    def sql_point(r):
        rows = list(client.execute_query(
            f"SELECT _key, cf['field0'] AS v FROM {TABLE} WHERE _key = @k", INSTANCE,
            parameters={"k": key(r)}))
        assert len(rows) == 1

    def sql_range(r):
        base = r.randrange(rows_ - 100)
        rows = list(client.execute_query(
            f"SELECT _key, cf['field0'] AS v FROM {TABLE} WHERE _key >= @lo AND _key < @hi",
            INSTANCE, parameters={"lo": b"user%06d" % base, "hi": b"user%06d" % (base + 100)}))
        assert len(rows) == 100

    def api_range(r):
        base = r.randrange(rows_ - 100)
        rows = t.read_rows(ReadRowsQuery(row_ranges=RowRange(b"user%06d" % base,
                                                             b"user%06d" % (base + 100))))
        assert len(rows) == 100

    def sql_count(r):
        (row,) = list(client.execute_query(f"SELECT COUNT(*) AS n FROM {TABLE}", INSTANCE))
        assert row["n"] == rows_

    count_filter = RowFilterChain([CellsRowLimitFilter(1), StripValueTransformerFilter(True)])

    def api_count(r):
        assert len(t.read_rows(ReadRowsQuery(row_filter=count_filter))) == rows_

    out = {
        "point": (timed(sql_point, seconds, pid=pid), timed(lambda r: t.read_row(key(r)), seconds, pid=pid)),
        "range of 100": (timed(sql_range, seconds, pid=pid), timed(api_range, seconds, pid=pid)),
        f"count of {rows_:,}": (timed(sql_count, long, pid=pid), timed(api_count, long, pid=pid)),
    }
    client.close()
    return out


def run(seconds: float, rows: int = bigtable_grpc.ROWS) -> dict:
    """The figures (``rows``: the table's rows, at least 200)."""
    bigtable_grpc.ROWS = max(rows, 200)  # its load() fills that many
    with tempfile.TemporaryDirectory(prefix="bench-btsql-") as tmp:
        peer, _ = start_widetable(Path(tmp))
        try:
            load(peer.host)
            return figures(peer.host, seconds, peer.proc.pid)
        finally:
            peer.stop()


def print_report(report: dict) -> None:
    print("server / client: CPU microseconds per operation of the server process and of "
          "this one (the official client)")
    print(f"{'measure':<16} {'SQL ops/s':>10} {'server':>7} {'client':>7} {'API ops/s':>10} "
          f"{'server':>7} {'client':>7} {'SQL / API':>9}")
    for name, (sql, api) in report.items():
        print(f"{name:<16} {sql['ops']:>10.1f} {sql['cpu_us']:>7.0f} {sql['client_cpu_us']:>7.0f} "
              f"{api['ops']:>10.1f} {api['cpu_us']:>7.0f} {api['client_cpu_us']:>7.0f} "
              f"{sql['ops'] / api['ops']:>9.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bigtable_sql", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per figure")
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the table (min 200)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    report = run(args.seconds, args.rows)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
