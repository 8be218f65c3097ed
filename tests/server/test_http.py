"""The HTTP layer of ``widetable serve`` on a real loopback socket: keep-alive, pipelining,
fragments, idle timeout, framing errors, half-close, drain, TLS and the default bind.

The server runs in this process (``WidetableServer`` + ``serve_forever`` on a thread) so a
test can give it a short idle timeout."""

from __future__ import annotations

import inspect
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest

import widetable
from widetable.server import KeyStore, WidetableServer
from widetable.wire.proto import pb

from . import serving

IDLE = 0.5


def start(db, **options) -> WidetableServer:
    server = WidetableServer(db, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}),
                             port=0, **options)
    threading.Thread(target=server.serve_forever, name="test-serve", daemon=True).start()
    return server


@pytest.fixture
def served(tmp_path):
    """A server with the default idle timeout (60 s): a loaded machine that pauses a test
    for a second must not close its half-sent request as idle."""
    server = start(widetable.open(str(tmp_path / "d"), purge_interval=None))
    yield server
    server.drain(5)


@pytest.fixture
def served_idle(tmp_path):
    """A server that closes connections idle for IDLE seconds."""
    server = start(widetable.open(str(tmp_path / "d"), purge_interval=None), idle_timeout=IDLE)
    yield server
    server.drain(5)


def request(api: str, body: bytes = b"", extra: str = "") -> bytes:
    """A signed POST /<api>, as bytes."""
    headers = serving.signed_headers(api, body)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head = f"POST /{api} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{lines}{extra}\r\n"
    return head.encode("latin-1") + body


LIST = pb.ListTableRequest().SerializeToString()
DESCRIBE_MISSING = pb.DescribeTableRequest(table_name="missing").SerializeToString()


class Reader:
    """Reads whole responses off one socket, keeping bytes that belong to the next."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError("closed before a response")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            if not self._fill():
                raise ConnectionError("closed inside a body")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self, wait: float = 5.0) -> bool:
        """Whether the server closes the connection within ``wait`` seconds."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True


def connect(server: WidetableServer) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock, Reader(sock)


def test_default_bind_is_loopback(tmp_path) -> None:
    from widetable.cli import serve

    assert inspect.signature(WidetableServer).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(serve.serve).parameters["host"].default == "127.0.0.1"
    server = start(widetable.open(str(tmp_path / "d"), purge_interval=None))
    try:
        assert server.endpoint == f"http://127.0.0.1:{server.port}"
        assert server.socket.getsockname()[0] == "127.0.0.1"
    finally:
        server.drain(5)


def test_keep_alive_serves_many_requests_on_one_connection(served) -> None:
    sock, reader = connect(served)
    with sock:
        for _ in range(5):
            sock.sendall(request("ListTable", LIST))
            status, headers, _ = reader.response()
            assert status == 200 and "connection" not in headers
            assert headers["authorization"].startswith(f"OTS {serving.ACCESS_KEY_ID}:")


def test_pipelined_requests_are_answered_in_order(served) -> None:
    sock, reader = connect(served)
    with sock:
        sock.sendall(request("ListTable", LIST) + request("DescribeTable", DESCRIBE_MISSING)
                     + request("ListTable", LIST))
        assert [reader.response()[0] for _ in range(3)] == [200, 404, 200]


def test_a_request_in_fragments(served) -> None:
    sock, reader = connect(served)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with sock:
        data = request("ListTable", LIST)
        for i in range(0, len(data), 7):
            sock.sendall(data[i:i + 7])
            time.sleep(0.001)
        assert reader.response()[0] == 200


def test_idle_connections_are_closed(served_idle) -> None:
    sock, reader = connect(served_idle)
    with sock:
        sock.sendall(request("ListTable", LIST))
        assert reader.response()[0] == 200
        assert reader.closed(wait=IDLE * 6)
    sock, reader = connect(served_idle)
    with sock:
        sock.sendall(request("ListTable", LIST)[:40])  # a head that never ends
        assert reader.closed(wait=IDLE * 6)


