"""Edges of ``widetable serve``'s framing on a real loopback socket: an upgrade that
arrives while reading is paused, repeated Content-Length headers, a half-close behind
pipelined requests, native batch frames whose items are not arrays, and
``compute_split_points_by_size`` over the wire against the embedded store.

The server runs in this process, so a test can hold a request on the worker pool
(a gated handler) and look at the connection's state while it waits."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time

import pytest

import widetable
from widetable import INF_MAX, INF_MIN
from widetable.errors import ParameterInvalid
from widetable.server.tablestore import service
from widetable.wire import native
from widetable.wire import plainbuffer as pbuf
from widetable.wire.proto import pb

from . import serving
from .test_http import LIST, Reader, request, start
from .test_native import answer, call_frame, upgrade_request


@pytest.fixture
def served(tmp_path):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    db.create_table("t", [("k", "STRING")]).put_row(("a",), {"v": 1})
    server = start(db)
    yield server
    server.drain(5)


@pytest.fixture
def gate(monkeypatch):
    """BatchGetRow waits on the pool until the test opens the gate (``gate.set()``)."""
    opened = threading.Event()
    handler = service.HANDLERS["BatchGetRow"]

    def gated(db, message):
        opened.wait(10)
        return handler(db, message)

    monkeypatch.setitem(service.HANDLERS, "BatchGetRow", gated)
    yield opened
    opened.set()


def batch_get() -> bytes:
    """A signed BatchGetRow of row ("a",) of t: it runs on the worker pool."""
    msg = pb.BatchGetRowRequest()
    msg.tables.add(table_name="t", max_versions=1).primary_key.append(
        pbuf.encode_primary_key([("k", "a")]))
    return request("BatchGetRow", msg.SerializeToString())


def wait_for(test, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def the_connection(server):
    wait_for(lambda: len(server._connections) == 1, "the connection")
    return next(iter(server._connections))


def count_answers(reader: Reader, n: int) -> list:
    """Read ``n`` answer frames; returns the last one (parsed with an offset, not by
    slicing the buffer per frame, so that 20,000 of them read quickly)."""
    pos = count = 0
    last = None
    buffer = bytearray(reader.buffer)
    while count < n:
        while len(buffer) - pos >= 4:
            size = struct.unpack_from("<I", buffer, pos)[0]
            if len(buffer) - pos < 4 + size:
                break
            last = bytes(buffer[pos + 4:pos + 4 + size])
            pos += 4 + size
            count += 1
            if count == n:
                break
        if count < n:
            data = reader.sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"closed after {count} of {n} answers")
            buffer += data
    reader.buffer = bytes(buffer[pos:])
    return native.read_answer(last)


# -- the upgrade behind a paused read -------------------------------------------------


def test_native_frames_keep_being_read_after_an_upgrade_while_reading_was_paused(
        served, gate) -> None:
    """More than READ_AHEAD bytes pile up behind a request on the pool, so the HTTP side
    pauses reading; the upgrade then hands the connection to the native side, which
    must take the pause over and resume reading, or the connection hangs for good."""
    get = call_frame(native.GET_ROW, "t", ("a",), None, None, None, None, None)
    n = 20000  # 320 KB of frames: over READ_AHEAD (256 KiB)
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(batch_get() + upgrade_request() + get * n)
        conn = the_connection(served)
        wait_for(lambda: conn._read_paused, "reading to pause behind the pooled request")
        gate.set()
        assert reader.response()[0] == 200
        assert reader.response()[0] == 101
        sock.settimeout(5)
        status, row = count_answers(reader, n)
        assert status == 0 and row[1:3] == [["a"], {"v": 1}]
        sock.sendall(get)  # and the connection still reads
        status, row = answer(reader)
        assert status == 0 and row[1:3] == [["a"], {"v": 1}]


# -- Content-Length ---------------------------------------------------------------------


def responses_until_closed(sock: socket.socket) -> list[bytes]:
    sock.settimeout(5)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return [part.split(b"\r\n", 1)[0] for part in data.split(b"HTTP/1.1 ")[1:]]


def test_conflicting_content_lengths_are_refused_and_the_body_never_runs(served) -> None:
    inner = request("ListTable", LIST)
    outer = request("ListTable", b"").replace(
        b"Content-Length: 0\r\n", f"Content-Length: 0\r\nContent-Length: {len(inner)}\r\n".encode())
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(outer + inner)
        status, headers, body = reader.response()
        error = pb.Error.FromString(body)
        assert (status, error.code) == (400, "OTSParameterInvalid")
        assert "Content-Length" in error.message and repr(str(len(inner))) in error.message
        assert headers["connection"] == "close"
        assert responses_until_closed(sock) == []  # the smuggled request was not run


def test_repeated_equal_content_lengths_are_one(served) -> None:
    raw = request("ListTable", LIST).replace(
        b"Content-Length: ", f"Content-Length: {len(LIST)}\r\nContent-Length: ".encode(), 1)
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(raw + request("ListTable", LIST))
        assert [reader.response()[0] for _ in range(2)] == [200, 200]


def test_transfer_encoding_with_content_length_is_refused(served) -> None:
    raw = request("ListTable", LIST, "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n")
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(raw)
        assert responses_until_closed(sock) == [b"400 Bad Request"]


# -- half-close ---------------------------------------------------------------------------


def test_a_half_close_behind_pipelined_requests_answers_them_all(served, gate) -> None:
    """The first request waits on the pool when the client's FIN arrives; the two
    whole requests buffered behind it are still answered, then the connection closes."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(batch_get() + request("ListTable", LIST) + request("ListTable", LIST))
        sock.shutdown(socket.SHUT_WR)
        conn = the_connection(served)
        wait_for(lambda: conn._eof, "the server to see the half-close")
        gate.set()
        assert responses_until_closed(sock) == [b"200 OK"] * 3


