"""A fuzzer of ``widetable serve``'s Bigtable gRPC port (``python -m bench.fuzz.bigtable``).

It starts a fresh server with ``--bigtable-port``, loads a sentinel table through the
official client, then sends malformed requests to every RPC of the data and table admin
APIs (and a few of instance admin) over raw gRPC while a valid data client keeps
writing and reading, and checks:

* the server never crashes: its process stays up, exits 0 on SIGTERM, and its log has
  no traceback;
* every answer is a clear status: OK, or one of INVALID_ARGUMENT, NOT_FOUND,
  ALREADY_EXISTS, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED with a message;
  never INTERNAL, UNKNOWN or RESOURCE_EXHAUSTED (throttling is off), never a hang past
  ``--timeout``;
* the sentinel table is as it was loaded, and the valid client read back everything it
  wrote, during the run and after it.

Seeds are valid requests built with the official client's message classes (protobuf's
default pool): this fuzzer imports nothing of widetable, so it keeps working however the
server is laid out. Cases are the seeds' bytes mutated (bits flipped, bytes cut, inserted
or spliced from another seed, varints overlong or out of range, unknown fields of every
wire type, invalid UTF-8 in strings) and structured edge values (negative limits, huge
counts, deep filter nesting, bad regexes, oversized keys, bad names).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# RESOURCE_EXHAUSTED is not among them: the server runs with --capacity 0 (no throttling),
# so it would come from grpc itself (a status message over the trailers' size, say)
CLEAR = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION",
         "OUT_OF_RANGE", "UNIMPLEMENTED"}
PROJECT, INSTANCE = "fuzz-project", "fuzz-instance"
PARENT = f"projects/{PROJECT}/instances/{INSTANCE}"
FUZZ, SENTINEL, LIVE = "fuzzed", "sentinel", "live"


@dataclass
class Report:
    requests: int = 0
    outcomes: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)
    live_ops: int = 0
    exit_status: int | None = None

    @property
    def clean(self) -> bool:
        return not self.findings and self.exit_status == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seeds():
    """``[(service, method, streaming, serialized request)]``: valid requests of each RPC."""
    from google.cloud.bigtable_admin_v2 import types as at
    from google.cloud.bigtable_v2 import types as dt

    def pb(msg):
        return type(msg).pb(msg)

    T = f"{PARENT}/tables/{FUZZ}"
    flt = dt.RowFilter(chain=dt.RowFilter.Chain(filters=[
        dt.RowFilter(family_name_regex_filter="cf"),
        dt.RowFilter(interleave=dt.RowFilter.Interleave(filters=[
            dt.RowFilter(column_qualifier_regex_filter=b"q.*"),
            dt.RowFilter(value_range_filter=dt.ValueRange(start_value_closed=b"a", end_value_open=b"z")),
            dt.RowFilter(timestamp_range_filter=dt.TimestampRange(start_timestamp_micros=1000)),
        ])),
        dt.RowFilter(condition=dt.RowFilter.Condition(
            predicate_filter=dt.RowFilter(row_key_regex_filter=b"k.*"),
            true_filter=dt.RowFilter(cells_per_column_limit_filter=2),
            false_filter=dt.RowFilter(strip_value_transformer=True))),
        dt.RowFilter(apply_label_transformer="lbl"),
    ]))
    muts = [dt.Mutation(set_cell=dt.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                     timestamp_micros=2000, value=b"v")),
            dt.Mutation(delete_from_column=dt.Mutation.DeleteFromColumn(
                family_name="cf", column_qualifier=b"q",
                time_range=dt.TimestampRange(start_timestamp_micros=1000, end_timestamp_micros=3000))),
            dt.Mutation(delete_from_family=dt.Mutation.DeleteFromFamily(family_name="cf")),
            dt.Mutation(delete_from_row=dt.Mutation.DeleteFromRow()),
            dt.Mutation(add_to_cell=dt.Mutation.AddToCell(
                family_name="agg", column_qualifier=dt.Value(raw_value=b"n"),
                timestamp=dt.Value(raw_timestamp_micros=1000), input=dt.Value(int_value=3)))]
    data = "google.bigtable.v2.Bigtable"
    admin = "google.bigtable.admin.v2.BigtableTableAdmin"
    seeds = [
        (data, "ReadRows", True, pb(dt.ReadRowsRequest(
            table_name=T, rows_limit=5, filter=flt,
            rows=dt.RowSet(row_keys=[b"k1"], row_ranges=[dt.RowRange(start_key_closed=b"a",
                                                                     end_key_open=b"m")])))),
        (data, "ReadRows", True, pb(dt.ReadRowsRequest(table_name=T, reversed=True,
                                                        filter=dt.RowFilter(row_sample_filter=0.5)))),
        (data, "MutateRow", False, pb(dt.MutateRowRequest(table_name=T, row_key=b"k1",
                                                          mutations=muts[:1]))),
        (data, "MutateRow", False, pb(dt.MutateRowRequest(table_name=T, row_key=b"k2",
                                                          mutations=muts))),
        (data, "MutateRows", True, pb(dt.MutateRowsRequest(table_name=T, entries=[
            dt.MutateRowsRequest.Entry(row_key=b"k%d" % i, mutations=muts[i % 5:i % 5 + 1])
            for i in range(6)]))),
        (data, "CheckAndMutateRow", False, pb(dt.CheckAndMutateRowRequest(
            table_name=T, row_key=b"k1", predicate_filter=flt, true_mutations=muts[:1],
            false_mutations=muts[1:2]))),
        (data, "ReadModifyWriteRow", False, pb(dt.ReadModifyWriteRowRequest(
            table_name=T, row_key=b"k3", rules=[
                dt.ReadModifyWriteRule(family_name="cf", column_qualifier=b"n", increment_amount=2),
                dt.ReadModifyWriteRule(family_name="cf", column_qualifier=b"s", append_value=b"x")]))),
        (data, "SampleRowKeys", True, pb(dt.SampleRowKeysRequest(table_name=T))),
        (data, "PingAndWarm", False, pb(dt.PingAndWarmRequest(name=PARENT))),
        (data, "ExecuteQuery", True, pb(dt.ExecuteQueryRequest(instance_name=PARENT,
                                                               query="SELECT 1"))),
        (data, "PrepareQuery", False, pb(dt.PrepareQueryRequest(
            instance_name=PARENT, param_types={"p": dt.Type(bytes_type=dt.Type.Bytes())},
            query=f"SELECT _key, cf['q'] AS v, COUNT(*) AS n FROM `{FUZZ}` WHERE "
                  "STARTS_WITH(_key, @p) AND cf['q'] IS NOT NULL GROUP BY _key, v "
                  "ORDER BY n DESC LIMIT 5"))),
        (admin, "GetTable", False, pb(at.GetTableRequest(name=T))),
        (admin, "ListTables", False, pb(at.ListTablesRequest(parent=PARENT, page_size=2))),
        (admin, "CreateTable", False, pb(at.CreateTableRequest(
            parent=PARENT, table_id="made",
            table=at.Table(column_families={"cf": at.ColumnFamily(gc_rule=at.GcRule(
                union=at.GcRule.Union(rules=[at.GcRule(max_num_versions=2),
                                             at.GcRule(max_age={"seconds": 60})])))}),
            initial_splits=[at.CreateTableRequest.Split(key=b"g")]))),
        (admin, "ModifyColumnFamilies", False, pb(at.ModifyColumnFamiliesRequest(
            name=T, modifications=[
                at.ModifyColumnFamiliesRequest.Modification(
                    id="new", create=at.ColumnFamily(gc_rule=at.GcRule(max_num_versions=1))),
                at.ModifyColumnFamiliesRequest.Modification(
                    id="cf", update=at.ColumnFamily(gc_rule=at.GcRule(max_num_versions=3)))]))),
        (admin, "DropRowRange", False, pb(at.DropRowRangeRequest(name=T, row_key_prefix=b"k9"))),
        (admin, "DeleteTable", False, pb(at.DeleteTableRequest(name=f"{PARENT}/tables/made"))),
        (admin, "CheckConsistency", False, pb(at.CheckConsistencyRequest(name=T,
                                                                         consistency_token="x"))),
        ("google.bigtable.admin.v2.BigtableInstanceAdmin", "GetInstance", False,
         pb(at.GetInstanceRequest(name=PARENT))),
    ]
    return [(s, m, st, msg.SerializeToString()) for s, m, st, msg in seeds]


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 70) - 1
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> tuple[str, bytes]:
    """One malformed variant of ``data``: ``(kind, bytes)``."""
    kind = rng.choice(("flip", "cut", "insert", "splice", "overlong", "unknown", "utf8",
                       "length", "nest", "huge", "empty"))
    b = bytearray(data)
    if kind == "flip" and b:
        for _ in range(rng.choice((1, 2, 4, 8))):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == "cut" and b:
        b = b[:rng.randrange(len(b))]
    elif kind == "insert":
        at = rng.randrange(len(b) + 1)
        b[at:at] = os.urandom(rng.choice((1, 3, 16)))
    elif kind == "splice":
        other = rng.choice(others)
        at = rng.randrange(len(b) + 1)
        b = b[:at] + other[rng.randrange(len(other) + 1):]
    elif kind == "overlong":  # a field with an 11-byte varint, or a value past int64
        b += bytes([rng.choice((0x08, 0x20, 0x38, 0x48))]) + (
            b"\xff" * 10 + b"\x01" if rng.random() < 0.5 else _varint(rng.choice((2**63, 2**64 - 1, 2**31))))
    elif kind == "unknown":  # a field number the message lacks, in every wire type
        field_no = rng.choice((15, 99, 536870911))
        wt = rng.choice((0, 1, 2, 5, 3, 4, 6, 7))
        body = {0: _varint(7), 1: b"\x00" * 8, 2: b"\x03abc", 5: b"\x00" * 4}.get(wt, b"")
        b += _varint(field_no << 3 | wt) + body
    elif kind == "utf8":  # a string field's bytes replaced by invalid UTF-8
        at = b.find(b"projects/")
        if at > 0:
            b[at:at + 2] = b"\xff\xfe"
    elif kind == "length" and b:  # a length prefix made longer or shorter than what follows
        at = rng.randrange(len(b))
        b[at] = rng.choice((0x7F, 0x00, 0xFF))
    elif kind == "nest":  # a filter nested far past any limit
        depth = rng.choice((30, 100, 2000))
        inner = b"\x88\x01\x01"  # pass_all_filter: true
        for _ in range(depth):
            inner = b"\x0a" + _varint(len(inner)) + inner  # chain.filters
            inner = b"\x0a" + _varint(len(inner)) + inner  # RowFilter.chain
        b += b"\x1a" + _varint(len(inner)) + inner  # ReadRowsRequest.filter = 3
    elif kind == "huge":  # a large key or value
        size = rng.choice((4097, 20_000, 2**20))
        b += b"\x12" + _varint(size) + b"k" * size
    elif kind == "empty":
        b = bytearray()
    return kind, bytes(b)


def _structured(rng: random.Random, T: str):
    """Well-formed requests with edge values: ``(service, method, streaming, bytes, kind)``."""
    from google.cloud.bigtable_v2 import types as dt

    def pb(msg):
        return type(msg).pb(msg).SerializeToString()

    data = "google.bigtable.v2.Bigtable"
    choice = rng.randrange(8)
    if choice == 0:
        return data, "ReadRows", True, pb(dt.ReadRowsRequest(table_name=T, rows_limit=-rng.randrange(1, 2**40))), "negative limit"
    if choice == 1:
        regex = rng.choice((b"(", b"[z-a]", b"\\", b"a{1001}", b"(?P<n>", b"\xff("))
        return data, "ReadRows", True, pb(dt.ReadRowsRequest(table_name=T, filter=dt.RowFilter(
            value_regex_filter=regex))), "bad regex"
    if choice == 2:
        n = rng.choice((-1, -2**31, 2**31 - 1))
        return data, "ReadRows", True, pb(dt.ReadRowsRequest(table_name=T, filter=dt.RowFilter(
            cells_per_row_limit_filter=n))), "edge count"
    if choice == 3:
        name = rng.choice(("", "tables/x", "projects//instances/i/tables/t", T + "/extra", "x" * 5000))
        return data, "MutateRow", False, pb(dt.MutateRowRequest(table_name=name, row_key=b"k", mutations=[
            dt.Mutation(delete_from_row=dt.Mutation.DeleteFromRow())])), "bad name"
    if choice == 4:
        ts = rng.choice((-2, 1, 999, 2**63 - 1, -2**63))
        return data, "MutateRow", False, pb(dt.MutateRowRequest(table_name=T, row_key=b"k", mutations=[
            dt.Mutation(set_cell=dt.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                     timestamp_micros=ts, value=b"v"))])), "bad timestamp"
    if choice == 5:
        fam = rng.choice(("", "no such", "x" * 300, "cf\x00", "agg"))
        return data, "MutateRow", False, pb(dt.MutateRowRequest(table_name=T, row_key=b"k", mutations=[
            dt.Mutation(set_cell=dt.Mutation.SetCell(family_name=fam, column_qualifier=b"q" * rng.choice((1, 17000)),
                                                     timestamp_micros=1000, value=b"v"))])), "bad family"
    if choice == 6:
        p = rng.choice((-0.5, 0.0, 1.0, 7.0, float("nan")))
        return data, "ReadRows", True, pb(dt.ReadRowsRequest(table_name=T, filter=dt.RowFilter(
            row_sample_filter=p))), "bad probability"
    amount = rng.choice((2**63 - 1, -2**63))
    return data, "ReadModifyWriteRow", False, pb(dt.ReadModifyWriteRowRequest(
        table_name=T, row_key=b"k", rules=[dt.ReadModifyWriteRule(family_name="agg", column_qualifier=b"n",
                                                                  increment_amount=amount)])), "increment"


def run(requests: int, seed: int = 0, timeout: float = 10.0, workdir: Path | None = None) -> Report:
    import grpc

    warnings.filterwarnings("ignore")
    rng = random.Random(seed)
    report = Report()
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bt-fuzz-")
        workdir = Path(tmp.name)
    port, bt_port = _free_port(), _free_port()
    log = open(workdir / "server.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "widetable", "serve", "--data",
                             str(workdir / "data"), "--port", str(port), "--bigtable-port",
                             str(bt_port), "--capacity", "0"], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, WIDETABLE_ACCESS_KEY_ID="k",
                                     WIDETABLE_ACCESS_KEY_SECRET="s"))
    host = f"127.0.0.1:{bt_port}"
    try:
        _wait(bt_port, proc)
        os.environ["BIGTABLE_EMULATOR_HOST"] = host
        sentinel = _load(host)
        live = _Live(host)
        live.start()
        channel = grpc.insecure_channel(host, options=[("grpc.max_receive_message_length", -1)])
        seeds = _seeds()
        others = [s[3] for s in seeds]
        T = f"{PARENT}/tables/{FUZZ}"
        for i in range(requests):
            if rng.random() < 0.2:
                service, method, streaming, body, kind = _structured(rng, T)
            else:
                service, method, streaming, body = rng.choice(seeds)
                kind, body = mutate(rng, body, others)
            report.kinds[f"{method} {kind}"] += 1
            outcome = _send(channel, service, method, streaming, body, timeout)
            report.requests += 1
            code = outcome[0]
            report.outcomes[f"{method} {code}"] += 1
            if code not in CLEAR or (code != "OK" and not outcome[1]) or "Traceback" in outcome[1]:
                report.findings.append((method, kind, body[:200], outcome))
            if proc.poll() is not None:
                report.findings.append(("server", "exited", b"", (proc.returncode, "")))
                break
        channel.close()
        live.stop()
        report.live_ops = live.ops
        report.findings.extend(("live client", "error", b"", (e, "")) for e in live.errors[:5])
        if _read_all(host, SENTINEL) != sentinel:
            report.findings.append(("sentinel", "changed", b"", ("", "")))
        if not live.verify():
            report.findings.append(("live client", "lost writes", b"", ("", "")))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            report.exit_status = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            report.exit_status = -9
        log.seek(0)
        text = log.read()
        log.close()
        if "Traceback" in text or " ERROR " in text:
            report.findings.append(("server log", "traceback", b"", ("", text[-2000:])))
        if tmp is not None and report.clean:
            tmp.cleanup()
    return report


def _wait(port: int, proc, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("widetable serve exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("widetable serve did not start")


def _send(channel, service, method, streaming, body, timeout):
    import grpc

    ident = lambda b: b  # noqa: E731
    path = f"/{service}/{method}"
    try:
        if streaming:
            for _ in channel.unary_stream(path, request_serializer=ident,
                                          response_deserializer=ident)(body, timeout=timeout):
                pass
        else:
            channel.unary_unary(path, request_serializer=ident,
                                response_deserializer=ident)(body, timeout=timeout)
        return "OK", ""
    except grpc.RpcError as exc:
        return exc.code().name, exc.details() or ""


def _admin(host: str):
    from google.cloud import bigtable

    return bigtable.Client(project=PROJECT, admin=True).instance(INSTANCE)


def _load(host: str) -> list:
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell
    from google.cloud.bigtable_admin_v2 import types as at

    inst = _admin(host)
    for name in (FUZZ, SENTINEL, LIVE):
        inst.table(name).create(column_families={"cf": None})
    agg = at.ColumnFamily(value_type=at.Type(aggregate_type=at.Type.Aggregate(
        input_type=at.Type(int64_type=at.Type.Int64()), sum=at.Type.Aggregate.Sum())))
    inst._client.table_admin_client.modify_column_families(
        name=f"{PARENT}/tables/{FUZZ}",
        modifications=[at.ModifyColumnFamiliesRequest.Modification(id="agg", create=agg)])
    client = BigtableDataClient(project=PROJECT)
    client.get_table(INSTANCE, SENTINEL).bulk_mutate_rows([
        RowMutationEntry(b"s%03d" % i, [SetCell("cf", b"q", b"sentinel %d" % i, 1000)])
        for i in range(100)])
    client.close()
    return _read_all(host, SENTINEL)


def _read_all(host: str, table: str) -> list:
    from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery

    client = BigtableDataClient(project=PROJECT)
    try:
        return [(r.row_key, [(c.family, c.qualifier, c.timestamp_micros, c.value) for c in r.cells])
                for r in client.get_table(INSTANCE, table).read_rows(ReadRowsQuery())]
    finally:
        client.close()


class _Live(threading.Thread):
    """A valid data client writing and reading its own table throughout the run."""

    def __init__(self, host: str) -> None:
        super().__init__(daemon=True)
        self.host = host
        self.ops = 0
        self.errors: list[str] = []
        self.written: dict[bytes, bytes] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        from google.cloud.bigtable.data import BigtableDataClient, SetCell

        client = BigtableDataClient(project=PROJECT)
        t = client.get_table(INSTANCE, LIVE)
        i = 0
        try:
            while not self._halt.is_set():
                key, value = b"live%06d" % i, b"value %d" % i
                try:
                    t.mutate_row(key, SetCell("cf", b"q", value, 1000))
                    self.written[key] = value
                    row = t.read_row(key)
                    if row is None or row.cells[0].value != value:
                        self.errors.append(f"read back {key!r}: {row}")
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(repr(exc))
                self.ops += 2
                i += 1
                time.sleep(0.005)
        finally:
            client.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def verify(self) -> bool:
        rows = dict((k, cells[0][3]) for k, cells in _read_all(self.host, LIVE))
        return all(rows.get(k) == v for k, v in self.written.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz.bigtable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    report = run(args.requests, args.seed, args.timeout, args.workdir)
    print(f"{report.requests} requests in {time.monotonic() - t0:.0f} s, {report.live_ops} live "
          f"operations, server exit {report.exit_status}")
    for outcome, n in sorted(report.outcomes.items()):
        print(f"  {n:6d}  {outcome}")
    for f in report.findings[:30]:
        print("FINDING", f)
    print("clean" if report.clean else f"{len(report.findings)} findings")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
