"""widetable through its server: ``widetable serve`` in a subprocess, driven by ``widetable.connect``.

``start(root)`` runs the server on a free 127.0.0.1 port and a unix socket,
with its store under ``root``, and connects the client over the unix socket,
as the harness reaches PostgreSQL over its own (``postgres.py``); data calls
travel over widetable's own protocol (``wire/native.py``). Durability as the
embedded store: a write is acknowledged once in RocksDB's WAL (survives
``kill -9`` of the server).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import Row, System, SystemUnavailable, TableSpec

KEY_ID, SECRET = "bench", "bench-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: Path, port: int | None = None) -> tuple[subprocess.Popen, str, str]:
    """Run ``widetable serve`` on ``data``; once both its listeners accept, return the process, its TCP
    endpoint and its unix socket's (``<data>.sock``).

    ``--capacity 0``: no per-partition throttling (the server's default is 20,000
    operations per second per partition, to make hot spots visible). The benchmarks
    measure the serving path against an embedded store that is not throttled either;
    throttled, one partition would cap every figure at the capacity."""
    port = port or free_port()
    sock = data.parent / f"{data.name}.sock"
    env = dict(os.environ, WIDETABLE_ACCESS_KEY_ID=KEY_ID, WIDETABLE_ACCESS_KEY_SECRET=SECRET)
    proc = subprocess.Popen(
        [sys.executable, "-m", "widetable", "serve", "--data", str(data), "--port", str(port),
         "--capacity", "0", "--socket", str(sock)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemUnavailable(f"widetable serve exited: {proc.stderr.read().decode()[-400:]}")
        try:  # both listeners: the unix socket may start listening after the TCP port
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
            with socket.socket(socket.AF_UNIX) as unix:
                unix.settimeout(0.2)
                unix.connect(str(sock))
            return proc, f"http://127.0.0.1:{port}", f"unix://{sock}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemUnavailable("widetable serve did not start within 30 s")


def stop_server(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class WidetableServerSystem(System):
    name = "widetable-server"

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._db: Any = None
        self._table: Any = None
        self._name = ""
        self._end: tuple[Any, ...] = ()

    def start(self, root: Path) -> None:
        try:
            import widetable
            import widetable.server
        except ImportError as exc:
            raise SystemUnavailable(f"cannot import widetable.server: {exc}") from exc
        self._proc, _, endpoint = start_server(root / "widetable-server")
        self._db = widetable.connect(endpoint, access_key_id=KEY_ID, access_key_secret=SECRET)
        self._end = (widetable.INF_MAX,)

    def stop(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        stop_server(self._proc)
        self._proc = None

    def open(self, workdir: Path, spec: TableSpec) -> None:
        if spec.name in self._db.list_tables():
            self._db.delete_table(spec.name)
        self._table = self._db.create_table(spec.name, [(spec.key_column, "STRING")], max_versions=1)
        self._name = spec.name

    def close(self) -> None:
        if self._table is not None and self._db is not None:
            self._db.delete_table(self._name)
        self._table = None

    def load(self, rows: Sequence[Row]) -> None:
        results = self._db.batch_write_row([(self._name, "put", (k, ), cols) for k, cols in rows])
        for result in results:
            if not result.ok:
                raise RuntimeError(f"widetable-server batch_write_row failed: {result.error}")

    def read(self, key: str) -> object | None:
        return self._table.get_row((key,))

    def update(self, key: str, values: dict[str, bytes]) -> None:
        self._table.update_row((key,), put=values)

    def put(self, key: str, values: dict[str, bytes]) -> None:
        self._table.put_row((key,), values)

    def scan(self, start: str, count: int) -> int:
        return len(self._table.get_range((start,), self._end, limit=count).rows)

    def server_pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def server_memory_mb(self) -> float | None:
        if self._proc is None:
            return None
        from ..memory import tree_pss_mb

        return tree_pss_mb(self._proc.pid)
