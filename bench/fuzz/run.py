"""One fuzz run: send the cases, judge every answer, then check the store and the server.

The run, in order:

1. start ``widetable serve`` on an empty store; record the seeds (``record.py``),
   which also creates the fuzz tables and their rows; stop the server and take
   a raw dump of every key;
2. start it again; take a logical dump of the fuzz tables; start the valid
   clients (``store.LiveClients``); send ``requests`` cases, judging each
   answer as it comes (:func:`judge_http`, :func:`judge_native`), the server's
   process checked alive every 500 cases;
3. stop the clients; dump the fuzz tables again; stop the server (SIGTERM) and
   take the raw dump again.

What counts as a finding: the process dies or exits non-zero; a line in its
log that tells of an error; an answer that is not a well-formed error with an
OTS code (a 5xx, an answer that does not parse, ``OTSInternalServerError``,
exception text in a message); no answer within the timeout (a hang); a case
that must be rejected and was accepted; a key that changed without an accepted
request that could have changed it (:func:`store_findings`); a valid client's
call that failed, read back something else, or was slower than ``slow`` seconds.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
from google.protobuf.message import DecodeError

from . import plainbuffer as pbuf
from . import record, store, wire
from .mutate import (
    NATIVE_WRITES,
    WRITE_APIS,
    Case,
    HttpMutator,
    Mix,
    NativeMutator,
    _pb_class,
    plainbuffer_fields,
)

KEY_ID, SECRET, INSTANCE = "fuzz-key", "fuzz-secret", "widetable"
READER_ID, READER_SECRET = "fuzz-reader", "fuzz-reader-secret"  # a read-only key
TEXT_OF_EXCEPTIONS = ("Traceback", "internal error", "Exception", 'File "')
BUSY_CODES = frozenset({"OTSServerBusy", "OTSServerUnavailable", "OTSTooManyConnections"})


@dataclass
class Finding:
    what: str
    kind: str
    detail: str
    data: bytes = b""

    def __str__(self) -> str:
        return f"{self.what} [{self.kind}] {self.detail} | sent {self.data[:300]!r}"


@dataclass
class Report:
    requests: int = 0
    seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)  # "http 400 OTSParameterInvalid", ...
    kinds: Counter = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    accepted_writes: int = 0
    changed_rows: int = 0
    live_ops: int = 0
    live_slowest: float = 0.0
    exit_status: int | None = None
    seeds: tuple[int, int] = (0, 0)
    touched: Touched = field(default_factory=lambda: Touched())
    rows_before: dict = field(default_factory=dict)
    log_start: int = 0
    harness_errors: int = 0  # cases the fuzzer failed to make (its own bugs, not the server's)
    harness_error: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings


# -- judging answers -----------------------------------------------------------------------

def _error_of(body: bytes) -> tuple[str, str] | None:
    from tablestore.protobuf import table_store_pb2 as p

    try:
        err = p.Error.FromString(body)
    except DecodeError:
        return None
    return err.code, err.message


def judge_http(case: Case, reply: wire.Reply) -> tuple[str, Finding | None]:
    """``(outcome, finding or None)`` of one HTTP answer."""
    if reply.timed_out:
        return "http timeout", Finding("hang", case.kind, "no answer and no close", case.data)
    if reply.status is None:
        if case.half_close or case.abort:
            return "http closed", None
        return "http closed", Finding("dropped", case.kind, "closed without an answer", case.data)
    status = reply.status
    if status == 101 or 200 <= status < 300:
        if case.must_reject:
            return f"http {status}", Finding("accepted", case.kind, f"answered {status}", case.data)
        return f"http {status}", None
    err = _error_of(reply.body)
    if err is None or not err[0].startswith("OTS"):
        return f"http {status} ?", Finding("bad error", case.kind, f"{status} {reply.body[:200]!r}",
                                           case.data)
    code, message = err
    outcome = f"http {status} {code}"
    if any(t in message for t in TEXT_OF_EXCEPTIONS) or code == "OTSInternalServerError":
        return outcome, Finding("exception text", case.kind, f"{status} {code}: {message[:300]}",
                                case.data)
    if status >= 500 and not (status == 505 or (status == 503 and code in BUSY_CODES)):
        return outcome, Finding("5xx", case.kind, f"{status} {code}: {message[:300]}", case.data)
    if not 400 <= status < 600:
        return outcome, Finding("bad status", case.kind, f"{status} {code}", case.data)
    return outcome, None


def judge_native(case: Case, reply: wire.Reply) -> tuple[str, Finding | None]:
    if reply.timed_out:
        return "native timeout", Finding("hang", case.kind, "no answer and no close", case.data)
    if reply.frame is None:
        if case.half_close or case.abort:
            return "native closed", None
        return "native closed", Finding("dropped", case.kind, "closed without an answer", case.data)
    try:
        answer = msgpack.unpackb(reply.frame, strict_map_key=False, use_list=False)
    except Exception as exc:  # noqa: BLE001 - any undecodable answer is a finding
        return "native ?", Finding("bad answer", case.kind, f"{exc}: {reply.frame[:200]!r}",
                                   case.data)
    if type(answer) is tuple and answer[:1] == (0,) and len(answer) == 2:
        if case.must_reject:
            return "native ok", Finding("accepted", case.kind, repr(answer)[:200], case.data)
        return "native ok", None
    if not (type(answer) is tuple and len(answer) == 3 and answer[0] == 1
            and isinstance(answer[1], str) and answer[1].startswith("OTS")):
        return "native ?", Finding("bad answer", case.kind, repr(answer)[:300], case.data)
    code, message = answer[1], str(answer[2])
    if code == "OTSInternalServerError" or any(t in message for t in TEXT_OF_EXCEPTIONS):
        return f"native {code}", Finding("exception text", case.kind, f"{code}: {message[:300]}",
                                         case.data)
    return f"native {code}", None


# -- sending -------------------------------------------------------------------------------

class Sender:
    """Sends cases over kept connections (one HTTP, one native), opening fresh ones as needed."""

    def __init__(self, account: wire.Account, timeout: float,
                 reader: wire.Account | None = None) -> None:
        self.account, self.timeout = account, timeout
        self.reader = reader or account
        self.native_reader: wire.Conn | None = None
        self.http: wire.Conn | None = None
        self.native: wire.Conn | None = None

    def send(self, case: Case) -> list[wire.Reply]:
        """The answers to ``case``: one, or one per part of a pipelined case (fewer if the
        server closes first)."""
        wanted = len(case.parts) if case.parts else 1
        account = self.reader if case.reader else self.account
        if case.abort:
            conn = wire.Conn(account, self.timeout) if case.protocol == "http" else \
                wire.upgrade(account, self.timeout)
            conn.send(case.data)
            conn.reset()
            return [wire.Reply(closed=True)]
        if case.protocol == "http":
            conn = wire.Conn(account, self.timeout) if case.fresh else self._http()
            ok = conn.send(case.data, case.half_close, case.trickle)
            replies = []
            for _ in range(wanted):
                reply = conn.read_http()
                while reply.status == 100:  # Expect: 100-continue (a header case asked for it)
                    reply = conn.read_http()
                if not ok and reply.status is None:
                    reply.closed = True
                replies.append(reply)
                if reply.closed or reply.timed_out or reply.status in (None, 101):
                    break
            if case.fresh or replies[-1].closed or replies[-1].status in (None, 101):
                self._drop(conn)
            return replies
        if case.upgrade:
            conn = wire.Conn(account, self.timeout)
            conn.send(wire.upgrade_request(account) + case.data, case.half_close,
                      case.trickle)
            if conn.read_http().status != 101:
                conn.close()
                raise ConnectionError("the upgrade, with frames behind it, was refused")
        else:
            conn = wire.upgrade(account, self.timeout) if case.fresh else \
                self._native(case.reader)
            conn.send(case.data, case.half_close, case.trickle)
        replies = []
        for _ in range(wanted):
            replies.append(conn.read_frame())
            if replies[-1].frame is None:
                break
        if case.fresh or replies[-1].frame is None:
            self._drop(conn)
        return replies

    def _drop(self, conn: wire.Conn) -> None:
        conn.close()
        if conn is self.http:
            self.http = None
        if conn is self.native:
            self.native = None
        if conn is self.native_reader:
            self.native_reader = None

    def _http(self) -> wire.Conn:
        if self.http is None or self.http.dead:
            self.http = wire.Conn(self.account, self.timeout)
        return self.http

    def _native(self, reader: bool = False) -> wire.Conn:
        if reader:
            if self.native_reader is None or self.native_reader.dead:
                self.native_reader = wire.upgrade(self.reader, self.timeout)
            return self.native_reader
        if self.native is None or self.native.dead:
            self.native = wire.upgrade(self.account, self.timeout)
        return self.native

    def close(self) -> None:
        for conn in (self.http, self.native, self.native_reader):
            if conn is not None:
                conn.close()


# -- what accepted writes may have touched --------------------------------------------------

@dataclass
class Touched:
    """Tables and rows that accepted requests may have written."""

    rows: dict[str, set] = field(default_factory=dict)  # table -> primary keys
    tables: set[str] = field(default_factory=set)  # whole tables (DDL, or a key not decoded)

    def row(self, table: object, pk: object) -> None:
        pk = _hashable(pk) if isinstance(pk, (list, tuple)) else (_hashable(pk),)
        self.rows.setdefault(repr(table) if type(table) is not str else table, set()).add(pk)

    def allows(self, table: str, pk: tuple) -> bool:
        return table in self.tables or pk in self.rows.get(table, ())

    def add_http(self, api: str, body: bytes) -> None:
        msg = _pb_class(api)()
        msg.MergeFromString(body)
        if api in ("CreateTable",):
            self.tables.add(msg.table_meta.table_name)
        elif api in ("DeleteTable", "UpdateTable"):
            self.tables.add(msg.table_name)
        elif api in ("CreateIndex", "DropIndex"):
            self.tables.add(msg.main_table_name)
        elif api == "BatchWriteRow":
            for t in msg.tables:
                for r in t.rows:
                    self._plain(t.table_name, r.row_change)
        elif api == "CommitTransaction":
            pass  # its writes were each an accepted PutRow / UpdateRow / DeleteRow
        else:  # PutRow (row), UpdateRow (row_change), DeleteRow (primary_key)
            for owner, name, _ in plainbuffer_fields(msg):
                self._plain(msg.table_name, getattr(owner, name))

    def _plain(self, table: str, data: bytes) -> None:
        try:
            rows = pbuf.decode(data)
        except ValueError:
            self.tables.add(table)
            return
        for row in rows:
            self.row(table, tuple(pbuf.value_of(c) for c in row.pk))

    def add_native(self, frame: bytes) -> None:
        request = msgpack.unpackb(frame, strict_map_key=False, use_list=False)
        if request[0] == 7:
            for item in request[1] or ():
                if isinstance(item, (list, tuple)) and len(item) >= 3:
                    self.row(item[0], item[2])
        else:
            self.row(request[1], request[2])


def _hashable(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(map(_hashable, value))
    if isinstance(value, dict):
        return tuple((_hashable(k), _hashable(v)) for k, v in value.items())
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def store_findings(before: dict, after: dict, touched: Touched, rows_before: dict,
                   rows_after: dict) -> tuple[list[Finding], int]:
    """Keys that changed with no accepted request to explain them; rows changed by them."""
    ids = store.table_ids(before) | store.table_ids(after)
    live = {i for i, n in ids.items() if n == record.LIVE}
    findings = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key) or key[0] in store.VOLATILE:
            continue
        if key[0] == store.CATALOG and key[1:].decode("utf-8", "replace") in touched.tables:
            continue
        if key[0] == store.COUNTERS and (touched.tables or key.endswith(b"/%d" % min(live, default=-1))):
            continue
        if len(key) >= 5 and key[0] >= 0x05:
            table_id = int.from_bytes(key[1:5], "big")
            name = ids.get(table_id, "?")
            if table_id in live or name in touched.tables or name in touched.rows:
                continue  # the live clients' own table; or checked row by row below
        findings.append(Finding("written", "store", f"key {key[:80]!r} changed: "
                                f"{before.get(key, b'')[:80]!r} -> {after.get(key, b'')[:80]!r}"))
    changed = 0
    for table in set(rows_before) | set(rows_after):
        old, new = rows_before.get(table) or {}, rows_after.get(table) or {}
        for pk in set(old) | set(new):
            if old.get(pk) == new.get(pk):
                continue
            changed += 1
            if not touched.allows(table, pk):
                findings.append(Finding("written", "store",
                                        f"{table} row {pk!r} changed: {old.get(pk)} -> {new.get(pk)}"))
    return findings, changed


# -- the run -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Options:
    requests: int
    seed: int = 0
    timeout: float = 10.0  # seconds without an answer that make a hang
    live: bool = True  # run the valid clients
    senders: int = 1  # threads sending cases at once, each on its own connections
    slow: float = 5.0  # seconds a valid client's call may take before it is a finding


def run(requests: int, seed: int = 0, timeout: float = 10.0, workdir: Path | None = None,
        progress: Callable[[int, Report], None] | None = None, live: bool = True,
        senders: int = 1) -> Report:
    """Fuzz a fresh server with ``requests`` cases; the report of what it found.

    ``workdir`` keeps the store and the server's log (default: a temporary directory,
    removed after a clean run); ``progress(n, report)`` is called every 500 cases."""
    options = Options(requests, seed, timeout, live, senders=senders)
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="widetable-fuzz-")) if own else workdir
    data, log = workdir / "data", workdir / "server.log"
    shutil.rmtree(data, ignore_errors=True)  # a fresh store each run
    log.unlink(missing_ok=True)
    report = Report()
    keys = workdir / "keys.toml"
    keys.write_text(f'[access_keys]\n{READER_ID} = {{ secret = "{READER_SECRET}", '
                    f'read_only = true }}\n')
    server = store.Server(data, log, KEY_ID, SECRET, "--keys", str(keys))
    try:
        seeds = record.record(_account(server))
    finally:
        server.stop()
    report.seeds = (len(seeds[0]), len(seeds[1]))
    before = store.raw_dump(data)
    server = store.Server(data, log, KEY_ID, SECRET, "--keys", str(keys))
    try:
        _fuzz(server, seeds, options, progress, report)
        _check_after(server, before, report)
    finally:
        if server.alive():
            server.stop()
    if progress is not None:
        progress(report.requests, report)
    if own and report.clean:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _account(server: store.Server) -> wire.Account:
    return wire.Account("127.0.0.1", server.port, KEY_ID, SECRET, INSTANCE)


def _fuzz(server: store.Server, seeds: tuple, options: Options,
          progress: Callable[[int, Report], None] | None, report: Report) -> None:
    """Send the cases (from ``options.senders`` threads, each with its own connections)
    while the valid clients run; judge each answer."""
    account = _account(server)
    report.log_start = server.log.stat().st_size
    report.rows_before = {t: store.logical_dump(account, t) for t in record.TABLES}
    reader = wire.Account(account.host, account.port, READER_ID, READER_SECRET, INSTANCE)
    clients = store.LiveClients(account)
    if options.live:
        clients.start()
    lock = threading.Lock()
    shares = [options.requests // options.senders + (i < options.requests % options.senders)
              for i in range(options.senders)]
    threads = [threading.Thread(target=_send_cases, name=f"fuzz-sender-{i}", daemon=True, args=(
        Sender(account, options.timeout, reader),
        Mix(HttpMutator(account, seeds[0], reader), NativeMutator(seeds[1])),
        random.Random(options.seed + 7919 * i), share, server, report, lock,
        progress if i == 0 else None)) for i, share in enumerate(shares)]
    t0 = time.monotonic()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        report.seconds = time.monotonic() - t0
        clients.stop()
    report.live_ops, report.live_slowest = clients.ops, clients.slowest
    report.findings += [Finding("live client", "-", e) for e in clients.errors[:20]]
    if options.live and clients.ops == 0:
        report.findings.append(Finding("live client", "-", "no call succeeded"))
    if clients.slowest > options.slow:
        report.findings.append(Finding("live client", "-", f"a call took {clients.slowest:.1f} s"))


def _send_cases(sender: Sender, mix: Mix, rng: random.Random, count: int,
                server: store.Server, report: Report, lock: threading.Lock,
                progress: Callable[[int, Report], None] | None) -> None:
    """One sender's share of the cases; the report is updated under ``lock``."""
    try:
        for n in range(1, count + 1):
            try:
                case = mix.case(rng)
            except Exception:  # noqa: BLE001 - a bug of the fuzzer's own: count it, go on
                with lock:
                    report.harness_errors += 1
                    report.harness_error = report.harness_error or traceback.format_exc()
                continue
            try:
                replies = sender.send(case)
            except OSError as exc:  # the connection or the upgrade failed: the server is gone?
                replies = [wire.Reply(closed=True)]
                if not server.alive():
                    with lock:
                        report.findings.append(Finding("crash", case.kind, f"server died: {exc}",
                                                       case.data))
                    return
            with lock:
                _judge_case(case, replies, report)
            if n % 500 == 0:
                if not server.alive():
                    return
                if progress is not None:
                    progress(report.requests, report)
    finally:
        sender.close()


