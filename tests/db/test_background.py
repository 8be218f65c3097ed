"""Background loops survive errors: they log with context, back off, keep running, and
report their state (describe_table, background_state); a store left open at exit is
closed cleanly."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import widetable
from tests.conftest import open_store


def _flaky(real, failures: list[int], exc: BaseException):
    """``real``, raising ``exc`` on its first ``failures[0]`` calls (a bug, a failing disk)."""

    def call(*args, **kwargs):
        if failures[0] > 0:
            failures[0] -= 1
            raise exc
        return real(*args, **kwargs)

    return call


def _wait(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _state(db, name: str):
    return next(s for s in db.background_state() if s.name == name)


def _thread(name: str) -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == name), None)


@pytest.mark.parametrize("loop, thread, target", [
    ("maintenance", "widetable-partitions", "maintain tick"),
    ("purge", "widetable-purge", "purge_round"),
])
def test_a_loop_survives_errors_and_reports_them(engine_name, tmp_path, caplog, loop, thread, target):
    db = open_store(tmp_path / "s", engine_name, maintenance_interval=0.05, purge_interval=0.05)
    try:
        db.create_table("t", [("k", "STRING")], ttl=86400)
        bg = db._background
        health = bg.maintenance_health if loop == "maintenance" else bg.purge_health
        health.base = 0.01  # a short backoff keeps the test quick
        owner = db._partitions if loop == "maintenance" else bg
        failures = [3]
        caplog.set_level(logging.INFO, logger="widetable.background")
        for name in target.split():
            setattr(owner, name, _flaky(getattr(owner, name), failures, RuntimeError("disk on fire")))
        assert _wait(lambda: failures[0] == 0 and _state(db, loop).ok)
        assert _thread(thread) is not None and _thread(thread).is_alive()
        state = next(s for s in db.describe_table("t").background if s.name == loop)
        assert state.ok and state.errors == 3 and state.running
        assert state.error_at is not None and state.ok_at is not None and state.ok_at >= state.error_at
        failed = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(failed) == 3 and f"widetable {loop}" in failed[0].getMessage()
        assert "RuntimeError: disk on fire" in failed[0].getMessage() and failed[0].exc_info
        assert not failed[1].exc_info  # one traceback per streak
        assert any("working again" in r.getMessage() for r in caplog.records)
        failures[0] = 10**6  # failing for good: the state says so, and the loop still runs
        assert _wait(lambda: not _state(db, loop).ok)
        state = _state(db, loop)
        assert state.error == "RuntimeError: disk on fire" and state.errors > 3 and state.running
    finally:
        db.close()
    assert not _state_after_close(db, loop)


def _state_after_close(db, loop: str) -> bool:
    health = db._background.maintenance_health if loop == "maintenance" else db._background.purge_health
    return health.running


def test_the_index_applier_survives_errors_and_reports_them(engine_name, tmp_path):
    db = open_store(tmp_path / "s", engine_name)
    try:
        t = db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
        db.create_index("t", "by_c", ["c"])
        db._indexer.health.base = 0.01
        failures = [3]
        db._indexer.run_once = _flaky(db._indexer.run_once, failures, RuntimeError("bug"))
        t.put_row(("a",), {"c": "x"})
        assert db.wait_for_indexes(10)
        assert [r.primary_key for r in db.table("by_c").scan()] == [("x", "a")]
        assert _wait(lambda: _state(db, "indexer").ok)
        state = _state(db, "indexer")
        assert state.errors == 3 and state.running
    finally:
        db.close()


EXIT_SCRIPT = textwrap.dedent("""
    import gc
    import sys
    import widetable

    db = widetable.open(sys.argv[1])
    t = db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
    db.create_index("t", "by_c", ["c"])
    if sys.argv[2] == "dropped":  # the Database object itself is gone; its threads are not
        del db
        gc.collect()
    for i in range(3000):
        t.put_row((f"k{i}",), {"c": f"c{i % 50}"})
    sys.exit(1)  # no db.close(): the applier is busy with the puts' records
""")


@pytest.mark.parametrize("held", ["held", "dropped"])
def test_exit_without_close_does_not_abort(tmp_path, held):
    """An exit with a global index applying used to abort (SIGABRT) nearly every time: the
    applier thread was killed inside a RocksDB call. Now the store is closed at exit."""
    for attempt in range(3):
        path = tmp_path / f"s{attempt}"
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(path), held],
                              capture_output=True, timeout=120, env=_env())
        assert done.returncode == 1, (done.returncode, done.stderr.decode()[-2000:])
        with widetable.open(str(path), purge_interval=None) as db:
            assert sum(1 for _ in db.table("t").scan()) == 3000
            assert db.wait_for_indexes(30)
            report = db.verify_index("t", "by_c")
            assert report.ok and report.entries == 3000


def _env() -> dict:
    src = os.path.dirname(os.path.dirname(widetable.__file__))
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
