"""The change stream through a server: widetable.connect over widetable's own protocol and
over Tablestore's (ListStream, DescribeStream, GetShardIterator, GetStreamRecord), the
stream options of CreateTable / UpdateTable / DescribeTable, and ``stream tail --endpoint``."""

from __future__ import annotations

import json
import threading
import time

import pytest
from stream.test_stream_api import check_positions  # type: ignore[import-not-found]

import widetable
from widetable import WidetableError
from widetable.db import MAX_STREAM_RETENTION
from widetable.errors import NotSupported, ParameterInvalid
from widetable.stream import api as stream_api

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
    check_positions(db, sid)


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
        name, kind, value, version = lines[0]["columns"][3]
        # A put's version is taken as the row is encoded, its commit time a moment later.
        assert (name, kind, value) == ("b", "PUT", {"$binary": "AP8="})
        assert 0 <= lines[0]["ts"] - version < 5000
        both = cli("stream", "tail", "t", "--endpoint", server.endpoint, "--data", "x", code=1)
        assert "not both" in both.output
        monkeypatch.delenv("WIDETABLE_ACCESS_KEY_SECRET")
        keyless = cli("stream", "tail", "t", "--endpoint", server.endpoint, code=1)
        assert "WIDETABLE_ACCESS_KEY_SECRET" in keyless.output
    finally:
        for name in db.list_tables():
            db.delete_table(name)
        db.close()


# -- a store served in this process: the embedded API beside the wire ------------------------


def test_pages_are_bounded_by_bytes_as_well_as_records(in_process, monkeypatch):
    db, server = in_process
    monkeypatch.setattr(stream_api, "MAX_PAGE_BYTES", 64 * 1024)
    db.create_table("t", PK, stream=True)
    big = b"x" * 30_000
    for i in range(7):
        db.table("t").put_row(("a", i), {"v": big})
    db.split_partition("t", "m")  # shard 0 is closed now: its last page has no iterator
    sid = db.list_stream()[0].stream_id
    for remote in (connect(server, "native"), connect(server, "tablestore"), None):
        reader = remote or db
        it, pages = reader.get_shard_iterator(sid, 0), []
        while it is not None:
            page = reader.get_stream_record(it, limit=1000)
            pages.append([r.primary_key[1] for r in page.records])
            it = page.next_iterator
        # 30 KB records, 64 KB pages: the record that crosses the bound ends its page
        assert pages == [[0, 1, 2], [3, 4, 5], [6]], pages
        if remote is not None:
            remote.close()


def test_a_bigger_page_than_the_native_answer_limit_is_split(in_process):
    db, server = in_process
    db.create_table("t", PK, stream=True)
    for i in range(12):  # 24 MB of records: over one native answer (20 MB) at limit 100
        db.table("t").put_row(("a", i), {"v": bytes([i]) * (2 * 2**20 - 100)})
    remote = connect(server, "native")
    try:
        sid = remote.list_stream()[0].stream_id
        assert [r.primary_key[1] for r in drain(remote, sid)] == list(range(12))
    finally:
        remote.close()


def test_describe_table_names_the_stream_from_one_snapshot(in_process):
    db, server = in_process
    db.create_table("t", PK, stream=True, stream_retention=MAX_STREAM_RETENTION)
    with pytest.raises(ParameterInvalid, match=str(MAX_STREAM_RETENTION)):
        db.create_table("u", PK, stream_retention=MAX_STREAM_RETENTION + 1)
    sid = db.list_stream("t")[0].stream_id
    assert db.describe_table("t").stream_id == sid
    db.table("t").put_row(("a", 1), {"x": 1})
    db.update_table("t", stream=False)
    db.update_table("t", stream=True)  # a new stream, with a new id
    new = db.list_stream("t")[0].stream_id
    assert new != sid and db.describe_table("t").stream_id == new
    for protocol in ("native", "tablestore"):
        remote = connect(server, protocol)
        try:
            d = remote.describe_table("t")
            assert (d.stream, d.stream_id, d.stream_retention) == (True, new, MAX_STREAM_RETENTION)
            remote.update_table("t", stream=False)
            assert remote.describe_table("t").stream_id is None
            remote.update_table("t", stream=True)
        finally:
            remote.close()


