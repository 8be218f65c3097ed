"""The change stream through a server: widetable.connect over widetable's own protocol and
over Tablestore's (ListStream, DescribeStream, GetShardIterator, GetStreamRecord), the
stream options of CreateTable / UpdateTable / DescribeTable, and ``stream tail --endpoint``."""

from __future__ import annotations

import json
import time

import pytest

import widetable
from widetable import WidetableError
from widetable.errors import NotSupported, ParameterInvalid

from . import serving

PK = [("k", "STRING"), ("s", "INTEGER")]


def connect(server, protocol: str):
    return widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                             access_key_secret=serving.ACCESS_KEY_SECRET, protocol=protocol)


def drain(db, stream_id: str) -> list:
    """Every record of every shard, parents before children."""
    desc = db.describe_stream(stream_id)
    out = []
    for shard in desc.shards:
        it = db.get_shard_iterator(stream_id, shard.shard_id)
        while it is not None:
            page = db.get_stream_record(it, limit=2)  # pages of two: the iterators chain
            out.extend(page.records)
            it = page.next_iterator if page.records else None
    return out


def write_changes(db, name: str = "t") -> int:
    """Seven changes of every kind; returns the version one of them deleted."""
    t = db.table(name)
    old = int(time.time() * 1000) - 60_000
    t.put_row(("a", 1), {"i": 1, "f": 1.5, "c": "x", "b": b"\x00\xff", "t": True})
    t.update_row(("a", 1), put={"i": 2}, delete_column=["c"], increment={"n": 5})
    t.put_row(("a", 2), {"v": (1, old), "w": 0})
    t.update_row(("a", 2), delete_version={"v": old})
    t.delete_row(("a", 1))
    db.batch_write_row([(name, "put", ("b", 1), {"x": 1}), (name, "delete", ("b", 2))])
    return old


def test_records_and_stream_options_over_the_wire(remote_db):
    db = remote_db
    db.create_table("t", PK, stream=True, stream_retention=7200)
    db.create_table("plain", PK)
    d = db.describe_table("t")
    assert (d.stream, d.stream_retention) == (True, 7200)
    assert db.describe_table("plain").stream is False
    old = write_changes(db)
    [info] = db.list_stream()
    assert info.table == "t" and db.list_stream("t") == [info] and db.list_stream("plain") == []
    desc = db.describe_stream(info.stream_id)
    assert (desc.table, desc.retention, [s.shard_id for s in desc.shards]) == ("t", 7200, [0])
    records = drain(db, info.stream_id)
    assert [(r.operation, r.primary_key) for r in records] == [
        ("PUT", ("a", 1)), ("UPDATE", ("a", 1)), ("PUT", ("a", 2)), ("UPDATE", ("a", 2)),
        ("DELETE", ("a", 1)), ("PUT", ("b", 1)), ("DELETE", ("b", 2)),
    ]
    assert [r.sequence for r in records] == list(range(1, 8))
    assert all(r.shard == 0 and r.timestamp > 0 for r in records)
    assert {c.name: c.value for c in records[0].columns} == {
        "i": 1, "f": 1.5, "c": "x", "b": b"\x00\xff", "t": True}
    assert {(c.name, c.kind, c.value) for c in records[1].columns} == {
        ("i", "PUT", 2), ("c", "DELETE_ALL_VERSIONS", None), ("n", "PUT", 5)}
    assert [(c.name, c.kind, c.value, c.timestamp) for c in records[3].columns] == [
        ("v", "DELETE_ONE_VERSION", None, old)]
    assert records[4].columns == ()


def test_both_protocols_return_the_same_records(server):
    native, plain = connect(server, "native"), connect(server, "tablestore")
    try:
        native.create_table("t", PK, stream=True, split_points=["b"])
        write_changes(native)
        sid = native.list_stream("t")[0].stream_id
        [mine], [theirs] = native.list_stream("t"), plain.list_stream("t")
        assert (theirs.stream_id, theirs.table) == (mine.stream_id, mine.table)
        assert abs(theirs.created_at - mine.created_at) < 1e-6  # microseconds over Tablestore's
        assert [s.shard_id for s in plain.describe_stream(sid).shards] == [0, 1]
        mine = drain(native, sid)
        assert drain(plain, sid) == mine
        assert {r.primary_key[0]: r.shard for r in mine} == {"a": 0, "b": 1}  # pre-split: 2 shards
        assert [r.sequence for r in mine if r.shard == 0] == [1, 2, 3, 4, 5]
    finally:
        for name in native.list_tables():
            native.delete_table(name)
        native.close()
        plain.close()