def test_a_half_close_drops_only_a_partial_request(served, gate) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(batch_get() + request("ListTable", LIST) + request("ListTable", LIST)[:50])
        sock.shutdown(socket.SHUT_WR)
        conn = the_connection(served)
        wait_for(lambda: conn._eof, "the server to see the half-close")
        gate.set()
        assert responses_until_closed(sock) == [b"200 OK"] * 2


def test_a_half_close_behind_an_upgrade_answers_its_frames_then_closes(served, gate) -> None:
    """The FIN arrives while a request waits on the pool, with an upgrade and two native
    frames behind it: each is answered, and the connection then closes at once, not when
    the idle sweep finds it a minute later."""
    get = call_frame(native.GET_ROW, "t", ("a",), None, None, None, None, None)
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(batch_get() + upgrade_request() + get * 2)
        sock.shutdown(socket.SHUT_WR)
        conn = the_connection(served)
        wait_for(lambda: conn._eof, "the server to see the half-close")
        gate.set()
        assert reader.response()[0] == 200
        assert reader.response()[0] == 101
        for _ in range(2):
            status, row = answer(reader)
            assert status == 0 and row[1:3] == [["a"], {"v": 1}]
        sock.settimeout(5)  # far below the idle timeout (60 s)
        assert reader.buffer == b"" and sock.recv(1) == b""


# -- native batch frames whose items are not arrays ---------------------------------------


@pytest.mark.parametrize(("frame", "named"), [
    ((native.BATCH_GET_ROW, None), "batch_get_row takes 1-100 rows, got None"),
    ((native.BATCH_GET_ROW, 5), "batch_get_row takes 1-100 rows, got 5"),
    ((native.BATCH_WRITE_ROW, 1.5, None), "batch_write_row takes 1-200 rows, got 1.5"),
    ((native.BATCH_WRITE_ROW, None, "some-transaction"), "batch_write_row takes 1-200 rows, got None"),
])
def test_native_batches_of_no_array_are_parameter_invalid(served, caplog, frame, named) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(upgrade_request())
        assert reader.response()[0] == 101
        with caplog.at_level(logging.ERROR, logger="widetable.server"):
            sock.sendall(call_frame(*frame))
            status, code, message = answer(reader)
        assert (status, code) == (1, "OTSParameterInvalid")
        assert named in message
        assert not [r for r in caplog.records if r.name.startswith("widetable.server")]
        sock.sendall(call_frame(native.GET_ROW, "t", ("a",), None, None, None, None, None))
        assert answer(reader)[0] == 0  # and the connection goes on


# -- compute_split_points_by_size -----------------------------------------------------


def remote(server, protocol: str = "tablestore"):
    return widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                             access_key_secret=serving.ACCESS_KEY_SECRET, protocol=protocol)


def test_split_points_over_the_wire_are_the_embedded_ranges(in_process) -> None:
    db, server = in_process
    client = remote(server)
    try:
        db.create_table("one", [("k", "STRING"), ("n", "INTEGER")]).put_row(("a", 1), {"v": 1})
        got = client.compute_split_points_by_size("one", 64)
        want = db.compute_split_points_by_size("one", 64)
        assert [(r.start, r.end, r.location) for r in got] == [
            (r.start, r.end, r.location) for r in want]
        assert got[0].start == (INF_MIN, INF_MIN) and got[0].end == (INF_MAX, INF_MAX)
        assert [r.size for r in got] == [None]  # not carried by Tablestore's answer

        t = db.create_table("many", [("k", "STRING"), ("n", "INTEGER")], split_points=["g", "p"])
        db.batch_write_row([("many", "put", (f"{chr(97 + i % 26)}{i:03d}", i), {"v": "x" * 50})
                            for i in range(200)])
        db.maintain_partitions("many")
        for size in (1, 2000, 10**30):
            want = db.compute_split_points_by_size("many", size)
            got = client.compute_split_points_by_size("many", size)
            assert type(got[0]) is type(want[0])
            assert [(r.start, r.end, r.location) for r in got] == [
                (r.start, r.end, r.location) for r in want]
        ranges = client.compute_split_points_by_size("many", 2000)
        assert len(ranges) > 1
        scanned = [row.primary_key for r in ranges for row in t.scan(r.start, r.end)]
        assert scanned == sorted(row.primary_key for row in t.scan())
    finally:
        client.close()


@pytest.mark.parametrize("size", [0, -1, 1.5, True, None, "64"])
def test_split_size_is_checked_as_the_embedded_store_does(in_process, size) -> None:
    db, server = in_process
    db.create_table("one", [("k", "STRING")]).put_row(("a",), {"v": 1})
    client = remote(server)
    try:
        with pytest.raises(ParameterInvalid) as embedded:
            db.compute_split_points_by_size("one", size)
        with pytest.raises(ParameterInvalid) as wire:
            client.compute_split_points_by_size("one", size)
        assert str(wire.value) == str(embedded.value)
    finally:
        client.close()