def test_bad_positions_and_stream_ids_are_parameter_errors_on_both_paths(remote_db):
    db = remote_db
    db.create_table("t", PK, stream=True)
    sid = db.list_stream()[0].stream_id
    for position in (2**64, -1, object(), "latest", b"LATEST"):
        with pytest.raises(ParameterInvalid, match="position must be"):
            db.get_shard_iterator(sid, 0, position)
    for stream_id in (5, None):
        with pytest.raises(WidetableError) as err:
            db.get_shard_iterator(stream_id, 0)
        assert err.value.code == "OTSObjectNotExist"
    with pytest.raises(ParameterInvalid):
        db.create_table("u", PK, stream_retention=86400.0)  # seconds are an int, as embedded


def test_tail_latest_follows_new_shards_from_their_first_record(in_process, monkeypatch):
    db, server = in_process
    db.create_table("t", [("k", "STRING")], stream=True)
    t = db.table("t")
    t.put_row(("old",), {"x": 0})  # before the tail starts: --latest skips it
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from widetable.cli import app
    from widetable.cli import streams as tail_module

    polled = threading.Event()  # the tail found nothing new once: its LATEST iterators are taken

    def pause(seconds: float) -> None:
        polled.set()
        time.sleep(seconds)

    monkeypatch.setattr(tail_module, "time", SimpleNamespace(sleep=pause))
    box = {}

    def tail() -> None:
        box["result"] = CliRunner().invoke(app, ["stream", "tail", "t", "--latest", "--follow",
                                                 "--limit", "3", "--endpoint", server.endpoint])

    thread = threading.Thread(target=tail, daemon=True)
    thread.start()
    assert polled.wait(20)
    t.put_row(("a",), {"x": 1})
    db.split_partition("t", "m")  # shard 0 -> 1, 2; their records come before the next poll
    t.put_row(("b",), {"x": 2})
    t.put_row(("z",), {"x": 3})
    thread.join(20)
    assert not thread.is_alive()
    assert [json.loads(line)["pk"] for line in box["result"].stdout.splitlines()] == [
        ["a"], ["b"], ["z"]]


def test_stream_tail_refuses_a_malformed_endpoint(cli, monkeypatch):
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", "secret")
    for endpoint in ("http://127.0.0.1:99999", "http://[::1", "http://127.0.0.1:abc", "ftp://x"):
        out = cli("stream", "tail", "t", "--endpoint", endpoint, code=1).output
        assert "must look like http://host:port" in out and endpoint in out


def test_the_tablestore_path_refuses_streams_it_cannot_read():
    """What the Tablestore service answers (opaque shard ids and iterators) is refused with
    a clear error: widetable.connect reads the streams of widetable servers."""
    from widetable.client import streams
    from widetable.wire.proto import enum_value, pb

    def service(api: str, request) -> bytes:  # answers shaped as the Tablestore service's
        assert api == "DescribeStream"
        resp = pb.DescribeStreamResponse(
            stream_id="sid", table_name="t", creation_time=1, expiration_time=24,
            stream_status=enum_value("StreamStatus", "STREAM_ACTIVE"))
        resp.shards.add(shard_id="a3f1c0de5b7e4a0c")
        return resp.SerializeToString()

    with pytest.raises(NotSupported, match="widetable servers"):
        streams.describe_stream(service, "sid")
    with pytest.raises(ParameterInvalid, match="invalid shard iterator"):
        streams.get_stream_record(service, "AAAA-an-opaque-iterator")


def test_describe_table_from_a_widetable_server_is_the_embedded_one(in_process):
    db, server = in_process
    db.create_table("t", PK, stream=True, split_points=["m"], defined_columns=[("c", "STRING")],
                    stream_retention=5400)
    db.create_index("t", "ix", ["c"], progress=False)
    for i in range(20):
        db.table("t").put_row(("a" if i % 2 else "x", i), {"c": f"v{i}"})
    db.split_partition("t", "d")
    db.wait_for_indexes(10)
    native, plain = connect(server, "native"), connect(server, "tablestore")
    try:
        mine, theirs = db.describe_table("t"), native.describe_table("t")
        assert type(theirs) is type(mine)
        steady = ("name", "primary_key", "options", "table_id", "created_at", "auto_increment",
                  "split_history", "defined_columns", "stream", "stream_retention", "stream_id")
        assert {f: getattr(theirs, f) for f in steady} == {f: getattr(mine, f) for f in steady}
        assert [(p.id, p.start, p.end, p.state) for p in theirs.partitions] == [
            (p.id, p.start, p.end, p.state) for p in mine.partitions]
        assert [(p.id, p.start) for p in theirs.partitions] == [(2, None), (3, "d"), (1, "m")]
        [ix] = theirs.indexes
        assert (ix.name, ix.index_type, ix.primary_key, ix.base_key, ix.lag_ms) == (
            "ix", "GLOBAL", ("c",), ("k", "s"), 0)
        # Tablestore's DescribeTable carries less: no partitions, no lag, hours of retention.
        reduced = plain.describe_table("t")
        assert (reduced.partitions, reduced.indexes[0].lag_ms, reduced.stream_retention) == ([], None, 7200)
        with pytest.raises(WidetableError) as err:
            native.describe_table("missing")
        assert err.value.code == "OTSObjectNotExist"
    finally:
        native.close()
        plain.close()


