"""``python -m bench.server``: the server against the embedded store, as ratios.

Two operations, each with 8 concurrent clients (threads) for a fixed time:
GetRow of random existing rows, and BatchWriteRow of 200 rows (10 fields of
100 bytes each, as YCSB). "embedded" runs the library in this process; "server"
goes through ``widetable serve`` (a subprocess) with ``widetable.connect`` or,
with ``--sdk``, the official ``tablestore`` SDK. Targets: GetRow >= 0.3 and
BatchWriteRow >= 0.5 of embedded throughput.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from pathlib import Path

import widetable

from .systems.widetable_server import KEY_ID, SECRET, start_server, stop_server

FIELDS = [f"field{i}" for i in range(10)]


def _row(i: int) -> tuple[str, dict]:
    return f"user{i:010d}", {f: os.urandom(50).hex().encode() for f in FIELDS}


def _run(threads: int, seconds: float, op) -> float:
    """Operations per second of ``op(rng)`` on ``threads`` threads."""
    stop = time.monotonic() + seconds
    counts = [0] * threads

    def work(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() < stop:
            op(rng)
            counts[n] += 1

    ts = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - start)


def _measure(db, name: str, records: int, threads: int, seconds: float) -> dict[str, float]:
    db.create_table(name, [("k", "STRING")])
    rows = [_row(i) for i in range(records)]
    for i in range(0, records, 200):
        db.batch_write_row([(name, "put", (k,), c) for k, c in rows[i:i + 200]])
    local = threading.local()

    def table():
        t = getattr(local, "t", None)
        if t is None:
            t = local.t = db.table(name)
        return t

    get = _run(threads, seconds, lambda rng: table().get_row((f"user{rng.randrange(records):010d}",)))
    batch = [[(name, "put", (k,), c) for k, c in rows[j:j + 200]] for j in range(0, 2000, 200)]
    write = _run(threads, seconds, lambda rng: db.batch_write_row(batch[rng.randrange(len(batch))]))
    return {"GetRow": get, "BatchWriteRow(200)": write}


def _measure_sdk(endpoint: str, name: str, records: int, threads: int, seconds: float) -> dict:
    from tablestore import (
        BatchWriteRowRequest,
        Condition,
        OTSClient,
        PutRowItem,
        Row,
        TableInBatchWriteRowItem,
    )

    client = OTSClient(endpoint, KEY_ID, SECRET, "widetable", logger_name="bench-sdk")
    rows = [_row(i) for i in range(2000)]

    def get(rng):
        client.get_row(name, [("k", f"user{rng.randrange(records):010d}")])

    def write(rng):
        j = rng.randrange(10) * 200
        req = BatchWriteRowRequest()
        req.add(TableInBatchWriteRowItem(name, [
            PutRowItem(Row([("k", k)], [(f, bytearray(v)) for f, v in c.items()]), Condition("IGNORE"))
            for k, c in rows[j:j + 200]]))
        client.batch_write_row(req)

    return {"GetRow": _run(threads, seconds, get), "BatchWriteRow(200)": _run(threads, seconds, write)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--sdk", action="store_true", help="drive the server with the official SDK")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wt-bench-server-") as root:
        db = widetable.open(str(Path(root) / "embedded"), purge_interval=None)
        embedded = _measure(db, "usertable", args.records, args.threads, args.seconds)
        db.close()
        proc, endpoint = start_server(Path(root) / "served")
        try:
            remote = widetable.connect(endpoint, access_key_id=KEY_ID, access_key_secret=SECRET)
            served = _measure(remote, "usertable", args.records, args.threads, args.seconds)
            if args.sdk:
                sdk = _measure_sdk(endpoint, "usertable", args.records, args.threads, args.seconds)
            remote.close()
        finally:
            stop_server(proc)
    print(f"{args.threads} concurrent clients, {args.records} rows, {args.seconds:g} s per measurement")
    print(f"{'operation':<20}{'embedded op/s':>15}{'server op/s':>14}{'ratio':>8}{'target':>8}")
    targets = {"GetRow": 0.3, "BatchWriteRow(200)": 0.5}
    for op, e in embedded.items():
        s = served[op]
        print(f"{op:<20}{e:>15.0f}{s:>14.0f}{s / e:>8.2f}{targets[op]:>8.1f}")
        if args.sdk:
            print(f"{'  (official SDK)':<20}{'':>15}{sdk[op]:>14.0f}{sdk[op] / e:>8.2f}")


if __name__ == "__main__":
    main()