def _judge_case(case: Case, replies: list[wire.Reply], report: Report) -> None:
    report.requests += 1
    report.kinds[f"{case.protocol} {case.kind}"] += 1
    if case.trickle:
        report.kinds[f"{case.protocol} (trickled)"] += 1
    if case.abort:  # unanswered, so perhaps written: count it as if accepted
        for part in case.parts or [case]:
            _note_write(part, report.touched, report)
    judge = judge_http if case.protocol == "http" else judge_native
    for part, reply in zip(case.parts or [case], replies, strict=False):
        outcome, finding = judge(part, reply)
        report.outcomes[outcome] += 1
        if finding is not None:
            report.findings.append(finding)
        if outcome in ("http 200", "native ok"):
            _note_write(part, report.touched, report)
    last = replies[-1]
    if case.parts and len(replies) < len(case.parts) and not (last.closed or last.timed_out):
        report.findings.append(Finding("hang", case.kind, "a pipelined request was not answered",
                                       case.data))


def _check_after(server: store.Server, before: dict, report: Report) -> None:
    """The server after the run: alive, serving fresh valid clients, a clean exit and log,
    and no key changed that no accepted request explains."""
    alive = server.alive()
    rows_after = {}
    if alive:
        account = _account(server)
        report.findings += [Finding("after", "-", e) for e in store.check_serving(account)]
        rows_after = {t: store.logical_dump(account, t) for t in record.TABLES}
    report.exit_status = server.stop()
    if not alive:
        report.findings.append(Finding("crash", "-", "the server process exited during the run"))
    elif report.exit_status != 0:
        report.findings.append(Finding("exit", "-", f"the server exited with {report.exit_status}"))
    report.findings += [Finding("log", "-", line[:400])
                        for line in store.log_problems(server.log, report.log_start)]
    if alive:
        after = store.raw_dump(server.data)
        found, report.changed_rows = store_findings(before, after, report.touched,
                                                    report.rows_before, rows_after)
        report.findings += found


def _native_op(frame: bytes) -> object:
    return msgpack.unpackb(frame, strict_map_key=False, use_list=False)[0]


def _note_write(case: Case, touched: Touched, report: Report) -> None:
    """Record what an accepted (or unanswered) request may have written."""
    try:
        if case.protocol == "http" and case.api in WRITE_APIS:
            touched.add_http(case.api, case.body)
            report.accepted_writes += 1
        elif case.protocol == "native" and case.frame and _native_op(case.frame) in NATIVE_WRITES:
            touched.add_native(case.frame)
            report.accepted_writes += 1
    except Exception:  # noqa: BLE001 - a request the server took must decode here too
        if not case.abort:  # an unanswered one need not: the server refused it then
            report.harness_errors += 1
            report.harness_error = report.harness_error or traceback.format_exc()