def test_iterator_positions(remote_db):
    db = remote_db
    db.create_table("t", PK, stream=True)
    t = db.table("t")
    for i in range(5):
        t.put_row(("a", i), {"x": i})
    sid = db.list_stream()[0].stream_id
    if db.protocol == "tablestore":  # GetShardIterator has no position
        for position in ("LATEST", 3):
            with pytest.raises(NotSupported, match="TRIM_HORIZON"):
                db.get_shard_iterator(sid, 0, position)
        return
    latest = db.get_shard_iterator(sid, 0, "LATEST")
    assert db.get_stream_record(latest).records == []
    t.put_row(("a", 9), {"x": 9})
    assert [r.primary_key for r in db.get_stream_record(latest).records] == [("a", 9)]
    at3 = db.get_shard_iterator(sid, 0, 3)
    assert [r.sequence for r in db.get_stream_record(at3, limit=2).records] == [3, 4]


def test_errors_name_what_is_wrong(remote_db):
    db = remote_db
    db.create_table("t", PK, stream=True)
    sid = db.list_stream()[0].stream_id
    cases = [
        (lambda: db.describe_stream("t/999"), "OTSObjectNotExist", "t/999"),
        (lambda: db.get_shard_iterator("nope/1", 0), "OTSObjectNotExist", "nope/1"),
        (lambda: db.get_shard_iterator(sid, 7), "OTSParameterInvalid", "7"),
        (lambda: db.get_stream_record("not-an-iterator"), "OTSParameterInvalid", "not-an-iterator"),
        (lambda: db.get_stream_record(db.get_shard_iterator(sid, 0), limit=0), "OTSParameterInvalid", "0"),
        (lambda: db.list_stream("missing"), "OTSObjectNotExist", "missing"),
    ]
    for call, code, named in cases:
        with pytest.raises(WidetableError) as err:
            call()
        assert err.value.code == code and named in err.value.message, err.value


def test_stream_toggled_and_retention_changed_through_update_table(remote_db):
    db = remote_db
    db.create_table("t", PK)
    assert db.update_table("t", stream=True).stream is True
    db.table("t").put_row(("a", 1), {"x": 1})
    [info] = db.list_stream()
    d = db.update_table("t", stream_retention=3 * 3600)  # alone: the stream stays on
    assert (d.stream, d.stream_retention) == (True, 3 * 3600)
    assert [r.primary_key for r in drain(db, info.stream_id)] == [("a", 1)]
    for bad in (90, 0, -3600, "1h"):  # Tablestore's protocol carries whole hours only
        with pytest.raises(ParameterInvalid, match="stream_retention"):
            db.update_table("t", stream_retention=bad)
    assert db.describe_table("t").stream_retention == 3 * 3600  # nothing was sent
    with pytest.raises(ParameterInvalid, match="stream_retention"):
        db.create_table("u", PK, stream=True, stream_retention=5400)
    assert "u" not in db.list_tables()
    db.update_table("t", stream=False)
    assert db.list_stream() == []
    with pytest.raises(WidetableError) as err:
        db.describe_stream(info.stream_id)
    assert err.value.code == "OTSObjectNotExist"


def test_stream_tail_reads_a_served_store(server, cli, monkeypatch):
    db = connect(server, "auto")
    try:
        db.create_table("t", PK, stream=True)
        write_changes(db)
        # A served store is locked: --data cannot read it, --endpoint can.
        monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
        monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
        out = cli("stream", "tail", "t", "--endpoint", server.endpoint, "--limit", "3").stdout
        lines = [json.loads(line) for line in out.splitlines()]
        assert [(r["seq"], r["op"], r["pk"]) for r in lines] == [
            (1, "PUT", ["a", 1]), (2, "UPDATE", ["a", 1]), (3, "PUT", ["a", 2])]
        assert lines[0]["columns"][3] == ["b", "PUT", {"$binary": "AP8="}, lines[0]["ts"]]
        both = cli("stream", "tail", "t", "--endpoint", server.endpoint, "--data", "x", code=1)
        assert "not both" in both.output
        monkeypatch.delenv("WIDETABLE_ACCESS_KEY_SECRET")
        keyless = cli("stream", "tail", "t", "--endpoint", server.endpoint, code=1)
        assert "WIDETABLE_ACCESS_KEY_SECRET" in keyless.output
    finally:
        for name in db.list_tables():
            db.delete_table(name)
        db.close()
