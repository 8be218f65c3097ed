"""``python -m bench.bigtable_grpc``: Bigtable's gRPC API through widetable against Google's
emulator, in one run.

Peers, each a subprocess on a free loopback port: ``widetable serve --bigtable-port``
(``--capacity 0``: no throttling, as the emulator has none) on a fresh store, and
Google's ``cbtemulator`` (Go, in memory, keeps nothing across a restart) from the Google
Cloud CLI's bigtable-emulator component, found on PATH or in the SDK's
``platform/bigtable-emulator/``; without it the emulator columns say so and no ratio
against it is given. Every table holds 10,000 rows of one 100-byte cell.

1. The official data client (``google.cloud.bigtable.data``, one thread, sync):
   ``read_row``, ``mutate_row``, ``bulk_mutate_rows`` of 100 rows, and a 10,000-row
   ``read_rows`` scan; widetable / emulator, target >= 0.8 each.
2. Raw gRPC stubs (Bigtable's messages, no client library), 8 threads: ReadRows of one
   row and MutateRow; widetable / emulator, target >= 0.3. The channel has grpcio's
   ``SingleThreadedUnaryStream`` option (for both peers): without it grpcio's client
   spends about twice the CPU on each ReadRows, a thread handing over every answer.
3. The same through gRPC / through widetable's own protocol (``widetable.connect``:
   get_row / put_row of a one-column row on a Tablestore-model table), 8 threads,
   target >= 0.25.
4. The official Bigtable client's read_row / mutate_row through widetable, beside the
   official Tablestore SDK's get_row / put_row through the same server (one thread).

Each figure is operations per second over ``--seconds``, with the CPU per operation of
the server process (from /proc) and of this client process: they show which side
limits a ratio on a small shared machine, where the client's Python runs on the same
cores as the servers. The figures that a ratio compares (1, and 2 with 3) are measured
in turns, ``ROUNDS`` slices each with the peers' order turned round every round, so
that a change of the machine's load during the run falls on every peer alike. The run ends with where a raw call's server CPU goes: the library
call and the handler timed in this process, the rest being the transport.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from .memory import tree_cpu_seconds

PROJECT, INSTANCE, TABLE = "bench", "bench", "bench"
ROWS = 10_000
VALUE = b"v" * 100
EMULATOR_PATHS = ("/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
                  "/usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator")
KEY_ID, SECRET = "bench", "bench-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def find_emulator() -> str | None:
    found = shutil.which("cbtemulator")
    if found:
        return found
    for path in EMULATOR_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


class Peer:
    def __init__(self, name: str, proc: subprocess.Popen, host: str) -> None:
        self.name, self.proc, self.host = name, proc, host

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_widetable(root: Path) -> tuple[Peer, str]:
    port, bt_port = _free_port(), _free_port()
    env = dict(os.environ, WIDETABLE_ACCESS_KEY_ID=KEY_ID, WIDETABLE_ACCESS_KEY_SECRET=SECRET)
    proc = subprocess.Popen([sys.executable, "-m", "widetable", "serve", "--data", str(root / "data"),
                             "--port", str(port), "--bigtable-port", str(bt_port),
                             "--capacity", "0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait(bt_port, proc, "widetable serve")
    _wait(port, proc, "widetable serve")
    return Peer("widetable", proc, f"127.0.0.1:{bt_port}"), f"http://127.0.0.1:{port}"


def start_emulator(path: str) -> Peer:
    port = _free_port()
    proc = subprocess.Popen([path, "-host", "127.0.0.1", "-port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(port, proc, "cbtemulator")
    return Peer("emulator", proc, f"127.0.0.1:{port}")


# -- timing --------------------------------------------------------------------------------

def _slice(op, seconds: float, threads: int, pid: int | None) -> tuple[int, float, float, float]:
    """``op(rng)`` on ``threads`` threads for ``seconds``: (operations, seconds, server CPU
    seconds or NaN, this process's CPU seconds)."""
    before = tree_cpu_seconds(pid) if pid else None
    here = time.process_time()
    stop = time.monotonic() + seconds
    counts = [0] * threads
    errors: list[BaseException] = []

    def work(n: int) -> None:
        rng = random.Random(n + random.getrandbits(16))
        try:
            while time.monotonic() < stop:
                op(rng)
                counts[n] += 1
        except BaseException as exc:  # noqa: BLE001 - reported, and the figure discarded
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"an operation failed: {errors[0]!r}") from errors[0]
    elapsed = time.monotonic() - start
    after = tree_cpu_seconds(pid) if pid else None
    server = after - before if before is not None and after is not None else float("nan")
    return sum(counts), elapsed, server, time.process_time() - here


