"""A throwaway PostgreSQL instance for the benchmark: install, initdb, start, stop.

``PostgresInstance`` finds the server binaries under ``/usr/lib/postgresql/*/bin``;
when there are none and we are root it installs Debian's ``postgresql`` package
with apt-get (``apt-get update`` first). It then runs ``initdb`` in a fresh temp
folder and starts the server on a free loopback port, with its unix socket in that
folder. PostgreSQL refuses to run as root, so as root every server command runs as
the ``postgres`` user (``runuser``, else ``su``) and the folder is handed to it.

Settings, chosen to match widetable's default durability (an acknowledged write
survives a kill of the process that holds the data, not a power cut):
``synchronous_commit=on`` with ``fsync=off``. A commit returns once its WAL record
is written to the operating system (as RocksDB's WAL is, without ``sync``), so a
killed backend or postmaster loses no acknowledged commit: crash recovery replays
it. Nothing is fsynced, so a power cut can lose recent commits, as widetable's
can, and unlike widetable's can also corrupt the cluster: PostgreSQL has no
setting that writes the WAL at commit without fsyncing it but keeps fsyncing its
data files. ``synchronous_commit=off`` is not equivalent: its commits wait in
shared memory for the WAL writer (up to 600 ms), and a killed backend makes the
postmaster reinitialise that memory, so acknowledged commits are lost
(``tests/bench/test_peer_durability.py``). ``shared_buffers`` is 256 MB, the size
of widetable's block cache (and of SQLite's page cache here).

``stop()`` is idempotent and is called from ``__exit__``, so the server is stopped
after errors and Ctrl-C as well; the temp folder is removed with it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

from widetable.storage import DEFAULT_CACHE_MB

from .memory import tree_pss_mb
from .systems.base import SystemUnavailable

USER = "bench"  # the database superuser created by initdb
OS_USER = "postgres"  # the unix account the server runs as when we are root
APT_TIMEOUT_S = 900


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb and pg_ctl."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        if os.access(f"{d}/initdb", os.X_OK) and os.access(f"{d}/pg_ctl", os.X_OK):
            version = Path(d).parent.name
            found.append((int(version) if version.isdigit() else 0, Path(d)))
    return max(found)[1] if found else None


def install_from_debian(say: Callable[[str], None] = print) -> None:
    """``apt-get update`` then ``apt-get install -y postgresql``; raises SystemUnavailable."""
    if os.geteuid() != 0:
        raise SystemUnavailable("PostgreSQL is not installed, and installing it needs root")
    if shutil.which("apt-get") is None:
        raise SystemUnavailable("PostgreSQL is not installed and there is no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "postgresql"]):
        say(f"PostgreSQL: running {shlex.join(cmd)} ...")
        try:
            done = subprocess.run(
                cmd, check=False, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise SystemUnavailable(f"{shlex.join(cmd)} timed out") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SystemUnavailable(f"{shlex.join(cmd)} failed: {' / '.join(tail)}")


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresInstance:
    """One private PostgreSQL server. Use as a context manager, or start()/stop()."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        self._say = say
        self.dir: Path | None = None
        self.port = 0
        self._bin: Path | None = None
        self._as_root = os.geteuid() == 0
        self._started = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands -------------------------------------------------------------

    def _cmd(self, *args: str) -> list[str]:
        if not self._as_root:
            return list(args)
        if shutil.which("runuser"):
            return ["runuser", "-u", OS_USER, "--", *args]
        return ["su", OS_USER, "-s", "/bin/sh", "-c", shlex.join(args)]

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._cmd(*args), check=False, capture_output=True, text=True, timeout=timeout, cwd="/"
        )

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Install if needed, initdb and start; raises SystemUnavailable saying why not.

        On any failure, including Ctrl-C, whatever was started is stopped and removed.
        """
        try:
            self._start()
        except subprocess.TimeoutExpired as exc:
            self.stop()
            raise SystemUnavailable(f"{shlex.join(map(str, exc.cmd))} timed out") from exc
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self._bin = find_bin_dir()
        if self._bin is None:
            install_from_debian(self._say)
            self._bin = find_bin_dir()
            if self._bin is None:
                raise SystemUnavailable("apt-get installed postgresql but no initdb was found")
        owner = None
        if self._as_root:
            try:
                owner = pwd.getpwnam(OS_USER)
            except KeyError as exc:
                raise SystemUnavailable(
                    f"running as root and there is no {OS_USER!r} user"
                ) from exc
        # /tmp rather than $TMPDIR: the postgres user must be able to reach the folder.
        self.dir = Path(tempfile.mkdtemp(prefix="widetable-bench-pg-", dir="/tmp"))
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        data = self.dir / "data"
        done = self._run(
            str(self._bin / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        if done.returncode != 0:
            raise SystemUnavailable(f"initdb failed: {done.stderr.strip()[-300:]}")
        self.port = free_loopback_port()
        conf = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.dir}'",
            "synchronous_commit = on",
            "fsync = off",
            "full_page_writes = on",
            "max_connections = 20",
            f"shared_buffers = {DEFAULT_CACHE_MB}MB",
        ]
        with open(data / "postgresql.conf", "a") as f:
            f.write("\n# widetable bench\n" + "\n".join(conf) + "\n")
        log = self.dir / "server.log"
        self._started = True  # from here on stop() must try pg_ctl stop, even after a timeout
        done = self._run(
            str(self._bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start"
        )
        if done.returncode != 0:
            text = log.read_text() if log.exists() else done.stderr
            detail = " / ".join(text.strip().splitlines()[-2:])
            raise SystemUnavailable(f"pg_ctl start failed: {detail}")

    def postmaster_pid(self) -> int | None:
        try:
            assert self.dir is not None
            return int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        except (AssertionError, OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the server (fast shutdown, then SIGKILL) and remove its folder. Idempotent."""
        if self.dir is None:
            return
        if self._started and self._bin is not None:
            pid = self.postmaster_pid()
            try:
                done = self._run(
                    str(self._bin / "pg_ctl"),
                    "-D",
                    str(self.dir / "data"),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    "30",
                    "stop",
                    timeout=60,
                )
                failed = done.returncode != 0
            except subprocess.TimeoutExpired:
                failed = True
            if failed and pid is not None:
                _kill_quietly(pid)
            self._started = False
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    # -- use ------------------------------------------------------------------

    def connect(self) -> object:
        """A psycopg 3 connection over the unix socket, autocommit, binary results."""
        import psycopg

        return psycopg.connect(
            host=str(self.dir),
            port=self.port,
            user=USER,
            dbname="postgres",
            autocommit=True,
            prepare_threshold=0,
        )

    def memory_mb(self) -> float | None:
        """PSS of the postmaster and its children (backends, writers), MiB."""
        pid = self.postmaster_pid()
        return None if pid is None else tree_pss_mb(pid)


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGQUIT)  # immediate shutdown; children follow the postmaster
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
