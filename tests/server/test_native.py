"""widetable's own protocol (server/native.py, client/native.py) on a real loopback socket:
the signed upgrade, frames in order, malformed and oversized frames, idle connections,
concurrent clients, and the client's fall-back to Tablestore's protocol."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import msgpack
import msgspec
import pytest

import widetable
from widetable import INF_MAX, INF_MIN
from widetable.errors import NotSupported, ParameterInvalid
from widetable.wire import native
from widetable.wire.proto import pb

from . import serving
from .test_http import IDLE, LIST, Reader, request, start


def _serve(tmp_path, **options):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    db.create_table("t", [("k", "STRING"), ("n", "INTEGER")])
    return start(db, **options)


@pytest.fixture
def served(tmp_path):
    """The default idle timeout (60 s): a pause of a loaded machine closes nothing."""
    server = _serve(tmp_path)
    yield server
    server.drain(5)


@pytest.fixture
def served_idle(tmp_path):
    """A server that closes connections idle for IDLE seconds."""
    server = _serve(tmp_path, idle_timeout=IDLE)
    yield server
    server.drain(5)


def connect(server, **options):
    return widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                             access_key_secret=serving.ACCESS_KEY_SECRET, **options)


def upgrade_request(headers: dict | None = None, sign: bool = True, secret: str | None = None,
                    upgrade: bool = True) -> bytes:
    signed = serving.signed_headers(native.API, b"", headers, sign,
                                    secret or serving.ACCESS_KEY_SECRET)
    lines = "".join(f"{k}: {v}\r\n" for k, v in signed.items())
    extra = f"Upgrade: {native.UPGRADE}\r\nConnection: Upgrade\r\n" if upgrade else ""
    return (f"POST /{native.API} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n{lines}{extra}"
            "\r\n").encode("latin-1")


def upgraded(server) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    reader = Reader(sock)
    sock.sendall(upgrade_request())
    status, headers, _ = reader.response()
    assert status == 101, status
    assert headers["upgrade"] == native.UPGRADE
    assert headers["authorization"].startswith(f"OTS {serving.ACCESS_KEY_ID}:")
    return sock, reader


def call_frame(*request: object) -> bytes:
    data = msgpack.packb([native.wire_bound(a) for a in request])
    return struct.pack("<I", len(data)) + data


def answer(reader: Reader) -> list:
    while len(reader.buffer) < 4:
        if not reader._fill():
            raise ConnectionError("closed before an answer")
    size = struct.unpack_from("<I", reader.buffer)[0]
    while len(reader.buffer) < 4 + size:
        if not reader._fill():
            raise ConnectionError("closed inside an answer")
    data, reader.buffer = reader.buffer[4:4 + size], reader.buffer[4 + size:]
    return native.read_answer(data)


def rows_of(server) -> list:
    return [(r.primary_key, r.columns) for r in server.db.table("t").scan()]


# -- the upgrade ------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "status", "code"), [
    ("unsigned", 403, "OTSAuthFailed"),
    ("wrong secret", 403, "OTSAuthFailed"),
    ("no Upgrade header", 400, "OTSParameterInvalid"),
    ("another version", 400, "OTSUnsupportOperation"),
])
def test_the_upgrade_is_checked_like_any_request(served, kind, status, code) -> None:
    raw = {"unsigned": upgrade_request(sign=False),
           "wrong secret": upgrade_request(secret="not-the-secret"),
           "no Upgrade header": upgrade_request(upgrade=False),
           "another version": upgrade_request(upgrade=False,
                                              headers={"Upgrade": "widetable-native/1",
                                                       "Connection": "Upgrade"})}[kind]
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        reader = Reader(sock)
        sock.sendall(raw)
        got, _, body = reader.response()
        assert (got, pb.Error.FromString(body).code) == (status, code)
        if status == 400:  # the caller is known: the connection stays HTTP, keep-alive
            sock.sendall(request("ListTable", LIST))
            assert reader.response()[0] == 200


def test_a_client_with_the_wrong_secret_gets_auth_failed(served) -> None:
    db = widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret="wrong", protocol="native")
    with pytest.raises(widetable.WidetableError) as err:
        db.batch_get_row([("t", ("a", 1))])  # no describe first: straight to the upgrade
    assert err.value.code == "OTSAuthFailed"
    db.close()


def test_pipelined_frames_are_answered_in_order(served) -> None:
    sock, reader = upgraded(served)
    with sock:
        sock.sendall(
            call_frame(native.PUT_ROW, "t", ("a", 1), {"v": 1, "b": b"\x00\xff"}, None, None)
            + call_frame(native.GET_ROW, "t", ("a", 1), None, None, None, None, None)
            + call_frame(native.GET_ROW, "t", ("zz", 9), None, None, None, None, None)
            + call_frame(native.GET_RANGE, "t", (INF_MIN, INF_MIN), (INF_MAX, INF_MAX),
                         "forward", 10, None, None, None, None, None)
            + call_frame(native.GET_ROW, "t", ("a", 1), ["v"], None, None, None, None))
        assert answer(reader) == [0, [["a", 1], None]]
        status, row = answer(reader)  # a read without options: the stored row, as it is
        assert status == 0 and row[:3] == [1, ["a", 1], {"v": 1, "b": b"\x00\xff"}]
        assert answer(reader) == [0, None]
        status, (rows, nxt) = answer(reader)
        assert status == 0 and [r[1] for r in rows] == [["a", 1]] and nxt is None
        status, row = answer(reader)  # with options: [0, pk, columns, timestamps, versions]
        assert status == 0 and row[:3] == [0, ["a", 1], {"v": 1}] and type(row[3]) is int


def test_errors_come_back_with_their_codes(served) -> None:
    sock, reader = upgraded(served)
    with sock:
        sock.sendall(call_frame(native.GET_ROW, "missing", ("a", 1), None, None, None, None, None))
        assert answer(reader)[:2] == [1, "OTSObjectNotExist"]
        sock.sendall(call_frame(native.PUT_ROW, "t", ("a",), {"v": 1}, None, None))
        assert answer(reader)[:2] == [1, "OTSInvalidPK"]  # a key of one column of two
        assert rows_of(served) == []


MALFORMED = [
    b"",  # an empty frame
    b"\xc1",  # a byte MessagePack never uses
    b"\x93\x01",  # an array that ends early
    msgpack.packb({"op": 1}),  # not an array
    msgpack.packb([]),
    msgpack.packb(["GetRow"]),  # the op is not a number
    msgpack.packb([99, "t"]),  # no such op
    msgpack.packb([native.GET_ROW, "t"]),  # too few arguments
    msgpack.packb([native.PUT_ROW, "t", ["a", 1], {}, None, None, "extra"]),
    msgpack.packb([native.GET_ROW, "t", msgpack.ExtType(7, b""), None, None, None, None, None]),
    msgpack.packb([native.PUT_ROW, "t", ["a", 1], {"v": 1}, "not protobuf bytes", None]),
    msgpack.packb([native.PUT_ROW, "t", ["a", 1], {"v": 1}, b"\xff\xff\xff", None]),
    msgpack.packb([native.GET_ROW, "t", ["a", 1], None, None, None, b"\x08\x63", None]),
    msgpack.packb([native.PUT_ROW, 5, ["a", 1], {"v": 1}, None, None]),
    msgpack.packb([native.PUT_ROW, "t", ["a", 1], {"v": [1, 2]}, None, None]),
    msgpack.packb([native.BATCH_WRITE_ROW, "not a list", None]),
    msgpack.packb([native.BATCH_WRITE_ROW, [["t", "put"]], None]),
    msgpack.packb([native.BATCH_GET_ROW, [["t", ["a", 1], {"filter": "x"}]]]),
]


REFUSALS = {"OTSParameterInvalid", "OTSInvalidPK", "OTSObjectNotExist"}  # never a 500


def test_malformed_frames_are_answered_and_write_nothing(served) -> None:
    sock, reader = upgraded(served)
    rng = random.Random(7)
    noise = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(200)]
    with sock:
        for data in MALFORMED + noise:
            sock.sendall(struct.pack("<I", len(data)) + data)
            got = answer(reader)
            assert got[0] == 1 and got[1] in REFUSALS, (data, got)
        assert rows_of(served) == []
        sock.sendall(call_frame(native.PUT_ROW, "t", ("ok", 1), {"v": 1}, None, None))
        assert answer(reader)[0] == 0  # the connection still serves
    assert rows_of(served) == [(("ok", 1), {"v": 1})]


def test_an_oversized_frame_is_refused_and_the_connection_closed(served) -> None:
    sock, reader = upgraded(served)
    with sock:
        sock.sendall(struct.pack("<I", native.MAX_FRAME + 1) + b"\x90")
        got = answer(reader)
        assert got[:2] == [1, "OTSParameterInvalid"] and "limit" in got[2]
        assert reader.closed()


# -- widetable.connect over it -----------------------------------------------------------


def test_connect_uses_the_native_protocol_and_reconnects_after_idle_close(served_idle) -> None:
    db = connect(served_idle)
    t = db.table("t")
    t.put_row(("a", 1), {"v": 1})
    assert db.protocol == "native"
    time.sleep(IDLE * 3)  # the server closes the idle connection
    assert t.get_row(("a", 1))["v"] == 1  # a fresh connection, transparently
    assert db.protocol == "native" and len(db._native._conns) == 1  # the stale one let go
    db.close()


def test_rows_decoded_from_stored_bytes_are_plain_rows_without_history(served) -> None:
    """A read without options returns the stored row's bytes; the client decodes them
    straight into Rows and drops the older versions such a read does not return."""
    import pickle

    served.db.create_table("mv", [("k", "STRING")], max_versions=3)
    db = connect(served)
    t = db.table("mv")
    for v in (1, 2, 3):
        t.update_row(("a",), put={"v": v})
        time.sleep(0.002)  # a new timestamp, a new version
    t.put_row(("b",), {"v": 9})
    row = t.get_row(("a",))
    page = t.get_range((INF_MIN,), (INF_MAX,)).rows
    for r in (row, page[0]):
        assert type(r) is widetable.Row and repr(r) == "Row(('a',), {'v': 3})"
        assert msgspec.json.encode(r) == msgspec.json.encode(served.db.table("mv").get_row(("a",)))
        assert [v for v, _ in r.versions("v")] == [3] and r._versions is None
        assert pickle.loads(pickle.dumps(r)) == r
    assert [r.primary_key for r in page] == [("a",), ("b",)]
    full = t.get_row(("a",), max_versions=3)  # a row the server builds: every version
    assert [v for v, _ in full.versions("v")] == [3, 2, 1]
    assert [v for v, _ in t.get_range(("a",), ("b",), max_versions=2).rows[0].versions("v")] == [3, 2]
    assert t.get_row(("zz",)) is None and t.get_range(("c",), (INF_MAX,)).rows == []
    assert db.protocol == "native"
    db.close()


def test_answers_larger_than_the_receive_buffer_arrive_whole(served) -> None:
    """Answers up to the connection's receive buffer are read into it and decoded there;
    larger ones (a page of big rows) take their own buffer. Both kinds, interleaved."""
    from widetable.client import native as client_native

    db = connect(served)
    t = db.table("t")
    blob = bytes(range(256)) * 400  # 100 KB a row
    for n in range(12):
        t.put_row(("big", n), {"v": blob + bytes([n]), "i": n})
    for _ in range(3):
        page = t.get_range(("big", INF_MIN), ("big", INF_MAX))
        assert sum(len(r["v"]) for r in page.rows) > client_native.RECV_KEEP
        assert [r["i"] for r in page.rows] == list(range(12))
        assert all(r["v"] == blob + bytes([r["i"]]) for r in page.rows)
        assert t.get_row(("big", 3))["v"][-1] == 3  # a small answer, into the buffer again
        assert len(t.get_range(("big", 2), ("big", 5)).rows) == 3  # 300 KB: the buffer grows
        assert len(t.get_range(("big", 2), ("big", 3)).rows) == 1
    assert db.protocol == "native"
    db.close()


def test_values_msgpack_cannot_carry_take_the_tablestore_path(served) -> None:
    db = connect(served)
    t = db.table("t")
    with pytest.raises(ParameterInvalid, match="set"):
        t.put_row(("a", 1), {"v": {1, 2}})
    with pytest.raises(ParameterInvalid):
        t.put_row(("a", 1), {"v": 2**70})
    with pytest.raises(ParameterInvalid):
        t.get_row(("a", 1), filter="not a filter")
    assert db.protocol == "native" and rows_of(served) == []
    db.close()


def test_concurrent_increments_over_native_connections(served) -> None:
    db = connect(served)
    t = db.table("t")
    t.put_row(("c", 0), {"count": 0})

    done, checked = threading.Barrier(9), threading.Barrier(9)

    def work() -> None:
        for _ in range(50):
            t.update_row(("c", 0), increment={"count": 1})
        done.wait()
        checked.wait()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for th in threads:
        th.start()
    done.wait()
    assert len(db._native._conns) == 9  # a connection per thread, and the main thread's
    checked.wait()
    for th in threads:
        th.join()
    assert t.get_row(("c", 0))["count"] == 400
    db.close()


class RefusingProxy:
    """A loopback TCP proxy to a server that answers the upgrade as a server without
    widetable's protocol does (400 OTSUnsupportOperation) and passes everything else on."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        first = client.recv(65536)
        if f"POST /{native.API} ".encode() in first:
            body = pb.Error(code="OTSUnsupportOperation", message="unknown API").SerializeToString()
            client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n" % len(body) + body)
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.target))
        upstream.sendall(first)

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    def close(self) -> None:
        self.sock.close()