def _figure(ops: int, elapsed: float, server: float, client: float) -> dict:
    ops = max(ops, 1)
    return {"ops": ops / elapsed, "cpu_us": server / ops * 1e6, "client_cpu_us": client / ops * 1e6}


def timed(op, seconds: float, threads: int = 1, pid: int | None = None) -> dict:
    """``op(rng)`` on ``threads`` threads for ``seconds``: ops/s and server CPU µs per op."""
    return _figure(*_slice(op, seconds, threads, pid))


ROUNDS = 3  # slices per peer of a figure compared across peers


def alternated(peers: dict, seconds: float, threads: int = 1, rounds: int = ROUNDS) -> dict:
    """``{peer: figure}`` of ``peers`` (``{peer: (op, server pid)}``) measured in turns:
    ``rounds`` slices of ``seconds / rounds`` each, the peers' order turned round every
    round, so that each peer meets the machine's load (other processes, a noisy
    neighbour) as much as the others; each figure sums its peer's slices."""
    sums = {name: [0, 0.0, 0.0, 0.0] for name in peers}
    names = list(peers)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            op, pid = peers[name]
            for k, v in enumerate(_slice(op, seconds / rounds, threads, pid)):
                sums[name][k] += v
    return {name: _figure(*tally) for name, tally in sums.items()}  # type: ignore[arg-type]


# -- the official data client ----------------------------------------------------------------

def _data_client(host: str):
    os.environ["BIGTABLE_EMULATOR_HOST"] = host
    from google.cloud.bigtable.data import BigtableDataClient

    return BigtableDataClient(project=PROJECT)


def load(host: str) -> None:
    """The bench table (family ``cf``) with ROWS rows, through the official clients."""
    os.environ["BIGTABLE_EMULATOR_HOST"] = host
    from google.cloud import bigtable
    from google.cloud.bigtable.data import RowMutationEntry, SetCell

    admin = bigtable.Client(project=PROJECT, admin=True)
    admin.instance(INSTANCE).table(TABLE).create(column_families={"cf": None})
    client = _data_client(host)
    t = client.get_table(INSTANCE, TABLE)
    for start in range(0, ROWS, 1000):
        t.bulk_mutate_rows([RowMutationEntry(b"user%06d" % i, [SetCell("cf", b"field0", VALUE, 1000)])
                            for i in range(start, min(start + 1000, ROWS))])
    client.close()


def data_client_ops(peers: dict, seconds: float) -> dict:
    """``{peer: {measure: figure}}``: the official data client's calls against each peer
    (``{peer: (host, server pid)}``), each measure alternated across the peers."""
    from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, SetCell

    clients = {name: _data_client(host) for name, (host, _) in peers.items()}
    tables = {name: c.get_table(INSTANCE, TABLE) for name, c in clients.items()}

    def read_row(t):
        return lambda r: t.read_row(b"user%06d" % r.randrange(ROWS))

    def mutate_row(t):
        return lambda r: t.mutate_row(b"user%06d" % r.randrange(ROWS),
                                      SetCell("cf", b"field0", VALUE, 2000))

    def bulk(t):
        def op(r):
            base = r.randrange(ROWS - 100)
            t.bulk_mutate_rows([RowMutationEntry(b"user%06d" % (base + i),
                                                 [SetCell("cf", b"field0", VALUE, 3000)])
                                for i in range(100)])
        return op

    def scan(t):
        def op(r):
            n = len(t.read_rows(ReadRowsQuery()))
            assert n == ROWS, n
        return op

    out: dict = {name: {} for name in peers}
    for measure, make, secs in (("read_row", read_row, seconds), ("mutate_row", mutate_row, seconds),
                                ("bulk_mutate_rows(100)", bulk, seconds),
                                (f"read_rows({ROWS:,})", scan,
                                 max(seconds, 3.0) if ROWS >= 10_000 else seconds)):
        figures = alternated({name: (make(tables[name]), peers[name][1]) for name in peers}, secs)
        for name, fig in figures.items():
            out[name][measure] = fig
    for c in clients.values():
        c.close()
    return out


