"""Durability of the Bigtable port: data survives a restart of ``widetable serve``, and a
SIGKILL while it takes MutateRows loses no acknowledged mutation and tears no row across
families (the official data client writes; Google's emulator keeps nothing across a
restart, widetable keeps it all)."""

from __future__ import annotations

import signal
import threading
import time
import warnings

import pytest

from .conftest import INSTANCE, PROJECT, BigtableServed

FAMILIES = ("f1", "f2", "f3")


def _client(host: str):
    """A data client; BIGTABLE_EMULATOR_HOST is set by the test (the port survives a restart)."""
    warnings.filterwarnings("ignore")
    from google.cloud.bigtable.data import BigtableDataClient

    return BigtableDataClient(project=PROJECT)


def _create(served: BigtableServed, name: str) -> None:
    from google.cloud import bigtable

    client = bigtable.Client(project=PROJECT, admin=True)
    client.instance(INSTANCE).table(name).create(
        column_families={f: None for f in FAMILIES}, initial_split_keys=[b"row3", b"row6"])


def test_tables_and_rows_survive_a_restart(tmp_path, monkeypatch):
    from google.cloud.bigtable.data import ReadRowsQuery, SetCell

    served = BigtableServed(tmp_path / "data")
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", served.host)
    try:
        _create(served, "kept")
        client = _client(served.host)
        t = client.get_table(INSTANCE, "kept")
        t.mutate_row(b"a", [SetCell("f1", b"q", b"1", 1000), SetCell("f2", b"q", b"2", 1000)])
        client.close()
        served.restart()
        client = _client(served.host)
        t = client.get_table(INSTANCE, "kept")
        rows = t.read_rows(ReadRowsQuery())
        assert [(r.row_key, [(c.family, c.value) for c in r.cells]) for r in rows] == [
            (b"a", [("f1", b"1"), ("f2", b"2")])]
        assert b"row3" in [k for k, _ in t.sample_row_keys()]  # the splits are kept too
        client.close()
    finally:
        served.stop()


@pytest.mark.slow
def test_sigkill_during_mutate_rows_loses_no_acknowledged_row_and_tears_none(tmp_path, monkeypatch):
    from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, SetCell
    from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup

    served = BigtableServed(tmp_path / "data")
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", served.host)
    acked: set[bytes] = set()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(wid: int) -> None:
        client = _client(served.host)
        t = client.get_table(INSTANCE, "crash")
        batch = 0
        try:
            while not stop.is_set():
                keys = [b"row%d-%d-%05d" % (i % 10, wid, batch) for i in range(20)]
                entries = [RowMutationEntry(k, [SetCell(f, b"v", k + f.encode(), 1000) for f in FAMILIES])
                           for k in keys]
                batch += 1
                try:
                    t.bulk_mutate_rows(entries, operation_timeout=5, attempt_timeout=2)
                except MutationsExceptionGroup as exc:
                    failed = {e.index for e in exc.exceptions}
                    acked.update(k for i, k in enumerate(keys) if i not in failed)
                    continue
                except Exception:  # noqa: BLE001 - the server died under us: outcome unknown
                    continue
                acked.update(keys)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

    try:
        _create(served, "crash")
        threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(3)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 60
        while len(acked) < 1500 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 1500, "the writers made no progress"
        served.served.proc.send_signal(signal.SIGKILL)  # while the writers still write
        served.served.proc.wait(30)
        stop.set()
        for th in threads:
            th.join(30)
        assert not errors, errors
        before = set(acked)
        served.start()
        client = _client(served.host)
        rows = client.get_table(INSTANCE, "crash").read_rows(ReadRowsQuery())
        client.close()
        found = {}
        for r in rows:
            found[r.row_key] = {c.family: c.value for c in r.cells}
        lost = before - set(found)
        assert not lost, f"{len(lost)} acknowledged rows lost, e.g. {sorted(lost)[:3]}"
        torn = {k: v for k, v in found.items()
                if v != {f: k + f.encode() for f in FAMILIES}}
        assert not torn, f"{len(torn)} torn rows, e.g. {list(torn.items())[:2]}"
    finally:
        stop.set()
        served.stop()