def test_the_row_commands_work_on_a_served_store(in_process, cli, monkeypatch, tmp_path):
    """A served store is locked by its server: --endpoint runs the commands through it."""
    db, server = in_process
    db.create_table("orders", [("user", "STRING"), ("n", "INTEGER")], stream=True)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
    at = ("--endpoint", server.endpoint)
    assert "orders\tuser STRING, n INTEGER" in cli("tables", *at).stdout
    cli("put", "orders", "--pk", '["u1", 1]', "--col", "amount=5", "--col", "note=hi", *at)
    cli("put", "orders", "--pk", '["u1", 2]', "--col", "amount=7", *at)
    out = cli("update", "orders", "--pk", '["u1", 1]', "--increment", "amount=3", *at).stdout
    assert "amount = 8" in out
    row = json.loads(cli("get", "orders", "--pk", '["u1", 1]', "--format", "jsonl", *at).stdout)
    assert row["columns"] == {"amount": 8, "note": "hi"}
    lines = cli("scan", "orders", "--format", "jsonl", "--filter", "amount > 6", *at).stdout
    assert [json.loads(line)["pk"] for line in lines.splitlines()] == [["u1", 1], ["u1", 2]]
    cli("delete", "orders", "--pk", '["u1", 2]', "--expect", "exist", *at)
    assert db.table("orders").get_row(("u1", 2)) is None  # the server's store changed
    described = cli("describe", "orders", *at).stdout  # with its partitions, from the server
    assert "primary key" in described and "serving" in described
    missing = cli("get", "orders", "--pk", '["u9", 1]', *at, code=1)
    assert "no row with primary key" in missing.output
    dump = cli("export", "orders", "-", "--format", "jsonl", *at).stdout
    db.create_table("copy", [("user", "STRING"), ("n", "INTEGER")])
    source = tmp_path / "orders.jsonl"
    source.write_text(dump)
    assert "1 row" in cli("import", "copy", str(source), *at).output
    assert [r.columns for r in db.table("copy").scan()] == [{"amount": 8, "note": "hi"}]
    cli("drop-table", "orders", "--yes", *at)
    cli("drop-table", "copy", "--yes", *at)
    assert db.list_tables() == []
    both = cli("tables", "--data", "somewhere", *at, code=1)
    assert "not both" in both.output


@pytest.mark.parametrize("instance", ["widetable", "prod"])
def test_the_serve_banner_shows_a_command_line_that_works(tmp_path, cli, monkeypatch, instance):
    import os
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WIDETABLE_ACCESS_KEY", "WIDETABLE_INSTANCE"))}
    monkeypatch.delenv("WIDETABLE_INSTANCE", raising=False)
    port = serving.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "widetable", "serve", "--data",
                             str(tmp_path / "d"), "--port", str(port), "--instance", instance],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = []
        for line in proc.stdout:  # type: ignore[union-attr]
            banner.append(line)
            if "stops it gracefully" in line:
                break
        text = "".join(banner)
        found = re.search(r"WIDETABLE_ACCESS_KEY_ID=(\S+) WIDETABLE_ACCESS_KEY_SECRET=(\S+)"
                          r"(?: WIDETABLE_INSTANCE=(\S+))? \\\n"
                          r"\s+widetable tables --endpoint (\S+)", text)
        assert found, text
        key_id, secret, named, endpoint = found.groups()
        assert named == (None if instance == "widetable" else instance)
        monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", secret)
        if named:
            monkeypatch.setenv("WIDETABLE_INSTANCE", named)
        assert "No tables." in cli("tables", "--endpoint", endpoint).output
    finally:
        proc.terminate()
        proc.wait(30)


