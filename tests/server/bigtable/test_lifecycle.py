"""The Bigtable port inside WidetableServer: bound at construction, served beside the
Tablestore port, drained with it (also when it never served), and a port it cannot bind
leaves nothing open."""

from __future__ import annotations

import socket
import threading

import pytest

import widetable
from widetable.client.bigtable import connect_bigtable
from widetable.server import KeyStore, WidetableServer

from .. import serving


def _server(db, **kw):
    return WidetableServer(db, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}),
                           port=0, bigtable_port=0, **kw)


def test_served_beside_tablestore_then_drained(tmp_path):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    server = _server(db)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with connect_bigtable(server.bigtable.endpoint) as bt:
        bt.create_table("t", [])
        assert bt.list_tables() == ["t"]
    remote = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
    assert "t" in remote.list_tables()  # one store behind both ports
    remote.close()
    server.drain(2)
    thread.join(10)
    assert not thread.is_alive()
    with socket.socket() as s:  # the Bigtable port is closed
        assert s.connect_ex(("127.0.0.1", server.bigtable.port)) != 0


def test_drained_without_serving_closes_both_ports(tmp_path):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    server = _server(db)
    port = server.bigtable.port
    server.drain(1)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_a_bigtable_port_in_use_fails_and_leaves_nothing_open(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        db = widetable.open(str(tmp_path / "d"), purge_interval=None)
        try:
            with pytest.raises(OSError, match=str(busy)):
                WidetableServer(db, KeyStore({"k": "s"}), port=0, bigtable_port=busy)
        finally:
            db.close()
