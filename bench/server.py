"""``python -m bench.server``: the server against the embedded store, as ratios.

Two operations, each with 8 concurrent clients (threads) for a fixed time:
GetRow of random existing rows, and BatchWriteRow of 200 rows (10 fields of
100 bytes each, as YCSB). "embedded" runs the library in this process; "server"
goes through ``widetable serve`` (a subprocess) with ``widetable.connect`` over
TCP (the target rows) and again over the server's unix socket, or, with
``--sdk``, the official ``tablestore`` SDK. Targets: GetRow >= 0.3 and
BatchWriteRow >= 0.5 of embedded throughput.

By default the server's clients are threads sharing one ``widetable.connect``
in this process, as an application would use it. ``--processes N`` also
measures them spread over N client processes (each its own connection
object): the client's own CPU cost and GIL then weigh less, so the figure is
closer to what the server alone can do (on a small machine the client
processes still compete with the server for cores).

Throughput on a small shared machine is noisy; the CPU columns (µs of CPU per
operation: the embedded store's process, the client process, and the server
process, from /proc) are steadier, and show which side limits the ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import tempfile
import threading
import time
from pathlib import Path

import widetable

from .memory import tree_cpu_seconds
from .systems.widetable_server import KEY_ID, SECRET, start_server, stop_server

FIELDS = [f"field{i}" for i in range(10)]


def _row(i: int) -> tuple[str, dict]:
    return f"user{i:010d}", {f: os.urandom(50).hex().encode() for f in FIELDS}


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds that process ``pid`` has used (Linux /proc; None elsewhere)."""
    return None if pid is None else tree_cpu_seconds(pid)


def _run(threads: int, seconds: float, op, server: int | None = None) -> tuple[float, float, float]:
    """``op(rng)`` on ``threads`` threads: operations per second, and CPU µs per operation
    of this process and of process ``server`` (nan if not known)."""
    cpu = time.process_time(), _cpu_seconds(server)
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
    elapsed, ops = time.monotonic() - start, max(sum(counts), 1)
    here, there = time.process_time() - cpu[0], _cpu_seconds(server)
    served = (there - cpu[1]) if there is not None and cpu[1] is not None else float("nan")
    return ops / elapsed, here / ops * 1e6, served / ops * 1e6


def _operations(db, name: str, records: int, rows: list) -> dict:
    """The measured operations on ``db`` (a store or a connection): GetRow of a random
    one of ``records`` rows (each thread with its own table object), and BatchWriteRow
    of one of the first (up to ten) 200-row batches of ``rows``."""
    local = threading.local()

    def get(rng) -> None:
        t = getattr(local, "t", None)
        if t is None:
            t = local.t = db.table(name)
        t.get_row((f"user{rng.randrange(records):010d}",))

    batches = [[(name, "put", (k,), c) for k, c in rows[j:j + 200]]
               for j in range(0, min(2000, len(rows)), 200)]
    return {"GetRow": get,
            "BatchWriteRow(200)": lambda rng: db.batch_write_row(batches[rng.randrange(len(batches))])}


def _measure(db, name: str, records: int, threads: int, seconds: float,
             server: int | None = None, load: bool = True) -> dict[str, tuple[float, float, float]]:
    """Per operation: op/s, and CPU µs per op here and in process ``server``. ``load``:
    create the table and write its ``records`` rows first (else it holds them already)."""
    rows = [_row(i) for i in range(records if load else min(records, 2000))]
    if load:
        db.create_table(name, [("k", "STRING")])
        for i in range(0, records, 200):
            db.batch_write_row([(name, "put", (k,), c) for k, c in rows[i:i + 200]])
    return {label: _run(threads, seconds, op, server)
            for label, op in _operations(db, name, records, rows).items()}


def _client_process(endpoint: str, name: str, records: int, threads: int, seconds: float,
                    label: str) -> float:
    """Operations per second of one client process running operation ``label``."""
    remote = widetable.connect(endpoint, access_key_id=KEY_ID, access_key_secret=SECRET)
    try:
        op = _operations(remote, name, records, [_row(i) for i in range(2000)])[label]
        return _run(threads, seconds, op)[0]
    finally:
        remote.close()


def _measure_processes(endpoint: str, name: str, records: int, threads: int, seconds: float,
                       processes: int) -> dict[str, float]:
    """``_measure``'s operations, with ``threads`` threads spread over ``processes`` clients
    (the table already exists and holds ``records`` rows)."""
    per = max(1, threads // processes)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        out = {}
        for label in ("GetRow", "BatchWriteRow(200)"):
            args = [(endpoint, name, records, per, seconds, label)] * processes
            out[label] = sum(pool.starmap(_client_process, args))
    return out


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

    return {"GetRow": _run(threads, seconds, get)[0],
            "BatchWriteRow(200)": _run(threads, seconds, write)[0]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--sdk", action="store_true", help="drive the server with the official SDK")
    p.add_argument("--processes", type=int, default=0,
                   help="also measure the server with the threads spread over N client processes")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wt-bench-server-") as root:
        db = widetable.open(str(Path(root) / "embedded"), purge_interval=None)
        embedded = _measure(db, "usertable", args.records, args.threads, args.seconds)
        db.close()
        proc, endpoint, unix = start_server(Path(root) / "served")
        try:
            served = {}
            for how, where in (("TCP", endpoint), ("unix socket", unix)):
                remote = widetable.connect(where, access_key_id=KEY_ID, access_key_secret=SECRET)
                served[how] = _measure(remote, "usertable", args.records, args.threads,
                                       args.seconds, proc.pid, load=not served)
                remote.close()
            if args.sdk:
                sdk = _measure_sdk(endpoint, "usertable", args.records, args.threads, args.seconds)
            if args.processes:
                spread = _measure_processes(endpoint, "usertable", args.records, args.threads,
                                            args.seconds, args.processes)
        finally:
            stop_server(proc)
    print(f"{args.threads} concurrent clients, {args.records} rows, {args.seconds:g} s per measurement")
    print(f"{'operation':<26}{'embedded op/s':>15}{'server op/s':>14}{'ratio':>8}{'target':>8}"
          f"{'CPU µs/op: embedded':>22}{'client':>9}{'server':>9}")
    targets = {"GetRow": 0.3, "BatchWriteRow(200)": 0.5}
    for op, (e, e_cpu, _) in embedded.items():
        for how, figures in served.items():
            s, client_cpu, server_cpu = figures[op]
            label = op if how == "TCP" else f"  (over the {how})"
            target = f"{targets[op]:>8.1f}" if how == "TCP" else f"{'':>8}"
            embedded_cpu = f"{e_cpu:>22.0f}" if how == "TCP" else f"{'':>22}"
            print(f"{label:<26}{e:>15.0f}{s:>14.0f}{s / e:>8.2f}{target}"
                  f"{embedded_cpu}{client_cpu:>9.0f}{server_cpu:>9.0f}")
        if args.sdk:
            print(f"{'  (official SDK)':<26}{'':>15}{sdk[op]:>14.0f}{sdk[op] / e:>8.2f}")
        if args.processes:
            label = f"  ({args.processes} processes)"
            print(f"{label:<26}{'':>15}{spread[op]:>14.0f}{spread[op] / e:>8.2f}")

if __name__ == "__main__":
    main()
