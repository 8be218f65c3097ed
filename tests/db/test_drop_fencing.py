"""Drops fence in-flight work: after delete_table (or drop_index) returns under concurrent
writers, trims, purges and maintenance passes, no key is left under the dropped ids."""

from __future__ import annotations

import threading
import time

from tests.conftest import open_store
from widetable import AUTO_INCREMENT, WidetableError
from widetable.keys import layout

# Keyspaces whose keys carry a table or index id in bytes 1..4.
ID_PREFIXES = (layout.PARTITIONS, layout.STATS, layout.AUTO_INCREMENT, layout.CHANGE_LOG,
               layout.CHECKPOINTS, layout.INDEX_REFS, layout.ROWS)


def keys_under(db, ids: set[int], names: list[str]) -> list[str]:
    """Every key of the store that belongs to one of ``ids`` (or catalogues ``names``)."""
    found = []
    for key, _ in db._engine.scan(b"", b"\xff" * 8):
        prefix = key[:1]
        if prefix in ID_PREFIXES and int.from_bytes(key[1:5], "big") in ids:
            found.append(layout.pretty(key))
        elif prefix == layout.COUNTERS:
            name = key[1:].decode()
            if any(name.endswith(f"/{i}") for i in ids):
                found.append(name)
        elif prefix == layout.CATALOG and key[1:].decode() in names:
            found.append(layout.pretty(key))
    return found


def _hammer(db, stop: threading.Event, errors: list, work) -> list[threading.Thread]:
    def run(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                work(n, i)
            except WidetableError as exc:
                if exc.code not in ("OTSObjectNotExist", "OTSParameterInvalid"):
                    errors.append(exc)
                time.sleep(0.0005)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for th in threads:
        th.start()
    return threads


def test_drop_table_under_concurrent_writers_leaves_no_key(engine_name, tmp_path):
    db = open_store(tmp_path / "s", engine_name, maintenance_interval=0.02, purge_interval=0.02)
    try:
        for round_ in range(3):
            name, auto = f"t{round_}", f"a{round_}"
            t = db.create_table(name, [("k", "STRING"), ("n", "INTEGER")], stream=True,
                                defined_columns=[("c", "STRING")], split_points=["m"])
            db.create_index(name, "g" + name, ["c"])
            db.create_index(name, "l" + name, ["k", "c"], index_type="LOCAL")
            # A TTL: the purge thread reads it, rewriting rows under their locks.
            a = db.create_table(auto, [("k", "STRING"), ("seq", AUTO_INCREMENT)], ttl=86400,
                                max_versions=2)
            ids = {t.schema.table_id, a.schema.table_id,
                   *(spec.table_id for spec in t.schema.indexes)}
            stop = threading.Event()
            errors: list = []

            def work(n: int, i: int) -> None:
                key = (f"{'az'[i % 2]}{n}-{i % 50}", i % 7)
                op = i % 6
                if op == 0:
                    t.put_row(key, {"c": f"v{i % 13}"})
                elif op == 1:
                    t.update_row(key, put={"c": f"u{i % 11}"})
                elif op == 2:
                    t.delete_row(key)
                elif op == 3:
                    db.batch_write_row([(name, "put", (f"b{n}-{j}", i), {"c": "b"}) for j in range(20)])
                elif op == 4:
                    a.put_row((f"p{i % 30}", AUTO_INCREMENT), {"x": i})
                else:
                    a.update_row((f"q{n}", i), put={"x": i})
                    a.update_row((f"q{n}", i), put={"x": i + 1})
                    db.trim_change_log()

            threads = _hammer(db, stop, errors, work)
            time.sleep(0.3)
            db.delete_table(name)
            db.delete_table(auto)
            time.sleep(0.1)  # writers that were in flight have failed by now, or written
            stop.set()
            for th in threads:
                th.join(10)
            assert not errors, errors[:3]
            db.maintain_partitions()
            assert keys_under(db, ids, [name, auto]) == []
    finally:
        db.close()


def test_drop_index_under_concurrent_writers_leaves_no_key(engine_name, tmp_path):
    db = open_store(tmp_path / "s", engine_name, maintenance_interval=0.02)
    try:
        t = db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
        for round_ in range(3):
            g, loc = db.create_index("t", f"g{round_}", ["c"]), db.create_index(
                "t", f"l{round_}", ["k", "c"], index_type="LOCAL")
            ids = {g.schema.table_id, loc.schema.table_id}
            stop = threading.Event()
            errors: list = []

            def work(n: int, i: int) -> None:
                t.put_row((f"k{n}-{i % 100}",), {"c": f"v{i % 17}"})
                if i % 10 == 0:
                    db.table(f"g{round_}").get_range(("v",), ("w",))

            threads = _hammer(db, stop, errors, work)
            time.sleep(0.2)
            db.drop_index("t", f"g{round_}")
            db.drop_index("t", f"l{round_}")
            time.sleep(0.1)
            stop.set()
            for th in threads:
                th.join(10)
            assert not errors, errors[:3]
            db.maintain_partitions()
            assert keys_under(db, ids, []) == []
    finally:
        db.close()
