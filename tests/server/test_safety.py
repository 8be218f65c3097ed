"""Server safety against clients that are not the SDKs: authentication before a body is
read, ``100 Continue`` only after it, the connection cap, the request deadline (slow
loris), 500 answers that name a request id and no exception text, an event loop that
never waits on a row lock a pool thread holds, and read-only access keys.

Every test runs a real server on a free loopback port (in this process, so a test can
set its limits and hold a handler on the pool)."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

import widetable
from widetable.server import KeyStore, WidetableServer, load_keys
from widetable.server.native import service as native_service
from widetable.server.tablestore import service
from widetable.wire import convert, native
from widetable.wire import plainbuffer as pbuf
from widetable.wire.proto import enum_value, pb

from . import serving
from .test_http import LIST, Reader, request
from .test_native import answer, call_frame, upgrade_request

READER_ID, READER_SECRET = "reader", "reader-secret"


def start(db, keys: KeyStore | None = None, **options) -> WidetableServer:
    keys = keys or KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET})
    server = WidetableServer(db, keys, port=0, **options)
    threading.Thread(target=server.serve_forever, name="test-serve", daemon=True).start()
    return server


@pytest.fixture
def store(tmp_path):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None, maintenance_interval=None)
    db.create_table("t", [("k", "STRING")]).put_row(("a",), {"v": 1})
    return db


@pytest.fixture
def served(store):
    server = start(store)
    yield server
    server.drain(5)


def dial(server: WidetableServer, timeout: float = 10) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return sock, Reader(sock)


def head_only(api: str, length: int, secret: str = serving.ACCESS_KEY_SECRET,
              extra: str = "", key_id: str = serving.ACCESS_KEY_ID) -> bytes:
    """The head of a signed POST /<api> announcing a body of ``length`` bytes (the MD5
    header is of no body: the head is judged before any body byte is read)."""
    headers = serving.signed_headers(api, b"", {"x-ots-accesskeyid": key_id}, secret=secret)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (f"POST /{api} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n{lines}{extra}"
            "\r\n").encode("latin-1")


def error_of(body: bytes):
    return pb.Error.FromString(body)


def put_row(key: str, value: int = 1) -> bytes:
    row = pbuf.encode_row(pbuf.PlainRow([("k", key)], [pbuf.Cell("v", value)]))
    req = pb.PutRowRequest(table_name="t", row=row)
    req.condition.row_existence = 0
    return req.SerializeToString()


def get_row(key: str) -> bytes:
    return pb.GetRowRequest(table_name="t", primary_key=convert.encode_key(("k",), (key,)),
                            max_versions=1).SerializeToString()


def batch_write(keys: list[str]) -> bytes:
    msg = pb.BatchWriteRowRequest()
    table = msg.tables.add(table_name="t")
    for key in keys:
        row = table.rows.add(type=enum_value("OperationType", "PUT"))
        row.row_change = pbuf.encode_row(pbuf.PlainRow([("k", key)], [pbuf.Cell("v", 2)]))
        row.condition.row_existence = 0
    return msg.SerializeToString()


# -- authentication before the body ------------------------------------------------------


def test_a_wrongly_signed_request_is_refused_before_its_body_is_read(served) -> None:
    """The head of a 5 MB request with a bad signature is answered 403 at once and the
    connection closed; the server never waits for (or reads) the body."""
    sock, reader = dial(served, timeout=5)
    with sock:
        sock.sendall(head_only("PutRow", 5 * 2**20, secret="not-the-secret"))
        status, headers, body = reader.response()
        assert status == 403 and error_of(body).code == "OTSAuthFailed"
        assert "authorization" not in headers  # an unknown caller's answer is not signed
        assert reader.closed()


def test_an_unknown_key_is_refused_before_its_body(served) -> None:
    sock, reader = dial(served, timeout=5)
    with sock:
        sock.sendall(head_only("PutRow", 100_000, key_id="nobody"))
        status, _, body = reader.response()
        assert status == 403 and "unknown" in error_of(body).message
        assert reader.closed()


def test_a_well_signed_request_waits_for_its_body_then_runs(served) -> None:
    body = put_row("b")
    data = request("PutRow", body)
    sock, reader = dial(served)
    with sock:
        sock.sendall(data[:-5])
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # no answer before the body is whole
        sock.settimeout(10)
        sock.sendall(data[-5:])
        assert reader.response()[0] == 200
    assert served.db.table("t").get_row(("b",))["v"] == 1


def test_100_continue_comes_only_after_authentication(served) -> None:
    expect = "Expect: 100-continue\r\n"
    sock, reader = dial(served, timeout=5)
    with sock:  # a bad signature: 403, never 100
        sock.sendall(head_only("PutRow", 1000, secret="wrong", extra=expect))
        status, _, body = reader.response()
        assert status == 403 and error_of(body).code == "OTSAuthFailed"
        assert reader.closed()
    body = put_row("c")
    data = request("PutRow", body, extra=expect)
    head_end = data.index(b"\r\n\r\n") + 4
    sock, reader = dial(served)
    with sock:  # a good one: 100, then the body, then 200
        sock.sendall(data[:head_end])
        assert reader.response()[0] == 100
        sock.sendall(data[head_end:])
        assert reader.response()[0] == 200
    assert served.db.table("t").get_row(("c",))["v"] == 1


# -- the connection cap and the request deadline -------------------------------------------


def test_connections_over_the_cap_are_answered_server_busy(store) -> None:
    server = start(store, max_connections=3)
    socks = []
    try:
        for _ in range(3):
            sock, reader = dial(server)
            socks.append(sock)
            sock.sendall(request("ListTable", LIST))
            assert reader.response()[0] == 200  # registered and served
        sock, reader = dial(server, timeout=5)
        with sock:
            status, _, body = reader.response()
            assert status == 503 and error_of(body).code == "OTSServerBusy"
            assert "3 connections" in error_of(body).message
            assert reader.closed()
        socks.pop().close()
        deadline = time.monotonic() + 5
        while len(server.core.open) >= 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        sock, reader = dial(server)  # a place is free again
        with sock:
            sock.sendall(request("ListTable", LIST))
            assert reader.response()[0] == 200
    finally:
        for sock in socks:
            sock.close()
        server.drain(5)


def test_max_connections_is_checked_and_on_the_command_line(store) -> None:
    import inspect

    from widetable.cli import serve

    for bad in (0, -1, 1.5, "10"):
        with pytest.raises(ValueError, match="max_connections"):
            WidetableServer(store, KeyStore({"a": "b"}), port=0, max_connections=bad)
    with pytest.raises(ValueError, match="request_timeout"):
        WidetableServer(store, KeyStore({"a": "b"}), port=0, request_timeout=0)
    params = inspect.signature(serve.serve).parameters
    assert params["max_connections"].default == 512
    assert params["request_timeout"].default == 30.0
    store.close()


def test_a_client_trickling_a_request_is_closed_at_the_deadline(store) -> None:
    """Slow loris: a byte every 0.1 s keeps the connection from ever being idle (60 s),
    yet its request is not whole one request_timeout (1 s) after its first byte: closed."""
    server = start(store, request_timeout=1.0, idle_timeout=60.0)
    try:
        sock, reader = dial(server, timeout=0.1)
        data = request("ListTable", LIST)
        begun = time.monotonic()
        closed = False
        with sock:
            for byte in data[:-1]:
                try:
                    sock.sendall(bytes((byte,)))
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                if time.monotonic() - begun > 10:
                    break
        elapsed = time.monotonic() - begun
        assert closed, "the trickling connection was still open after 10 s"
        assert 0.9 <= elapsed < 8, elapsed
        sock, reader = dial(server)  # others are served as before
        with sock:
            sock.sendall(request("ListTable", LIST))
            assert reader.response()[0] == 200
    finally:
        server.drain(5)


def test_the_deadline_spares_requests_that_arrive_in_time(store) -> None:
    """Several requests on one connection, each sent whole, over longer than the deadline."""
    server = start(store, request_timeout=0.5, idle_timeout=60.0)
    try:
        sock, reader = dial(server)
        with sock:
            for _ in range(4):
                sock.sendall(request("ListTable", LIST))
                assert reader.response()[0] == 200
                time.sleep(0.3)
    finally:
        server.drain(5)


# -- 500 answers ----------------------------------------------------------------------------


SECRET_DETAIL = "disk /srv/secret-volume-7 is full"


def test_a_500_names_the_request_id_and_no_exception_text(served, monkeypatch, caplog) -> None:
    def broken(db, message):
        raise RuntimeError(SECRET_DETAIL)

    monkeypatch.setitem(service.HANDLERS, "ListTable", broken)
    sock, reader = dial(served)
    with sock, caplog.at_level(logging.ERROR, logger="widetable.server"):
        sock.sendall(request("ListTable", LIST))
        status, headers, body = reader.response()
    error = error_of(body)
    assert status == 500 and error.code == "OTSInternalServerError"
    assert SECRET_DETAIL not in error.message and "RuntimeError" not in error.message
    request_id = headers["x-ots-requestid"]
    assert request_id in error.message
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and SECRET_DETAIL in str(logged[0].exc_info[1])


def test_a_native_500_names_a_request_id_and_no_exception_text(served, monkeypatch,
                                                               caplog) -> None:
    def broken(db, *args):
        raise RuntimeError(SECRET_DETAIL)

    monkeypatch.setitem(native_service.CALLS, native.GET_ROW, (broken, 7))
    sock, reader = dial(served)
    with sock, caplog.at_level(logging.ERROR, logger="widetable.server"):
        sock.sendall(upgrade_request())
        assert reader.response()[0] == 101
        sock.sendall(call_frame(native.GET_ROW, "t", ("a",), None, None, None, None, None))
        result = answer(reader)
    assert result[0] == 1 and result[1] == "OTSInternalServerError"
    assert SECRET_DETAIL not in result[2] and "request id" in result[2]
    request_id = result[2].rsplit(" ", 1)[-1].rstrip(".")
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and SECRET_DETAIL in str(logged[0].exc_info[1])


# -- the event loop and row locks -------------------------------------------------------------


@pytest.fixture
def locks_held(monkeypatch, served):
    """BatchWriteRow, on the pool, holds every row-lock stripe of the store until the test
    lets it go (as a batch of 200 rows holds ~140 of 256 while RocksDB writes them)."""
    holding, release = threading.Event(), threading.Event()
    handler = service.HANDLERS["BatchWriteRow"]
    row_locks = served.db._ctx.row_locks

    def holds_locks(db, message):
        held = list(row_locks.stripes)
        for lock in held:
            lock.acquire()
        holding.set()
        try:
            release.wait(20)
        finally:
            for lock in reversed(held):
                lock.release()
        return handler(db, message)

    monkeypatch.setitem(service.HANDLERS, "BatchWriteRow", holds_locks)
    yield holding, release
    release.set()


@pytest.mark.parametrize("writer", ["tablestore", "native"])
def test_the_loop_never_waits_on_row_locks_a_pool_thread_holds(served, locks_held,
                                                               writer) -> None:
    """While a batch on the pool holds row locks, a PutRow on another connection must not
    stall the loop: a GetRow on a third connection is answered at once."""
    holding, release = locks_held
    batcher, batch_reader = dial(served)
    writer_sock, writer_reader = dial(served)
    reader_sock, reader_reader = dial(served, timeout=5)
    try:
        batcher.sendall(request("BatchWriteRow", batch_write(["x", "y"])))
        assert holding.wait(10), "the batch never took its locks"
        if writer == "tablestore":
            writer_sock.sendall(request("PutRow", put_row("w", 7)))
        else:
            writer_sock.sendall(upgrade_request())
            assert writer_reader.response()[0] == 101
            writer_sock.sendall(call_frame(native.PUT_ROW, "t", ("w",), {"v": 7}, None, None))
        time.sleep(0.2)  # the write has reached the server (and, before the fix, the loop)
        reader_sock.sendall(request("GetRow", get_row("a")))
        status, _, _ = reader_reader.response()  # TimeoutError if the loop is stalled
        assert status == 200 and not release.is_set()  # answered while the locks are held
        release.set()
        assert batch_reader.response()[0] == 200
        if writer == "tablestore":
            assert writer_reader.response()[0] == 200
        else:
            assert answer(writer_reader)[0] == 0
    finally:
        release.set()
        for sock in (batcher, writer_sock, reader_sock):
            sock.close()
    table = served.db.table("t")
    assert table.get_row(("w",))["v"] == 7 and table.get_row(("x",))["v"] == 2


# -- read-only access keys ----------------------------------------------------------------------


@pytest.fixture
def with_reader(store, tmp_path):
    config = tmp_path / "keys.toml"
    config.write_text(f'[access_keys]\n{serving.ACCESS_KEY_ID} = "{serving.ACCESS_KEY_SECRET}"\n'
                      f'{READER_ID} = {{ secret = "{READER_SECRET}", read_only = true }}\n')
    keys, generated = load_keys(config, environ={})
    assert not generated and keys.read_only == {READER_ID}
    server = start(store, keys)
    yield server
    server.drain(5)


WRITES = {
    "PutRow": lambda: put_row("r"),
    "BatchWriteRow": lambda: batch_write(["r"]),
    "DeleteTable": lambda: pb.DeleteTableRequest(table_name="t").SerializeToString(),
    "CreateTable": lambda: b"",
    "StartLocalTransaction": lambda: b"",
    "CreateSearchIndex": lambda: b"",
    "DeleteSearchIndex": lambda: b"",
}


@pytest.mark.parametrize("api", sorted(WRITES))
def test_a_read_only_key_may_not_write_over_tablestore(with_reader, api) -> None:
    status, err = serving.post(with_reader.port, api, WRITES[api](),
                               {"x-ots-accesskeyid": READER_ID}, secret=READER_SECRET)
    assert status == 403 and err.code == "OTSNoPermissionAccess"
    assert READER_ID in err.message and api in err.message
    assert with_reader.db.list_tables() == ["t"]
    assert with_reader.db.table("t").get_row(("r",)) is None


def test_a_read_only_key_reads_and_the_sdk_sees_403(with_reader) -> None:
    from tablestore import OTSClient, OTSServiceError, Row

    client = OTSClient(with_reader.endpoint, READER_ID, READER_SECRET, serving.INSTANCE,
                       logger_name="widetable-tests-readonly")
    assert client.list_table() == ("t",)
    _, row, _ = client.get_row("t", [("k", "a")], max_version=1)
    assert row.attribute_columns[0][:2] == ("v", 1)
    with pytest.raises(OTSServiceError) as err:
        client.put_row("t", Row([("k", "z")], [("v", 1)]))
    assert err.value.get_http_status() == 403
    assert err.value.get_error_code() == "OTSNoPermissionAccess"
    assert with_reader.db.table("t").get_row(("z",)) is None


def test_a_read_only_key_may_not_write_over_the_native_protocol(with_reader) -> None:
    db = widetable.connect(with_reader.endpoint, access_key_id=READER_ID,
                           access_key_secret=READER_SECRET, protocol="native")
    try:
        t = db.table("t")
        assert t.get_row(("a",))["v"] == 1  # reads work
        assert db.protocol == "native"
        for write in (lambda: t.put_row(("n",), {"v": 1}),
                      lambda: t.update_row(("a",), put={"v": 9}),
                      lambda: t.delete_row(("a",)),
                      lambda: db.batch_write_row([("t", "put", ("n",), {"v": 1})]),
                      lambda: db.create_table("u", [("k", "STRING")])):
            with pytest.raises(widetable.WidetableError) as err:
                result = write()
                if isinstance(result, list):  # a batch answers per row
                    raise result[0].error
            assert err.value.code == "OTSNoPermissionAccess"
    finally:
        db.close()
    assert with_reader.db.table("t").get_row(("a",))["v"] == 1
    assert with_reader.db.table("t").get_row(("n",)) is None
    assert with_reader.db.list_tables() == ["t"]


def test_every_write_api_is_refused_to_read_only_keys() -> None:
    """Each API that writes rows or changes the catalog is in WRITES; a new one must be
    sorted into reads or writes (a read-only key must not slip through a new DDL)."""
    reads = {"ListTable", "DescribeTable", "ComputeSplitPointsBySize", "GetRow", "GetRange",
             "BatchGetRow", "AbortTransaction", "ListStream", "DescribeStream",
             "GetShardIterator", "GetStreamRecord", "DescribeSearchIndex", "ListSearchIndex",
             "Search", "ComputeSplits", "ParallelScan"}
    # checked per statement (SQLQuery: SELECT reads, mapping DDL and COPY are refused)
    per_statement = {"SQLQuery"}
    assert set(service.HANDLERS) == reads | service.WRITES | per_statement
    assert service.PER_STATEMENT == per_statement
    assert not reads & service.WRITES and not per_statement & (reads | service.WRITES)


def test_every_native_write_is_refused_to_read_only_keys() -> None:
    reads = {native.GET_ROW, native.GET_RANGE, native.BATCH_GET_ROW, native.LIST_STREAM,
             native.DESCRIBE_STREAM, native.GET_SHARD_ITERATOR, native.GET_STREAM_RECORD,
             native.DESCRIBE_TABLE}
    assert set(native_service.CALLS) == reads | native_service.WRITES
    assert not reads & native_service.WRITES
    assert set(native_service.KINDS) == set(native_service.CALLS)  # each has a kind


def test_the_writer_key_still_writes(with_reader) -> None:
    status, err = serving.post(with_reader.port, "PutRow", put_row("ok"))
    assert status == 200, err
    assert with_reader.db.table("t").get_row(("ok",))["v"] == 1


@pytest.mark.parametrize("entry", ['7', '{ secret = "" }', '{ secret = "s", read_only = "yes" }',
                                   '{ secret = "s", admin = true }'])
def test_malformed_key_entries_are_refused(tmp_path, entry) -> None:
    config = tmp_path / "keys.toml"
    config.write_text(f"[access_keys]\nk = {entry}\n")
    with pytest.raises(ValueError, match="access key 'k'"):
        load_keys(config, environ={})


# -- health ------------------------------------------------------------------------------------


def test_health_answers_without_a_signature(served) -> None:
    import json

    sock, reader = dial(served)
    with sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = reader.response()
    assert status == 200 and headers["content-type"] == "application/json"
    report = json.loads(body)
    assert report["status"] == "ok" and report["connections"] >= 1


def test_health_reports_the_background_loops(served) -> None:
    import json

    sock, reader = dial(served)
    with sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = reader.response()
    assert status == 200
    loops = {b["name"]: b for b in json.loads(body)["background"]}
    assert set(loops) == {"purge", "maintenance", "indexer"}
    for b in loops.values():
        assert b["ok"] is True and b["errors"] == 0 and b["error_type"] is None
