"""Fixtures: a real BigtableServer (its HTTP/2 transport) on a free loopback port over a
real store, in this process so that tests can look at its connections; and ``H2Client``,
an independent HTTP/2 client (the ``h2`` library) over a plain socket, for what grpcio's
client never sends (small windows, resets, bad frames)."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

import widetable
from widetable.bigtable.types import FamilySpec
from widetable.server.bigtable import BigtableServer
from widetable.wire.bigtable import v2

TABLE = "projects/p/instances/i/tables/t"


class Served:
    def __init__(self, path) -> None:
        self.db = widetable.open(str(path), purge_interval=None)
        self.db.bigtable.create_table("t", [FamilySpec("cf")])
        self.pool = ThreadPoolExecutor(4)
        self.server = BigtableServer(self.db, self.pool, port=0)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.host = self.server.endpoint

    @property
    def connections(self) -> set:
        return self.server._server.connections

    def stop(self, grace: float = 2.0) -> None:
        self.server.stop(grace)
        self.thread.join(10)
        self.pool.shutdown()
        self.db.close()


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "d")
    yield s
    s.stop()


def grpc_body(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


def messages(data: bytes) -> list[bytes]:
    """The length-prefixed messages of a gRPC answer's body."""
    out, i = [], 0
    while i < len(data):
        assert data[i] == 0, "a compressed message"
        n = int.from_bytes(data[i + 1:i + 5], "big")
        out.append(data[i + 5:i + 5 + n])
        assert len(out[-1]) == n, "a truncated message"
        i += 5 + n
    return out


def read_rows(key: bytes | None = None) -> bytes:
    req = v2.ReadRowsRequest(table_name=TABLE)
    if key is not None:
        req.rows.row_keys.append(key)
    return req.SerializeToString()


def mutate_row(key: bytes, value: bytes) -> bytes:
    return v2.MutateRowRequest(table_name=TABLE, row_key=key, mutations=[
        v2.Mutation(set_cell=v2.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                 timestamp_micros=1000, value=value))
    ]).SerializeToString()


class H2Client:
    """One HTTP/2 connection through ``h2``; ``window``: the stream window it gives the
    server (it grants more only when told to, by ``grant``)."""

    def __init__(self, host: str, window: int = 65_535) -> None:
        addr, port = host.rsplit(":", 1)
        self.sock = socket.create_connection((addr, int(port)), timeout=10)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(cfg)
        self.conn.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window,
                                         h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.conn.initiate_connection()
        self.send()
        self.data: dict[int, bytearray] = {}
        self.trailers: dict[int, dict] = {}
        self.headers: dict[int, dict] = {}
        self.reset: dict[int, int] = {}
        self.events: list = []
        self.closed = False

    def send(self) -> None:
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def call(self, method: str, message: bytes, extra: list | None = None) -> int:
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                                     (":path", f"/google.bigtable.v2.Bigtable/{method}"),
                                     (":authority", "localhost"), ("te", "trailers"),
                                     ("content-type", "application/grpc")] + (extra or []))
        self.conn.send_data(sid, grpc_body(message), end_stream=True)
        self.send()
        self.data[sid] = bytearray()
        return sid

    def pump(self, timeout: float = 10.0) -> bool:
        """Read once and handle the events (without granting any window); False at EOF."""
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(1 << 20)
        except (ConnectionResetError, TimeoutError, socket.timeout):
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        for ev in self.conn.receive_data(chunk):
            self.events.append(ev)
            if isinstance(ev, h2.events.DataReceived):
                self.data.setdefault(ev.stream_id, bytearray()).extend(ev.data)
            elif isinstance(ev, h2.events.TrailersReceived):
                self.trailers[ev.stream_id] = dict(ev.headers)
            elif isinstance(ev, h2.events.ResponseReceived):
                self.headers[ev.stream_id] = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamReset):
                self.reset[ev.stream_id] = ev.error_code
        self.send()  # PING and SETTINGS acks
        return True

    def grant(self, sid: int, n: int) -> None:
        self.conn.increment_flow_control_window(n, sid)
        self.conn.increment_flow_control_window(n)
        self.send()

    def until(self, done, timeout: float = 20.0) -> None:
        import time
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end, "timed out"
            if not self.pump(max(0.1, end - time.monotonic())):
                return

    def finished(self, sid: int) -> bool:
        return sid in self.trailers or sid in self.reset or (
            sid in self.headers and b"grpc-status" in self.headers[sid])

    def status(self, sid: int) -> int:
        h = self.trailers.get(sid) or self.headers.get(sid) or {}
        return int(h[b"grpc-status"])

    def close(self) -> None:
        self.sock.close()
