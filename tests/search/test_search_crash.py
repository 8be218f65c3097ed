"""SIGKILL during the full sync and during incremental sync, then reopen: the index resumes
from the position its own tantivy commit recorded, and verify_search_index is clean with
exact counts (no write lost, none applied twice)."""

from __future__ import annotations

import os

import pytest

import widetable
from tests.crashkit import kill_after
from widetable.search import GroupByField, MatchAllQuery, SumAgg

WRITER = os.path.join(os.path.dirname(__file__), "crash_writer.py")
pytestmark = pytest.mark.slow


def _check(path: str) -> None:
    db = widetable.open(path, purge_interval=None)
    try:
        assert db.wait_for_search_indexes("t", "ix", timeout=120)
        report = db.verify_search_index("t", "ix")
        assert report.ok, report
        rows = list(db.table("t").scan())
        res = db.search("t", "ix", MatchAllQuery(), limit=0, get_total_count=True,
                        aggs=[SumAgg("s", "n")], group_bys=[GroupByField("g", "k", size=100)])
        assert res.total_count == len(rows)
        assert res.aggs["s"] == (sum(r["n"] for r in rows) if rows else None)
        assert sum(g.row_count for g in res.group_bys["g"]) == len(rows)
        assert db.describe_search_index("t", "ix").sync_phase == "INCR"
    finally:
        db.close()


def test_kill_during_full_sync_then_incremental(tmp_path):
    path = str(tmp_path / "store")
    phases = []
    kill_after(WRITER, [path, "full", "20000"], 1, lambda line: phases.append(line.strip()))
    assert phases[0] == "FULL"  # killed while backfilling
    _check(path)
    acked = []
    kill_after(WRITER, [path, "incr", "0"], 300, lambda line: acked.append(line), pause=0.3)
    _check(path)
