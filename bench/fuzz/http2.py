"""A frame-level fuzzer of the Bigtable port's HTTP/2 transport
(``python -m bench.fuzz.http2``).

It starts a fresh ``widetable serve --bigtable-port``, writes a sentinel row through
grpcio, then opens one connection per case and sends a valid exchange (preface,
SETTINGS, a MutateRow and a ReadRows as HEADERS, CONTINUATION and DATA frames, PING,
PRIORITY, WINDOW_UPDATE, RST_STREAM, GOAWAY) mutated at the frame level: bits flipped,
types, flags, stream ids and lengths changed, payloads cut or grown, frames dropped,
repeated, swapped or inserted, header blocks damaged, SETTINGS values drawn at random, the
bytes sent in random pieces. It checks:

* the server never crashes: its process stays up, exits 0 on SIGTERM, and its log has no
  traceback;
* what it sends back is well-formed frames, GOAWAY codes among HTTP/2's, and every
  connection ends (the server closes it, or it goes quiet with nothing left to answer);
* a grpcio client reads the sentinel row back, correctly, every ``--check-every`` cases.

Exits 1 if anything was found.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
TABLE = "projects/fuzz/instances/fuzz/tables/t"
CODES = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
         "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
         "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
         "HTTP_1_1_REQUIRED"]


@dataclass
class Report:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)
    checks: int = 0
    exit_status: int | None = None

    @property
    def clean(self) -> bool:
        return not self.findings


def frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, kind, flags, sid) + payload


def _messages():
    """A MutateRow and a ReadRows request, serialized with the official client's classes
    (this fuzzer imports nothing of widetable)."""
    from google.cloud.bigtable_v2 import types as dt

    def pb(msg):
        return type(msg).pb(msg).SerializeToString()
    mutate = pb(dt.MutateRowRequest(table_name=TABLE, row_key=b"fuzzed", mutations=[
        dt.Mutation(set_cell=dt.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                 timestamp_micros=1000, value=b"x" * 50))]))
    read = pb(dt.ReadRowsRequest(table_name=TABLE, rows=dt.RowSet(row_keys=[b"fuzzed"])))
    return mutate, read


def _headers(path: str, huffman: bool) -> bytes:
    from hpack import Encoder

    return Encoder().encode([(":method", "POST"), (":scheme", "http"), (":path", path),
                             (":authority", "fuzz"), ("content-type", "application/grpc"),
                             ("te", "trailers"), ("grpc-timeout", "5S"),
                             ("x-goog-request-params", f"table_name={TABLE}")], huffman=huffman)


def seed_frames(rng: random.Random) -> list[list]:
    """A valid exchange as ``[type, flags, stream, payload]`` lists (after the preface)."""
    mutate, read = _messages()

    def body(m):
        return b"\x00" + len(m).to_bytes(4, "big") + m
    h1 = _headers("/google.bigtable.v2.Bigtable/MutateRow", rng.random() < 0.5)
    h3 = _headers("/google.bigtable.v2.Bigtable/ReadRows", rng.random() < 0.5)
    cut = rng.randrange(1, len(h3))
    return [
        [4, 0, 0, struct.pack(">HI", 4, 1 << 20) + struct.pack(">HI", 2, 0)],
        [8, 0, 0, struct.pack(">I", 1 << 24)],
        [1, 0x4, 1, h1],
        [0, 0x1, 1, body(mutate)],
        [6, 0, 0, rng.randbytes(8)],
        [1, 0x20, 3, struct.pack(">IB", 1, 16) + h3[:cut]],
        [9, 0x4, 3, h3[cut:]],
        [2, 0, 3, struct.pack(">IB", 0, 5)],
        [0, 0x1, 3, body(read)],
        [8, 0, 3, struct.pack(">I", 1000)],
        [3, 0, 3, struct.pack(">I", 8)],
        [7, 0, 0, struct.pack(">II", 3, 0)],
    ]


KINDS = ("bits", "type", "flags", "stream", "length", "cut", "grow", "drop", "repeat", "swap",
         "insert", "hpack", "settings", "pieces", "valid")


def encode(frames: list[list]) -> bytes:
    return PREFACE + b"".join(frame(*f) for f in frames)


def mutate(rng: random.Random, frames: list[list], kind: str | None = None
           ) -> tuple[str, list[bytes]]:
    """One mutation of ``frames`` (of ``kind``, else one drawn); ``(kind, the byte pieces
    to send)``."""
    frames = [list(f) for f in frames]
    kind = kind or rng.choice(KINDS)
    i = rng.randrange(len(frames))
    raw_length = None
    if kind == "type":
        frames[i][0] = rng.randrange(13)
    elif kind == "flags":
        frames[i][1] = rng.randrange(256)
    elif kind == "stream":
        frames[i][2] = rng.choice([0, 2, 5, 7, 2**31 - 1, rng.randrange(2**31), frames[i][2] + 2])
    elif kind == "cut":
        frames[i][3] = frames[i][3][:rng.randrange(len(frames[i][3]) + 1)]
    elif kind == "grow":
        frames[i][3] += rng.randbytes(rng.randrange(1, 64))
    elif kind == "drop":
        del frames[i]
    elif kind == "repeat":
        frames.insert(i, list(frames[i]))
    elif kind == "swap":
        j = rng.randrange(len(frames))
        frames[i], frames[j] = frames[j], frames[i]
    elif kind == "insert":
        frames.insert(i, [rng.randrange(12), rng.randrange(256), rng.choice([0, 1, 3, 9]),
                          rng.randbytes(rng.choice([0, 4, 5, 8, 9, rng.randrange(40)]))])
    elif kind == "hpack":
        f = frames[rng.choice([2, 5, 6])]
        p = bytearray(f[3])
        for _ in range(rng.randrange(1, 4)):
            if p:
                p[rng.randrange(len(p))] = rng.randrange(256)
        f[3] = bytes(p)
    elif kind == "settings":
        frames[0][3] = b"".join(struct.pack(">HI", rng.randrange(9), rng.choice(
            [0, 1, 16383, 16384, 2**24, 2**31 - 1, 2**31, rng.randrange(2**32)]))
            for _ in range(rng.randrange(1, 4)))
    elif kind == "length":
        raw_length = (i, rng.choice([0, 1, len(frames[i][3]) + 1, len(frames[i][3]) - 1,
                                     rng.randrange(2**24)]))
    data = bytearray(PREFACE)
    for n, (t, fl, sid, payload) in enumerate(frames):
        if raw_length is not None and raw_length[0] == n:
            length = max(0, raw_length[1])
            data += struct.pack(">BHBBI", length >> 16, length & 0xFFFF, t, fl, sid) + payload
        else:
            data += frame(t, fl, sid, payload)
    if kind == "bits":
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(len(PREFACE), len(data))
            data[at] ^= 1 << rng.randrange(8)
    if kind == "pieces":
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randrange(2, 12))))
        return kind, [bytes(data[a:b]) for a, b in zip([0] + cuts, cuts + [len(data)])]
    return kind, [bytes(data)]


def parse_answer(data: bytes) -> tuple[list[tuple[int, int, int, bytes]], bool]:
    """The server's frames, and whether its bytes were whole frames (a trailing partial
    frame is only allowed when we stopped reading early)."""
    out, i = [], 0
    if not data.startswith(b"\x00\x00"):  # the server's SETTINGS comes first
        return out, not data
    while len(data) - i >= 9:
        high, low, kind, flags, sid = struct.unpack_from(">BHBBI", data, i)
        n = high << 16 | low
        if len(data) - i - 9 < n:
            return out, False
        out.append((kind, flags, sid & 0x7FFFFFFF, data[i + 9:i + 9 + n]))
        i += 9 + n
    return out, i == len(data)


def one_case(port: int, pieces: list[bytes], quiet: float) -> tuple[str, bytes, bool]:
    """Send ``pieces``; ``(how it ended, the server's bytes, whether it closed)``."""
    got, closed = b"", False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            for p in pieces:
                s.sendall(p)
                if len(pieces) > 1:
                    time.sleep(0.001)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed it already: what it sent is still read below
        s.settimeout(quiet)
        try:
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    closed = True
                    break
                got += chunk
        except (TimeoutError, socket.timeout):
            pass
        except ConnectionResetError:
            closed = True
    return ("closed" if closed else "quiet"), got, closed


def judge(report: Report, kind: str, ended: str, got: bytes, closed: bool) -> None:
    frames, whole = parse_answer(got)
    if not whole:
        report.findings.append(f"{kind}: the server's bytes are not whole frames: {got[:80]!r}")
        return
    goaways = [struct.unpack(">II", p[:8]) for t, _, _, p in frames if t == 7 and len(p) >= 8]
    for _, code in goaways:
        if code >= len(CODES):
            report.findings.append(f"{kind}: GOAWAY with unknown code {code}")
    status = [p for t, _, _, p in frames if t == 1 and b"grpc-status" in p]
    if goaways:
        outcome = f"GOAWAY {CODES[goaways[-1][1]] if goaways[-1][1] < len(CODES) else '?'}"
    elif status:
        outcome = "answered"
    elif any(t == 3 for t, *_ in frames):
        outcome = "stream reset"
    else:
        outcome = ended
    report.outcomes[outcome] += 1


def run(cases: int, seed: int = 0, check_every: int = 50, quiet: float = 0.25,
        workdir: Path | None = None) -> Report:
    import grpc

    rng = random.Random(seed)
    report = Report()
    tmp = tempfile.TemporaryDirectory(prefix="fuzz-h2-") if workdir is None else None
    root = Path(tmp.name if tmp is not None else workdir)  # type: ignore[union-attr]
    port, bt_port = _free_port(), _free_port()
    log_path = root / "server.log"
    env = dict(os.environ, WIDETABLE_ACCESS_KEY_ID="fuzz", WIDETABLE_ACCESS_KEY_SECRET="fuzz-secret")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "widetable", "serve", "--data",
                                 str(root / "data"), "--port", str(port), "--bigtable-port",
                                 str(bt_port), "--capacity", "0"], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        _wait(bt_port, proc)
        channel = grpc.insecure_channel(f"127.0.0.1:{bt_port}")
        _create(channel)
        sentinel = _sentinel(channel)
        for n in range(cases):
            kind, pieces = mutate(rng, seed_frames(rng))
            report.kinds[kind] += 1
            ended, got, closed = one_case(bt_port, pieces, quiet)
            judge(report, kind, ended, got, closed)
            report.cases += 1
            if proc.poll() is not None:
                report.findings.append(f"the server exited ({proc.returncode}) after case {n}")
                break
            if (n + 1) % check_every == 0:
                _check(channel, sentinel, report)
        _check(channel, sentinel, report)
        channel.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                report.exit_status = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                report.exit_status = proc.wait()
                report.findings.append("the server did not stop within 60 s of SIGTERM")
        else:
            report.exit_status = proc.returncode
        text = log_path.read_text(errors="replace")
        if "Traceback" in text:
            report.findings.append("the server's log has a traceback:\n" + text[text.index("Traceback"):][:3000])
        if report.exit_status != 0:
            report.findings.append(f"the server exited with status {report.exit_status}")
        if tmp is not None:
            tmp.cleanup()
    return report


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _create(channel) -> None:
    from google.cloud.bigtable_admin_v2 import types as at

    req = at.CreateTableRequest(parent="projects/fuzz/instances/fuzz", table_id="t",
                                table=at.Table(column_families={"cf": at.ColumnFamily()}))
    channel.unary_unary("/google.bigtable.admin.v2.BigtableTableAdmin/CreateTable",
                        lambda b: b, lambda b: b)(type(req).pb(req).SerializeToString(), timeout=30)


