"""Durability and shutdown: acknowledged writes survive kill -9; SIGTERM drains gracefully."""

from __future__ import annotations

import signal
import threading

import pytest

import widetable

from . import serving


def connect(served):
    return widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                             access_key_secret=serving.ACCESS_KEY_SECRET)


@pytest.mark.slow
def test_acknowledged_writes_survive_kill_9(tmp_path) -> None:
    from tablestore import CapacityUnit, OTSClient, ReservedThroughput, Row, TableMeta, TableOptions

    served = serving.start(tmp_path / "data")
    try:
        ots = OTSClient(served.endpoint, serving.ACCESS_KEY_ID, serving.ACCESS_KEY_SECRET,
                        serving.INSTANCE, logger_name="widetable-tests-sdk")
        ots.create_table(TableMeta("d", [("k", "INTEGER")]), TableOptions(),
                         ReservedThroughput(CapacityUnit(0, 0)))
        acked = []
        for i in range(200):
            ots.put_row("d", Row([("k", i)], [("v", i * 10)]))
            acked.append(i)
    finally:
        served.kill()
    assert served.proc.returncode == -signal.SIGKILL
    served = serving.start(tmp_path / "data")
    try:
        db = connect(served)
        t = db.table("d")
        assert [r["v"] for r in t.scan()] == [i * 10 for i in acked]
        db.close()
    finally:
        served.stop()


@pytest.mark.slow
def test_sigterm_finishes_in_flight_requests_and_closes_the_store(tmp_path) -> None:
    served = serving.start(tmp_path / "data")
    db = connect(served)
    db.create_table("g", [("k", "INTEGER")])
    errors: list = []
    done = []

    def writer(base: int) -> None:
        client = connect(served)
        try:
            for i in range(10_000):
                client.table("g").put_row((base + i,), {"v": 1})
                done.append(base + i)
        except widetable.WidetableError as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=writer, args=(n * 100_000,)) for n in range(4)]
    for th in threads:
        th.start()
    while len(done) < 200:
        pass
    assert served.stop(signal.SIGTERM) == 0
    for th in threads:
        th.join()
    out = served.proc.stdout.read()
    assert "store closed" in out
    # Every write a client saw acknowledged is in the store.
    served = serving.start(tmp_path / "data")
    try:
        t = connect(served).table("g")
        stored = {r.primary_key[0] for r in t.scan()}
        assert set(done) <= stored
    finally:
        served.stop()
