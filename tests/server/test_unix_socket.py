"""``widetable serve --socket``: the server on a unix socket, and the client's timeouts.

The client keeps its sockets blocking with the timeout in the kernel
(SO_RCVTIMEO / SO_SNDTIMEO), so a server that never answers must still give a
clear error within the timeout, on TCP and on a unix socket alike.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time

import pytest

import widetable
from widetable.errors import ParameterInvalid, WidetableError
from widetable.server import KeyStore, WidetableServer

from . import serving


def _connect(endpoint: str, **kw):
    return widetable.connect(endpoint, access_key_id=serving.ACCESS_KEY_ID,
                             access_key_secret=serving.ACCESS_KEY_SECRET, **kw)


@pytest.fixture
def unix_served(tmp_path):
    path = tmp_path / "wt.sock"
    served = serving.start(tmp_path / "data", "--socket", str(path))
    yield served, path
    served.stop()


@pytest.mark.parametrize("protocol", ["native", "tablestore"])
def test_calls_over_the_unix_socket(unix_served, protocol) -> None:
    served, path = unix_served
    db = _connect(f"unix://{path}", protocol=protocol)
    try:
        t = db.create_table(f"u_{protocol}", [("k", "STRING"), ("n", "INTEGER")])
        t.put_row(("a", 1), {"v": b"x" * 3000, "s": "text"})
        t.update_row(("a", 1), increment={"c": 5})
        db.batch_write_row([(t.name, "put", ("b", i), {"v": i}) for i in range(50)])
        assert t.get_row(("a", 1)).columns == {"v": b"x" * 3000, "s": "text", "c": 5}
        page = t.get_range(("b", widetable.INF_MIN), ("b", widetable.INF_MAX), limit=20)
        assert [r.primary_key for r in page.rows] == [("b", i) for i in range(20)]
        assert db.protocol == protocol
    finally:
        db.close()
    # the same rows over TCP: one store behind both listeners
    tcp = _connect(served.endpoint)
    try:
        assert tcp.table(f"u_{protocol}").get_row(("b", 7))["v"] == 7
    finally:
        tcp.close()


def test_the_socket_is_the_owners_only_and_removed_at_shutdown(unix_served) -> None:
    served, path = unix_served
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    served.stop()
    out = served.proc.stdout.read()
    assert f"unix://{path}" in out  # the banner names it
    assert not path.exists()


def _refused(store_dir, keys, path: str, match: str) -> None:
    """A server asked to listen on unix socket ``path`` fails with OSError ``match``."""
    db = widetable.open(str(store_dir))
    try:
        with pytest.raises(OSError, match=match):
            WidetableServer(db, keys, port=0, unix_socket=path)
    finally:
        db.close()


def test_a_stale_socket_file_is_replaced_and_a_live_one_refused(tmp_path) -> None:
    path = str(tmp_path / "s.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)  # a file left by a process that is gone: nobody listens on it
    stale.close()
    keys = KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET})
    db = widetable.open(str(tmp_path / "d1"))
    server = WidetableServer(db, keys, port=0, unix_socket=path)
    worker = threading.Thread(target=server.serve_forever)
    worker.start()
    try:
        client = _connect(server.unix_endpoint)
        client.create_table("t", [("k", "INTEGER")]).put_row((1,), {"v": 1})
        client.close()
        _refused(tmp_path / "d2", keys, path, "already listening")
    finally:
        server.drain()
        worker.join()
    assert not os.path.exists(path)
    plain = tmp_path / "not-a-socket"
    plain.write_text("x")
    _refused(tmp_path / "d3", keys, str(plain), "not a socket")
    assert plain.read_text() == "x"
    long_path = str(tmp_path / ("x" * 120))
    _refused(tmp_path / "d4", keys, long_path, "cannot listen on the unix socket .*xxxx.*too long")


@pytest.mark.parametrize("endpoint", ["unix://relative/path", "unix:", "ftp://host:1"])
def test_bad_endpoints_are_named(endpoint) -> None:
    with pytest.raises(ParameterInvalid, match="unix:///path"):
        _connect(endpoint)


class _Silent:
    """A listener that accepts connections and never answers."""

    def __init__(self, family: int, address) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.mark.parametrize("family", ["tcp", "unix"])
@pytest.mark.parametrize("protocol", ["native", "tablestore"])
def test_a_server_that_never_answers_times_out(tmp_path, family, protocol) -> None:
    if family == "tcp":
        silent = _Silent(socket.AF_INET, ("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{silent.sock.getsockname()[1]}"
    else:
        silent = _Silent(socket.AF_UNIX, str(tmp_path / "silent.sock"))
        endpoint = f"unix://{tmp_path / 'silent.sock'}"
    db = _connect(endpoint, timeout=0.5, protocol=protocol)
    try:
        started = time.monotonic()
        with pytest.raises(WidetableError, match=r"no answer within 0\.5 s"):
            db.table("t").get_row((1,))
        assert 0.4 < time.monotonic() - started < 5
    finally:
        db.close()
        silent.close()


def test_a_refused_unix_socket_is_named(tmp_path) -> None:
    db = _connect(f"unix://{tmp_path / 'nobody.sock'}")
    with pytest.raises(WidetableError, match="cannot reach unix://"):
        db.list_tables()
    db.close()


@pytest.mark.parametrize("bad", [0, -1, "30", True, float("inf"), float("nan")])
def test_a_bad_timeout_is_named(bad) -> None:
    with pytest.raises(ParameterInvalid, match="timeout must be seconds > 0"):
        _connect("http://127.0.0.1:1", timeout=bad)


def test_no_timeout_waits_and_still_works(unix_served) -> None:
    _, path = unix_served
    db = _connect(f"unix://{path}", timeout=None)
    try:
        t = db.create_table("nt", [("k", "INTEGER")])
        t.put_row((1,), {"v": 1})
        assert t.get_row((1,))["v"] == 1
    finally:
        db.close()
