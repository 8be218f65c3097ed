"""The server under test and what the fuzzer checks around it.

* :class:`Server`: ``widetable serve`` as a subprocess on a free loopback port,
  its output in a log file (read for tracebacks and errors afterwards);
* :func:`raw_dump`: every key and value of the store, read with the server
  stopped, through the storage engine (no table code between the fuzzer and
  the bytes);
* :func:`logical_dump`: a table's rows with every version, through the SDK;
* :class:`LiveClients`: a thread of valid clients (the official SDK over
  Tablestore's protocol, ``widetable.connect`` over the native one) writing and
  reading back rows of their own table for the whole run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .record import LIVE, sdk_client

CATALOG, COUNTERS, PARTITIONS, STATS, ROWS = 0x01, 0x02, 0x03, 0x04, 0x10
# What may change under a run whatever it sends: partition maps and key samples (every
# request feeds the samples; load can split) and statistics buckets.
VOLATILE = (PARTITIONS, STATS)
LOG_PROBLEMS = re.compile(r"Traceback|ERROR|CRITICAL|Exception|internal error|Fatal|Segmentation")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``widetable serve --data <data>`` on a free port; ``log`` holds its output."""

    def __init__(self, data: Path, log: Path, key_id: str, secret: str, *extra: str) -> None:
        self.data, self.log, self.port = data, log, free_port()
        env = dict(os.environ, WIDETABLE_ACCESS_KEY_ID=key_id, WIDETABLE_ACCESS_KEY_SECRET=secret)
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "widetable", "serve", "--data", str(data), "--port",
             str(self.port), *extra], env=env, stdout=self._out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"widetable serve exited early: {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("widetable serve did not start in time")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (a graceful drain), then its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._out.close()


def log_problems(log: Path, start: int = 0) -> list[str]:
    """Lines of the server's output from byte ``start`` on that tell of an error."""
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return [line for line in text.splitlines() if LOG_PROBLEMS.search(line)]


def raw_dump(data: Path) -> dict[bytes, bytes]:
    """Every key of the store at ``data`` (the server must be stopped)."""
    from widetable.storage.rocks import RocksEngine

    engine = RocksEngine(str(data / "store") if (data / "store").is_dir() else str(data))
    try:
        return dict(engine.scan(b"", b"\xff" * 16))
    finally:
        engine.close()


def table_ids(dump: dict[bytes, bytes]) -> dict[int, str]:
    """Table (and index) ids -> names, from the catalog in a raw dump."""
    out = {}
    for key, value in dump.items():
        if key[:1] == bytes((CATALOG,)):
            try:
                meta = json.loads(value)
            except ValueError:
                continue
            out[meta.get("table_id")] = meta.get("name")
            for index in meta.get("indexes", []) or []:
                if isinstance(index, dict) and "index_id" in index:
                    out[index["index_id"]] = f"{meta.get('name')}/{index.get('name')}"
    return out


def logical_dump(account: wire.Account, table: str) -> dict[tuple, list] | None:
    """``pk -> sorted columns with timestamps`` of every row of ``table`` (None if absent)."""
    from tablestore import INF_MAX, INF_MIN, Direction, OTSServiceError

    ots = sdk_client(f"http://{account.host}:{account.port}", account)
    try:
        meta = ots.describe_table(table).table_meta
    except OTSServiceError:
        return None
    names = [c[0] for c in meta.schema_of_primary_key]
    start = [(n, INF_MIN) for n in names]
    end = [(n, INF_MAX) for n in names]
    out = {}
    while start:
        _, start, rows, _ = ots.get_range(table, Direction.FORWARD, start, end, max_version=100)
        for row in rows:
            pk = tuple(bytes(v) if isinstance(v, bytearray) else v for _, v in row.primary_key)
            out[pk] = sorted((c[0], repr(c[1]), c[2]) for c in row.attribute_columns)
    return out


@dataclass
class LiveClients:
    """Valid clients through the run: each round writes a row over each protocol and reads
    it back; ``errors`` holds what went wrong, ``ops`` how many calls succeeded."""

    account: wire.Account
    pause: float = 0.02
    ops: int = 0
    errors: list[str] = field(default_factory=list)
    slowest: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fuzz-live", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _timed(self, fn, *args, **kwargs):
        t0 = time.monotonic()
        out = fn(*args, **kwargs)
        self.slowest = max(self.slowest, time.monotonic() - t0)
        self.ops += 1
        return out

    def _run(self) -> None:
        from tablestore import Condition, Row

        import widetable

        endpoint = f"http://{self.account.host}:{self.account.port}"
        ots = sdk_client(endpoint, self.account)
        db = widetable.connect(endpoint, access_key_id=self.account.key_id,
                               access_key_secret=self.account.secret,
                               instance=self.account.instance, protocol="native")
        table = db.table(LIVE)
        i = 0
        try:
            while not self._stop.is_set():
                i += 1
                try:
                    self._round(ots, table, i, Row, Condition)
                except Exception as exc:  # noqa: BLE001 - every failure is a finding
                    self.errors.append(f"round {i}: {type(exc).__name__}: {exc}"[:500])
                self._stop.wait(self.pause)
        finally:
            db.close()

    def _round(self, ots, table, i: int, Row, Condition) -> None:
        self._timed(ots.put_row, LIVE, Row([("w", "sdk"), ("i", i)], [("v", i)]),
                    Condition("IGNORE"))
        _, row, _ = self._timed(ots.get_row, LIVE, [("w", "sdk"), ("i", i)], max_version=1)
        if row is None or row.attribute_columns[0][1] != i:
            self.errors.append(f"round {i}: the SDK read back {row!r}")
        self._timed(table.put_row, ("native", i), {"v": i})
        got = self._timed(table.get_row, ("native", i))
        if got is None or got["v"] != i:
            self.errors.append(f"round {i}: widetable.connect read back {got!r}")
        if i % 25 == 0:  # the last 100 rows written, in one page
            page = self._timed(table.get_range, ("native", i - 99), ("native", i + 1), limit=100)
            if [r.primary_key[1] for r in page.rows] != list(range(max(1, i - 99), i + 1)):
                self.errors.append(f"round {i}: a range read {len(page.rows)} rows, not 100")


def check_serving(account: wire.Account) -> list[str]:
    """Fresh valid clients of both protocols write a row and read it back: what failed."""
    from tablestore import Condition, Row

    import widetable

    errors = []
    endpoint = f"http://{account.host}:{account.port}"
    try:
        ots = sdk_client(endpoint, account)
        ots.put_row(LIVE, Row([("w", "after"), ("i", 1)], [("v", 1)]), Condition("IGNORE"))
        _, row, _ = ots.get_row(LIVE, [("w", "after"), ("i", 1)], max_version=1)
        if row is None or row.attribute_columns[0][1] != 1:
            errors.append(f"the SDK read back {row!r} after the run")
    except Exception as exc:  # noqa: BLE001 - every failure is a finding
        errors.append(f"the SDK after the run: {type(exc).__name__}: {exc}"[:500])
    try:
        db = widetable.connect(endpoint, access_key_id=account.key_id,
                               access_key_secret=account.secret, instance=account.instance,
                               protocol="native")
        try:
            db.table(LIVE).put_row(("after", 1), {"v": 1})
            got = db.table(LIVE).get_row(("after", 1))
            if got is None or got["v"] != 1:
                errors.append(f"widetable.connect read back {got!r} after the run")
        finally:
            db.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"widetable.connect after the run: {type(exc).__name__}: {exc}"[:500])
    return errors