def test_auto_falls_back_to_tablestore_when_the_upgrade_is_refused(served) -> None:
    proxy = RefusingProxy(served.port)
    try:
        endpoint = f"http://127.0.0.1:{proxy.port}"
        db = widetable.connect(endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
        t = db.table("t")
        t.put_row(("a", 1), {"v": 1})
        assert db.protocol == "tablestore"
        assert t.get_row(("a", 1))["v"] == 1
        db.close()
        strict = widetable.connect(endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET, protocol="native")
        with pytest.raises(NotSupported):
            strict.table("t").get_row(("a", 1))
        strict.close()
    finally:
        proxy.close()


def test_frames_arriving_together_are_read_one_by_one() -> None:
    """Bytes of a later frame received with an answer are kept for the next read, which
    then starts from them (a real socket pair; the frames as the server writes them)."""
    from widetable.client import native as client_native
    from widetable.client.transport import _Connection

    here, there = socket.socketpair()
    with here, there:
        conn = _Connection("unused", None, 5.0, None, "localhost")
        conn.sock = here
        answers = [native.frame((0, [i, b"x" * n])) for i, n in ((1, 10), (2, 100_000), (3, 5))]
        there.sendall(answers[0] + answers[1][:7])  # the second frame's head comes along
        assert client_native._read_frame(conn) == [0, [1, b"x" * 10]]
        there.sendall(answers[1][7:] + answers[2])
        assert client_native._read_frame(conn) == [0, [2, b"x" * 100_000]]
        assert client_native._read_frame(conn) == [0, [3, b"x" * 5]]


@pytest.mark.parametrize("upgrade", ["widetable-native/1", "something-else"])
def test_a_client_of_another_release_falls_back_to_tablestore(served, monkeypatch,
                                                              upgrade) -> None:
    """A client asking for another version of the protocol (the server answers
    OTSUnsupportOperation) or one an earlier server did not know (OTSParameterInvalid)
    goes on over Tablestore's protocol."""
    from widetable.client import native as client_native

    monkeypatch.setattr(client_native, "_UPGRADE_HEADERS",
                        f"Upgrade: {upgrade}\r\nConnection: Upgrade\r\n".encode())
    db = connect(served)
    t = db.table("t")
    t.put_row(("a", 1), {"v": 1})
    assert t.get_row(("a", 1))["v"] == 1 and db.protocol == "tablestore"
    db.close()


def test_a_thread_s_connection_is_closed_when_the_thread_ends(served) -> None:
    import gc

    db = connect(served)
    t = db.table("t")
    t.put_row(("a", 1), {"v": 1})
    threads = [threading.Thread(target=t.get_row, args=(("a", 1),)) for _ in range(40)]
    for th in threads:
        th.start()
        th.join()
    gc.collect()
    assert len(db._native._conns) == 1  # this thread's only: the others' went with them
    assert t.get_row(("a", 1))["v"] == 1
    db.close()


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ParameterInvalid, match="protocol"):
        widetable.connect("http://127.0.0.1:1", access_key_id="a", access_key_secret="b",
                          protocol="grpc")