def _sentinel(channel) -> bytes:
    from google.cloud.bigtable_v2 import types as dt

    req = dt.MutateRowRequest(table_name=TABLE, row_key=b"sentinel", mutations=[
        dt.Mutation(set_cell=dt.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                 timestamp_micros=1000, value=b"kept"))])
    channel.unary_unary("/google.bigtable.v2.Bigtable/MutateRow", lambda b: b, lambda b: b)(
        type(req).pb(req).SerializeToString(), timeout=30)
    read = dt.ReadRowsRequest(table_name=TABLE, rows=dt.RowSet(row_keys=[b"sentinel"]))
    return type(read).pb(read).SerializeToString()


def _check(channel, request: bytes, report: Report) -> None:
    from google.cloud.bigtable_v2 import types as dt

    report.checks += 1
    try:
        got = list(channel.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", lambda b: b,
                                        lambda b: b)(request, timeout=30))
    except Exception as exc:  # noqa: BLE001 - a finding
        report.findings.append(f"the sentinel read failed: {exc!r}")
        return
    values = [c.value for m in got for c in dt.ReadRowsResponse.deserialize(m).chunks]
    if values != [b"kept"]:
        report.findings.append(f"the sentinel read back {values!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz.http2", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000, help="mutated exchanges to send")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same cases)")
    parser.add_argument("--check-every", type=int, default=50, help="cases between sentinel reads")
    args = parser.parse_args(argv)
    report = run(args.cases, args.seed, args.check_every)
    print(f"{report.cases} cases, {report.checks} sentinel reads, server exit {report.exit_status}")
    print("mutations:", dict(sorted(report.kinds.items())))
    print("outcomes:", dict(report.outcomes.most_common()))
    for f in report.findings[:20]:
        print("FINDING:", f)
    print("clean" if report.clean else f"{len(report.findings)} findings")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