def official_pair(host: str, endpoint: str, seconds: float, pid: int | None) -> dict:
    """The official Bigtable client's read_row / mutate_row beside the Tablestore SDK's
    get_row / put_row, through the same widetable server."""
    import logging

    from google.cloud.bigtable.data import SetCell
    from tablestore import (
        BatchWriteRowRequest,
        CapacityUnit,
        Condition,
        OTSClient,
        PutRowItem,
        ReservedThroughput,
        Row,
        RowExistenceExpectation,
        TableInBatchWriteRowItem,
        TableMeta,
        TableOptions,
    )

    client = _data_client(host)
    t = client.get_table(INSTANCE, TABLE)
    out = {"bigtable read_row": timed(lambda r: t.read_row(b"user%06d" % r.randrange(ROWS)), seconds, pid=pid),
           "bigtable mutate_row": timed(lambda r: t.mutate_row(
               b"user%06d" % r.randrange(ROWS), SetCell("cf", b"field0", VALUE, 2000)), seconds, pid=pid)}
    client.close()
    logging.getLogger("bench-ots").setLevel(logging.CRITICAL)
    ots = OTSClient(endpoint, KEY_ID, SECRET, "widetable", logger_name="bench-ots")
    ots.create_table(TableMeta("ots", [("k", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    cond = Condition(RowExistenceExpectation.IGNORE)
    for i in range(0, ROWS, 200):
        req = BatchWriteRowRequest()
        req.add(TableInBatchWriteRowItem("ots", [
            PutRowItem(Row([("k", "user%06d" % j)], [("field0", VALUE.decode())]), cond)
            for j in range(i, min(i + 200, ROWS))]))
        ots.batch_write_row(req)
    out["tablestore get_row"] = timed(lambda r: ots.get_row("ots", [("k", "user%06d" % r.randrange(ROWS))],
                                                             max_version=1), seconds, pid=pid)
    out["tablestore put_row"] = timed(lambda r: ots.put_row("ots", Row(
        [("k", "user%06d" % r.randrange(ROWS))], [("field0", VALUE.decode())]), cond), seconds, pid=pid)
    return out


# -- raw gRPC stubs and the native protocol ---------------------------------------------------

def raw_stub_ops(host: str):
    """``({measure: op}, close)``: ReadRows of one row and MutateRow through raw gRPC
    stubs on one channel (Bigtable's messages, no client library)."""
    import grpc
    from google.cloud.bigtable_v2 import types as dt

    def pb(msg):
        return type(msg).pb(msg).SerializeToString()

    # grpcio's own option for unary-stream calls (its performance guide's advice): the
    # answer is read on the calling thread, not on a thread made per call; both peers get it
    channel = grpc.insecure_channel(
        host, options=[(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)])
    ident = lambda b: b  # noqa: E731
    read = channel.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", ident, ident)
    write = channel.unary_unary("/google.bigtable.v2.Bigtable/MutateRow", ident, ident)
    name = f"projects/{PROJECT}/instances/{INSTANCE}/tables/{TABLE}"
    reads = [pb(dt.ReadRowsRequest(table_name=name, rows=dt.RowSet(row_keys=[b"user%06d" % i])))
             for i in range(ROWS)]
    writes = [pb(dt.MutateRowRequest(table_name=name, row_key=b"user%06d" % i, mutations=[
        dt.Mutation(set_cell=dt.Mutation.SetCell(family_name="cf", column_qualifier=b"field0",
                                                 timestamp_micros=4000, value=VALUE))]))
        for i in range(ROWS)]

    def one_read(r):
        got = list(read(reads[r.randrange(ROWS)]))
        assert got, "no row"

    return ({"ReadRows(1 row)": one_read,
             "MutateRow": lambda r: write(writes[r.randrange(ROWS)])}, channel.close)


def native_ops(endpoint: str):
    """``({measure: op}, close)``: get_row / put_row of a one-column row (100 bytes) of a
    Tablestore-model table, through widetable.connect (widetable's own protocol), each
    thread its table object."""
    import widetable

    db = widetable.connect(endpoint, access_key_id=KEY_ID, access_key_secret=SECRET)
    db.create_table("native", [("k", "STRING")])
    keys = [("user%06d" % i,) for i in range(ROWS)]
    for i in range(0, ROWS, 200):
        db.batch_write_row([("native", "put", k, {"field0": VALUE}) for k in keys[i:i + 200]])
    local = threading.local()

    def table():
        t = getattr(local, "t", None)
        if t is None:
            t = local.t = db.table("native")
        return t

    def get(r):
        assert table().get_row(keys[r.randrange(ROWS)]) is not None

    return ({"ReadRows(1 row)": get,
             "MutateRow": lambda r: table().put_row(keys[r.randrange(ROWS)], {"field0": VALUE})},
            db.close)


def raw_and_native(wt, emu, endpoint: str, seconds: float, threads: int) -> dict:
    """``{"raw_grpc": {peer: {measure: figure}}, "native": {measure: figure}}``: raw gRPC
    against each peer and the native protocol against widetable, each measure
    alternated across the three."""
    peers = {"widetable": (raw_stub_ops(wt.host), wt.proc.pid),
             "native": (native_ops(endpoint), wt.proc.pid)}
    if emu is not None:
        peers["emulator"] = (raw_stub_ops(emu.host), emu.proc.pid)
    out: dict = {"raw_grpc": {"widetable": {}}, "native": {}}
    if emu is not None:
        out["raw_grpc"]["emulator"] = {}
    try:
        for measure in ("ReadRows(1 row)", "MutateRow"):
            figures = alternated({name: (ops[measure], pid) for name, ((ops, _), pid) in peers.items()},
                                 seconds, threads)
            for name, fig in figures.items():
                (out["native"] if name == "native" else out["raw_grpc"][name])[measure] = fig
    finally:
        for (_, close), _ in peers.values():
            close()
    return out


# -- where the time goes ----------------------------------------------------------------------

def layers(root: Path, n: int = 3000) -> dict:
    """In this process, µs per call of each layer under the gRPC figures: the library call
    alone, and the server's handler (request parse, decode, the library call, the answer's
    encoding) without gRPC. Their difference from the server's CPU per operation is what
    the transport costs per call (server/http2: HTTP/2 frames, HPACK, gRPC framing, the
    event loop and the socket calls)."""
    import widetable
    from widetable.bigtable.types import FamilySpec, SetCell
    from widetable.server.bigtable.data import DataService
    from widetable.wire.bigtable import v2

    db = widetable.open(str(root / "layers"), purge_interval=None)
    try:
        bt = db.bigtable
        bt.create_table(TABLE, [FamilySpec("cf")])
        t = bt.table(TABLE)
        t.mutate_rows([(b"user%06d" % i, [SetCell("cf", b"field0", 1000, VALUE)]) for i in range(ROWS)])
        name = f"projects/{PROJECT}/instances/{INSTANCE}/tables/{TABLE}"
        reads = [v2.ReadRowsRequest(table_name=name, rows=v2.RowSet(row_keys=[b"user%06d" % (i % ROWS)]))
                 .SerializeToString() for i in range(n)]
        writes = [v2.MutateRowRequest(table_name=name, row_key=b"user%06d" % (i % ROWS), mutations=[
            v2.Mutation(set_cell=v2.Mutation.SetCell(family_name="cf", column_qualifier=b"field0",
                                                     timestamp_micros=5000, value=VALUE))])
            .SerializeToString() for i in range(n)]
        ds = DataService(bt)

        def per_call(fn) -> float:
            start = time.process_time()
            for i in range(n):
                fn(i)
            return (time.process_time() - start) / n * 1e6

        out = {
            "ReadRows(1 row)": {
                "library": per_call(lambda i: t.read_row(b"user%06d" % (i % ROWS))),
                "handler": per_call(lambda i: b"".join(ds.read_rows(
                    v2.ReadRowsRequest.FromString(reads[i]), None))),
            },
            "MutateRow": {
                "library": per_call(lambda i: t.mutate_row(
                    b"user%06d" % (i % ROWS), [SetCell("cf", b"field0", 6000, VALUE)])),
                "handler": per_call(lambda i: ds.mutate_row(
                    v2.MutateRowRequest.FromString(writes[i]), None).SerializeToString()),
            },
        }
        return out
    finally:
        db.close()


# -- the run --------------------------------------------------------------------------------

def run(seconds: float = 3.0, threads: int = 8, rows: int = ROWS) -> dict:
    global ROWS
    ROWS = rows  # every table's rows (the scan reads them all)
    warnings.filterwarnings("ignore")
    report: dict = {"emulator": None, "seconds": seconds, "threads": threads, "rows": rows}
    emulator_path = find_emulator()
    tmp = tempfile.TemporaryDirectory(prefix="bench-bt-")
    peers: list[Peer] = []
    try:
        wt, endpoint = start_widetable(Path(tmp.name))
        peers.append(wt)
        load(wt.host)
        emu = None
        if emulator_path is not None:
            emu = start_emulator(emulator_path)
            peers.append(emu)
            load(emu.host)
            report["emulator"] = emulator_path
        hosts = {"widetable": (wt.host, wt.proc.pid)}
        if emu is not None:
            hosts["emulator"] = (emu.host, emu.proc.pid)
        report["data_client"] = data_client_ops(hosts, seconds)
        report.update(raw_and_native(wt, emu, endpoint, seconds, threads))
        report["official"] = official_pair(wt.host, endpoint, seconds, wt.proc.pid)
        report["layers"] = layers(Path(tmp.name))
    finally:
        for p in peers:
            p.stop()
        tmp.cleanup()
    return report


def ratios(report: dict) -> list[tuple[str, str, float | None, float]]:
    """``[(group, measure, ratio or None, target)]``."""
    out = []
    for group, target in (("data_client", 0.8), ("raw_grpc", 0.3)):
        ours = report[group]["widetable"]
        theirs = report[group].get("emulator")
        for measure, fig in ours.items():
            out.append((f"{group} widetable/emulator", measure,
                        fig["ops"] / theirs[measure]["ops"] if theirs else None, target))
    for measure, fig in report["raw_grpc"]["widetable"].items():
        out.append(("gRPC/native", measure, fig["ops"] / report["native"][measure]["ops"], 0.25))
    return out


def print_report(report: dict) -> None:
    if report["emulator"] is None:
        print("cbtemulator NOT FOUND (PATH, or the Google Cloud SDK's platform/bigtable-emulator/): "
              "no figures against Google's emulator")
    else:
        print(f"emulator: {report['emulator']}")
    print(f"{report['seconds']} s per figure; raw gRPC and native: {report['threads']} threads\n")
    for group in ("data_client", "raw_grpc"):
        print(f"{group}:")
        for measure, fig in report[group]["widetable"].items():
            emu = report[group].get("emulator", {}).get(measure) if report[group].get("emulator") else None
            line = (f"  {measure:<22} widetable {fig['ops']:8.1f}/s (server {fig['cpu_us']:6.0f} µs,"
                    f" client {fig['client_cpu_us']:6.0f} µs cpu)")
            if emu:
                line += (f"   emulator {emu['ops']:8.1f}/s (server {emu['cpu_us']:6.0f} µs,"
                         f" client {emu['client_cpu_us']:6.0f} µs)")
            print(line)
    print("native protocol (widetable.connect):")
    for measure, fig in report["native"].items():
        print(f"  {measure:<22} {fig['ops']:8.1f}/s (server {fig['cpu_us']:6.0f} µs, client "
              f"{fig['client_cpu_us']:6.0f} µs cpu)")
    print("official clients through widetable (one thread):")
    for measure, fig in report["official"].items():
        print(f"  {measure:<22} {fig['ops']:8.1f}/s (server {fig['cpu_us']:6.0f} µs, client "
              f"{fig['client_cpu_us']:6.0f} µs cpu)")
    print("\nwhere a raw gRPC call's server CPU goes (µs per call; library and handler "
          "measured in this process):")
    for measure, parts in report["layers"].items():
        total = report["raw_grpc"]["widetable"][measure]["cpu_us"]
        emu = report["raw_grpc"].get("emulator", {}).get(measure) if report["raw_grpc"].get(
            "emulator") else None
        transport = total - parts["handler"]
        line = (f"  {measure:<22} library {parts['library']:5.0f}, handler (parse, decode, "
                f"library, encode) {parts['handler']:5.0f}, transport {transport:5.0f} "
                f"= {total:5.0f} in all")
        if emu:
            line += f"; the emulator's whole server {emu['cpu_us']:5.0f}"
        print(line)
    native = report["native"]
    print(f"  native protocol, whole server: get_row {native['ReadRows(1 row)']['cpu_us']:.0f}, "
          f"put_row {native['MutateRow']['cpu_us']:.0f}")
    print("\nratios:")
    for group, measure, ratio, target in ratios(report):
        if ratio is None:
            print(f"  {group:<32} {measure:<24}   n/a (no emulator)  target >= {target}")
        else:
            verdict = "met" if ratio >= target else "MISSED"
            print(f"  {group:<32} {measure:<24} {ratio:6.2f}  target >= {target}  {verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bigtable_grpc", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per figure")
    parser.add_argument("--threads", type=int, default=8, help="threads of the raw and native figures")
    parser.add_argument("--rows", type=int, default=ROWS, help="rows of each table (min 200)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    report = run(args.seconds, args.threads, max(args.rows, 200))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