def test_threads_packing_at_once_send_whole_frames(served) -> None:
    """One Packer serves every thread: ranges with infinite bounds, values it refuses
    (a set, sent over Tablestore's protocol instead) and plain rows, from 8 threads
    at once, all come back right."""
    db = connect(served)
    t = db.table("t")
    for i in range(20):
        t.put_row(("r", i), {"v": i})

    def work(n: int) -> None:
        for i in range(60):
            if i % 3 == 0:
                assert len(t.get_range(("r", INF_MIN), ("r", INF_MAX)).rows) == 20
            elif i % 3 == 1:
                with pytest.raises(ParameterInvalid):
                    t.put_row(("x", n), {"v": {1, 2}})
            else:
                assert t.get_row(("r", i % 20))["v"] == i % 20

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))  # a failure in any thread raises here
    assert db.protocol == "native"
    db.close()


def test_small_ranges_and_single_rows_run_on_the_loop(served) -> None:
    """The pool's handoff costs a thread wake-up: only calls that may wait or run long go
    there, by the Tablestore service's rules."""
    from widetable.server.core.dispatch import INLINE_BODY
    from widetable.server.native.service import check, pooled

    def req(*args):
        return check(msgpack.packb([native.wire_bound(a) for a in args]))

    rng = (native.GET_RANGE, "t", ("a", INF_MIN), ("a", INF_MAX), "forward")
    assert not pooled(req(*rng, 100, None, None, None, None, None), 100, False)
    assert pooled(req(*rng, 101, None, None, None, None, None), 100, False)
    assert pooled(req(*rng, None, None, None, None, None, None), 100, False)
    assert pooled(req(*rng, 10, None, None, None, None, "txn-1"), 100, False)
    get = req(native.GET_ROW, "t", ("a", 1), None, None, None, None, None)
    assert not pooled(get, 100, False) and not pooled(get, 100, True)  # reads never wait
    put = req(native.PUT_ROW, "t", ("a", 1), {"v": 1}, None, None)
    assert not pooled(put, 100, False) and pooled(put, 100, True)  # a transaction is open
    assert pooled(put, INLINE_BODY + 1, False)
    assert pooled(req(native.BATCH_GET_ROW, [["t", ["a", 1]]]), 100, False)
