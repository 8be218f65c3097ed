"""create_index cut short by SIGKILL: the index finishes its backfill when the store opens
again, and an index id a crash left uncatalogued is never handed out again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import widetable
from widetable.keys import layout

ROWS = 3000


def run_child(code: str, path: str) -> subprocess.CompletedProcess:
    """Run ``code`` (with ``path`` as ``PATH``) in a fresh interpreter that SIGKILLs itself."""
    script = "import os, signal, sys\nimport widetable\nPATH = sys.argv[1]\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, check=False,
                          timeout=120)


def make_table(path: str) -> None:
    with widetable.open(path, purge_interval=None) as db:
        db.create_table("t", [("k", "INTEGER")], defined_columns=[("c", "INTEGER")])
        for j in range(0, ROWS, 200):
            db.batch_write_row([("t", "put", (i,), {"c": i % 7}) for i in range(j, j + 200)])


@pytest.mark.parametrize("kind", ["GLOBAL", "LOCAL"])
def test_a_backfill_killed_midway_finishes_at_reopen(tmp_path, kind):
    path = str(tmp_path / "store")
    make_table(path)
    key = ["c"] if kind == "GLOBAL" else ["k", "c"]  # a LOCAL index starts with the partition key
    done = run_child(f"""
        from widetable.index import backfill
        chunk, calls = backfill._chunk, []
        def dying(*args):
            calls.append(1)
            if len(calls) == 3:  # two chunks of 500 rows written, then the process dies
                os.kill(os.getpid(), signal.SIGKILL)
            return chunk(*args)
        backfill._chunk = dying
        db = widetable.open(PATH, purge_interval=None)
        db.create_index("t", "ix", {key!r}, index_type={kind!r}, progress=False)
        print("create_index returned")
    """, path)
    assert done.returncode == -9, done.stderr
    assert "returned" not in done.stdout
    with widetable.open(path, purge_interval=None) as db:
        assert [i.name for i in db.describe_table("t").indexes] == ["ix"]
        assert db.wait_for_indexes(30)
        report = db.verify_index("t", "ix")
        assert report.ok, report
        assert report.entries == ROWS
        assert len(list(db.table("ix").scan())) == ROWS
    with widetable.open(path, purge_interval=None) as db:  # built: no backfill again
        assert not any(spec.building for spec in db.table("t").schema.indexes)


def test_a_finished_index_is_not_marked_building(tmp_path):
    with widetable.open(str(tmp_path / "s"), purge_interval=None) as db:
        db.create_table("t", [("k", "INTEGER")], defined_columns=[("c", "INTEGER")])
        db.table("t").put_row((1,), {"c": 1})
        db.create_index("t", "ix", ["k", "c"], index_type="LOCAL", progress=False)
        db.create_index("t", "gx", ["c"], include_base_data=False, progress=False)
        raw = db._engine.get(layout.catalog_key("t"))
        assert b"building" not in raw  # the catalog of a built index is as before


def test_an_index_id_taken_before_a_crash_is_not_reused(tmp_path):
    """Writers maintain a LOCAL index as soon as create_index configures it, before its
    catalog entry: a kill in between must not leave those entries to the next table."""
    path = str(tmp_path / "store")
    with widetable.open(path, purge_interval=None) as db:
        db.create_table("t", [("k", "STRING"), ("c", "STRING")], defined_columns=[("s", "INTEGER")])
    done = run_child("""
        from widetable.index.manager import IndexManager
        configure = IndexManager.configure
        def killing(self, table):
            configure(self, table)
            if table.schema.indexes:  # live for writers, not yet catalogued
                table.put_row(("a", "x"), {"s": 1})
                os.kill(os.getpid(), signal.SIGKILL)
        IndexManager.configure = killing
        db = widetable.open(PATH, purge_interval=None)
        db.create_index("t", "ix", ["k", "s"], index_type="LOCAL", progress=False)
    """, path)
    assert done.returncode == -9, done.stderr
    with widetable.open(path, purge_interval=None) as db:
        assert db.describe_table("t").indexes == []
        u = db.create_table("u", [("k", "STRING"), ("s", "INTEGER"), ("c", "STRING")])
        assert list(u.scan()) == []
        assert db.table("t").get_row(("a", "x")) is not None  # the acknowledged-by-nobody put


def test_keys_left_under_an_untaken_id_are_cleared_when_it_is_taken(tmp_path):
    """An older version stored the id counter only with the catalog entry, so a crash
    could leave LOCAL entries under an id it then handed out again: taking an id, for a
    table or an index, deletes whatever lies under it."""
    with widetable.open(str(tmp_path / "s"), purge_interval=None) as db:
        db.create_table("t", [("k", "STRING")], defined_columns=[("s", "INTEGER")])
        for n in (1, 2):  # under the next two ids, as such a crash left them
            db._engine.put(layout.table_range(db.table("t").schema.table_id + n)[0] + b"\x02x\x00",
                           b"left over")
        u = db.create_table("u", [("k", "STRING")])
        assert list(u.scan()) == []
        ix = db.create_index("t", "ix", ["k", "s"], index_type="LOCAL", progress=False)
        assert list(ix.scan()) == []
        assert db._engine.get(layout.table_range(ix.schema.table_id)[0] + b"\x02x\x00") is None