def test_descriptions_keep_each_value_as_it_was_sent(in_process):
    """Partition options may be ints or floats; a description over the wire keeps which."""
    db, server = in_process
    db.create_table("t", PK, capacity=1.5, split_size=10**9, split_load_window=20, merge_load=2)
    remote = connect(server, "native")
    try:
        mine, theirs = db.describe_table("t").options, remote.describe_table("t").options
        assert theirs == mine
        assert [type(getattr(theirs, f)) for f in ("capacity", "split_size", "split_load_window",
                                                    "merge_load")] == [float, int, int, int]
        remote.table("t").put_row(("a", 1), {"x": 1})  # db.table() describes the table too
    finally:
        remote.close()


def test_a_non_utf8_argument_is_an_error_not_a_traceback(in_process, cli, monkeypatch):
    _, server = in_process
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
    out = cli("describe", "bad\udcff", "--endpoint", server.endpoint, code=1).output
    assert "not valid Unicode text" in out


def test_a_trimmed_iterator_is_trimmed_data_access_on_both_paths(in_process):
    from widetable.errors import TrimmedDataAccess

    db, server = in_process
    db.create_table("t", PK, stream=True, stream_retention=1)
    for i in range(3):
        db.table("t").put_row(("a", i), {"x": i})
    sid = db.list_stream()[0].stream_id
    remotes = [connect(server, "native"), connect(server, "tablestore")]
    try:
        behind = []
        for remote in remotes:
            it = remote.get_shard_iterator(sid, 0)
            assert [r.sequence for r in remote.get_stream_record(it, limit=1).records] == [1]
            behind.append(it)
        time.sleep(1.1)
        assert db.trim_change_log() == 3
        for remote, it in zip(remotes, behind):
            with pytest.raises(TrimmedDataAccess, match="up to 3"):
                remote.get_stream_record(it)
            assert remote.get_stream_record(remote.get_shard_iterator(sid, 0)).records == []
            with pytest.raises(ParameterInvalid, match="stream must be True or False, got 'no'"):
                remote.create_table("u", PK, stream="no")
            with pytest.raises(ParameterInvalid, match="include_base_data must be True or False"):
                remote.create_index("t", "ix", ["s"], include_base_data="no")
    finally:
        for remote in remotes:
            remote.close()
    assert db.list_tables() == ["t"]


def test_tail_reports_records_trimmed_before_it_read_them(in_process, monkeypatch):
    """A --follow tail that falls behind retention says so on stderr and goes on from the
    oldest kept record, instead of stopping (or printing on as if nothing was missed)."""
    db, server = in_process
    db.create_table("t", [("k", "STRING")], stream=True, stream_retention=1)
    t = db.table("t")
    t.put_row(("a",), {"x": 0})
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from widetable.cli import app
    from widetable.cli import streams as tail_module

    def pause(seconds: float) -> None:  # the tail's first poll found nothing new
        if t.get_row(("d",)) is None:
            t.put_row(("b",), {"x": 1})
            t.put_row(("c",), {"x": 2})
            time.sleep(1.1)
            assert db.trim_change_log() == 3  # a (read), b and c (never read)
            t.put_row(("d",), {"x": 3})

    monkeypatch.setattr(tail_module, "time", SimpleNamespace(sleep=pause))
    result = CliRunner().invoke(app, ["stream", "tail", "t", "--follow", "--limit", "2",
                                      "--endpoint", server.endpoint])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["pk"] for line in result.stdout.splitlines()] == [["a"], ["d"]]
    assert "shard 0: the records of shard 0 after sequence 1 up to 3" in result.stderr
    assert "records were missed" in result.stderr


def test_tail_follow_needs_a_server(cli):
    result = cli("stream", "tail", "t", "--follow", code=1)
    assert "--follow needs --endpoint" in result.stderr


@pytest.mark.parametrize("limit", [0, 1001, 2**40, "5"])
def test_a_bad_limit_on_an_iterator_of_a_stream_made_anew_is_object_not_exist(remote_db, limit):
    """As the store checks: the iterator's stream first, then the limit; also for limits
    that cannot travel in Tablestore's int32 field."""
    db = remote_db
    db.create_table("t", PK, stream=True)
    db.table("t").put_row(("a", 1), {"x": 1})
    (stream,) = db.list_stream("t")
    it = db.get_shard_iterator(stream.stream_id, 0)
    with pytest.raises(ParameterInvalid, match=f"got {limit!r}"):
        db.get_stream_record(it, limit)
    db.update_table("t", stream=False)
    db.update_table("t", stream=True)
    with pytest.raises(WidetableError) as info:
        db.get_stream_record(it, limit)
    assert info.value.code == "OTSObjectNotExist"
