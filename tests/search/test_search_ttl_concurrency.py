"""TTL (the base table's and the index's own) and concurrent writers during a schema rebuild."""

from __future__ import annotations

import threading
import time

import pytest

import widetable
from widetable.search import MatchAllQuery, TermQuery
from widetable.table.values import now_ms

DAY = 86_400_000


@pytest.fixture
def db(tmp_path):
    d = widetable.open(str(tmp_path / "s"), purge_interval=None)
    yield d
    d.close()


def test_base_ttl_hides_expired_rows_and_purge_removes_them(db):
    t = db.create_table("t", [("id", "INTEGER")], ttl=86400, max_time_deviation=3 * 86400)
    now = now_ms()
    t.put_row((1,), {"k": ("a", now - DAY + 1500)})  # expires in 1.5 s
    t.put_row((2,), {"k": "a"})
    db.create_search_index("t", "i", [("k", "KEYWORD")], ttl=86400)
    assert db.wait_for_search_indexes("t", "i")
    assert db.search("t", "i", TermQuery("k", "a"), get_total_count=True).total_count == 2
    time.sleep(1.6)
    res = db.search("t", "i", TermQuery("k", "a"), get_total_count=True)
    assert res.total_count == 1 and [r.primary_key for r in res.rows] == [(2,)]
    db.purge_expired("t")  # a PURGE record: the index drops the document too
    assert db.verify_search_index("t", "i").ok
    assert db.describe_search_index("t", "i").row_count == 1


def test_index_ttl_drops_documents_older_than_itself_while_rows_live(db):
    t = db.create_table("t", [("id", "INTEGER")], ttl=3 * 86400, max_time_deviation=3 * 86400)
    now = now_ms()
    t.put_row((1,), {"k": ("a", now - 2 * DAY)})  # alive in the table, older than the index TTL
    t.put_row((2,), {"k": "a"})
    db.create_search_index("t", "i", [("k", "KEYWORD")], ttl=86400)
    assert db.wait_for_search_indexes("t", "i")
    assert t.get_row((1,)) is not None
    res = db.search("t", "i", TermQuery("k", "a"), get_total_count=True)
    assert res.total_count == 1 and [r.primary_key for r in res.rows] == [(2,)]
    assert db.verify_search_index("t", "i").ok
    db.update_search_index("t", "i", ttl=3 * 86400)  # a longer TTL brings the document back
    assert db.wait_for_search_indexes("t", "i")
    assert db.search("t", "i", TermQuery("k", "a"), get_total_count=True).total_count == 2
    assert db.verify_search_index("t", "i").ok
    with pytest.raises(widetable.WidetableError) as ei:
        db.update_search_index("t", "i", ttl=4 * 86400)
    assert ei.value.code == "OTSParameterInvalid" and str(4 * 86400) in str(ei.value)


def test_writers_and_a_schema_rebuild_at_once(db):
    t = db.create_table("t", [("id", "INTEGER")])
    for i in range(500):
        t.put_row((i,), {"k": f"k{i % 5}", "n": i})
    db.create_search_index("t", "i", [("k", "KEYWORD")], shards=3)
    stop = threading.Event()
    errors = []

    def writer(base: int) -> None:
        i = 0
        try:
            while not stop.is_set():
                key = base + i % 300
                if i % 4 == 3:
                    t.delete_row((key,))
                else:
                    t.put_row((key,), {"k": f"w{i % 7}", "n": -i})
                i += 1
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(b,)) for b in (0, 1000)]
    for th in threads:
        th.start()
    time.sleep(0.3)
    db.update_search_index("t", "i", add_fields=[("n", "LONG")])
    time.sleep(0.5)
    # reads keep working (on the old index) while the new one builds
    assert db.search("t", "i", MatchAllQuery(), get_total_count=True).total_count > 0
    time.sleep(0.5)
    stop.set()
    for th in threads:
        th.join()
    assert not errors
    assert db.wait_for_search_indexes("t", "i", timeout=120)
    deadline = time.time() + 60
    while db.describe_search_index("t", "i").rebuilding and time.time() < deadline:
        time.sleep(0.05)
    assert not db.describe_search_index("t", "i").rebuilding
    assert [f.name for f in db.describe_search_index("t", "i").meta.fields] == ["k", "n"]
    report = db.verify_search_index("t", "i")
    assert report.ok, report
    rows = list(t.scan())
    assert db.search("t", "i", MatchAllQuery(), get_total_count=True).total_count == len(rows)
    some = rows[len(rows) // 2]
    assert (some.primary_key in [r.primary_key for r in db.search(
        "t", "i", TermQuery("n", some["n"]), limit=100).rows])
