"""The PostgreSQL peer keeps widetable's durability: an acknowledged commit survives a
kill of the server process that holds it (``bench/postgres.py``).

Skipped when this machine has no PostgreSQL binaries (the test does not install them;
``python -m bench`` does).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from bench import postgres

pytestmark = pytest.mark.skipif(postgres.find_bin_dir() is None,
                                reason="no PostgreSQL binaries under /usr/lib/postgresql")


def _count_after_recovery(pg: postgres.PostgresInstance, deadline_s: float = 60) -> int:
    """``count(*)`` once the server accepts connections again after its crash recovery."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with pg.connect() as conn:  # type: ignore[attr-defined]
                return conn.execute("select count(*) from t").fetchone()[0]
        except Exception:  # refused, or shutting down, while it recovers
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_killed_backend_loses_no_acknowledged_commit() -> None:
    with postgres.PostgresInstance(say=lambda _: None) as pg:
        conn = pg.connect()
        settings = {name: conn.execute(f"show {name}").fetchone()[0]  # type: ignore[attr-defined]
                    for name in ("synchronous_commit", "fsync")}
        assert settings == {"synchronous_commit": "on", "fsync": "off"}
        conn.execute("create table t (k int primary key, v text)")  # type: ignore[attr-defined]
        backend = conn.execute("select pg_backend_pid()").fetchone()[0]  # type: ignore[attr-defined]
        acked = 0
        started = time.monotonic()
        # Commits as fast as one client can: under synchronous_commit=off this loses the
        # last few dozen (they wait in shared memory for the WAL writer).
        while time.monotonic() - started < 0.5:
            conn.execute("insert into t values (%s, 'x')", (acked,))  # type: ignore[attr-defined]
            acked += 1
        os.kill(backend, signal.SIGKILL)  # the postmaster resets shared memory and recovers
        assert acked > 100
        assert _count_after_recovery(pg) == acked