@pytest.mark.parametrize(("raw", "status", "code"), [
    (b"GET /ListTable HTTP/1.1\r\nHost: x\r\n\r\n", 405, "OTSMethodNotAllowed"),
    (b"POST /ListTable HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "OTSParameterInvalid"),
    (b"POST /ListTable HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "OTSParameterInvalid"),
    (b"POST /ListTable\r\n\r\n", 400, "OTSParameterInvalid"),
    (b"POST /ListTable HTTP/2.0\r\n\r\n", 505, "OTSParameterInvalid"),
    (b"POST /ListTable HTTP/1.1\r\nBad Name : x\r\n\r\n", 400, "OTSParameterInvalid"),
    (b"POST /ListTable HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431, "OTSParameterInvalid"),
    (b"POST /ListTable HTTP/1.1\r\n" + b"X: 1\r\n" * 101 + b"\r\n", 431, "OTSParameterInvalid"),
])
def test_framing_errors_answer_and_close(served, raw, status, code) -> None:
    sock, reader = connect(served)
    with sock:
        sock.sendall(raw)
        got, headers, body = reader.response()
        assert (got, pb.Error.FromString(body).code) == (status, code)
        assert headers["connection"] == "close" and reader.closed()


def test_connection_close_and_http_1_0(served) -> None:
    for raw in (request("ListTable", LIST, "Connection: close\r\n"),
                request("ListTable", LIST).replace(b"HTTP/1.1", b"HTTP/1.0", 1)):
        sock, reader = connect(served)
        with sock:
            sock.sendall(raw)
            status, headers, _ = reader.response()
            assert status == 200 and headers["connection"] == "close" and reader.closed()


def test_expect_100_continue(served) -> None:
    sock, reader = connect(served)
    with sock:
        body = DESCRIBE_MISSING
        data = request("DescribeTable", body, "Expect: 100-continue\r\n")
        sock.sendall(data[:-len(body)])
        assert reader.response()[0] == 100
        sock.sendall(body)
        assert reader.response()[0] == 404


def test_half_closed_client_still_gets_its_answer(served) -> None:
    sock, reader = connect(served)
    with sock:
        sock.sendall(request("ListTable", LIST))
        sock.shutdown(socket.SHUT_WR)
        assert reader.response()[0] == 200


def test_drain_closes_idle_connections_and_the_store(tmp_path) -> None:
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    server = start(db)
    sock, reader = connect(server)
    with sock:
        sock.sendall(request("ListTable", LIST))
        assert reader.response()[0] == 200
        server.drain(5)
        assert reader.closed()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
    with pytest.raises(widetable.WidetableError):
        db.list_tables()  # closed


def test_pool_requests_do_not_hold_up_other_connections(served) -> None:
    """A transaction's write waits on the pool for a key another transaction holds; a
    plain read on another connection is answered meanwhile."""
    client = widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
    try:
        t = client.create_table("p", [("k", "STRING"), ("n", "INTEGER")])
        t.put_row(("a", 1), {"v": 1})
        txn = client.start_local_transaction("p", "a")
        txn.put_row(("a", 2), {"v": 2})
        assert t.get_row(("a", 1))["v"] == 1
        txn.commit()
        assert t.get_row(("a", 2))["v"] == 2
    finally:
        client.close()


def _certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def test_tls_end_to_end(tmp_path) -> None:
    cert, key = _certificate(tmp_path)
    server = start(widetable.open(str(tmp_path / "d"), purge_interval=None),
                   certfile=cert, keyfile=key)
    try:
        assert server.endpoint.startswith("https://127.0.0.1:")
        client = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET,
                                   ssl_context=ssl.create_default_context(cafile=cert))
        t = client.create_table("s", [("k", "STRING")])
        for i in range(20):
            t.put_row((f"r{i}",), {"v": i})
        assert len(list(t.scan())) == 20
        assert t.get_row(("r7",))["v"] == 7
        client.close()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(request("ListTable", LIST))  # plain HTTP to a TLS port: refused
            plain.settimeout(5)
            assert not plain.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        server.drain(5)


def test_plain_writes_go_to_the_pool_only_while_a_transaction_is_open(tmp_path) -> None:
    """A plain write can wait 50 ms on a key a transaction holds: then it must not run on
    the event loop. Without open transactions no write can wait, and they run inline."""
    from widetable.server.tablestore.service import pooled

    db = widetable.open(str(tmp_path / "d"), purge_interval=None, maintenance_interval=None)
    try:
        t = db.create_table("t", [("k", "STRING")])
        put = pb.PutRowRequest(table_name="t")
        get = pb.GetRowRequest(table_name="t")
        assert not db.transactions_open()
        assert not pooled("PutRow", put, 100, db.transactions_open())
        txn = db.start_local_transaction("t", "a")
        txn.put_row(("a",), {"v": 1})
        assert db.transactions_open()
        for api, msg in (("PutRow", put), ("UpdateRow", pb.UpdateRowRequest(table_name="t")),
                         ("DeleteRow", pb.DeleteRowRequest(table_name="t"))):
            assert pooled(api, msg, 100, db.transactions_open())
        assert not pooled("GetRow", get, 100, db.transactions_open())  # reads never wait
        txn.commit()
        assert not db.transactions_open()
        assert t.get_row(("a",))["v"] == 1
    finally:
        db.close()
