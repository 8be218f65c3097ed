"""Fixtures: one ``widetable serve`` per session, the official SDK and widetable.connect on it.

``remote_db`` is a RemoteDatabase on the session server, emptied after each
test, once with data calls over widetable's own protocol and once over
Tablestore's. Behaviour tests of tests/table re-run here through it: ``db`` is
overridden, so the shared ``table`` fixture makes remote tables.
"""

from __future__ import annotations

import threading

import pytest

import widetable
from widetable.server import KeyStore, WidetableServer

from . import serving


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    served = serving.start(tmp_path_factory.mktemp("served") / "data")
    yield served
    served.stop()


@pytest.fixture(params=["native", "tablestore"])
def remote_db(request, server):
    """widetable.connect with data calls over widetable's own protocol, or over Tablestore's."""
    db = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret=serving.ACCESS_KEY_SECRET, protocol=request.param)
    try:
        yield db
    finally:
        for name in db.list_tables():
            db.delete_table(name)
        db.close()


@pytest.fixture
def db(remote_db):
    return remote_db


@pytest.fixture(params=["v2", "v4"])
def ots(request, server):
    """An official-SDK OTSClient, signing with V2 or V4."""
    client = serving.official_client(server.endpoint, request.param, "widetable-tests-sdk")
    yield client
    for name in client.list_table():
        client.delete_table(name)


@pytest.fixture
def in_process(tmp_path):
    """``(db, server)``: a store on disk served on a loopback port by this process, so a
    test can set the embedded store and the wire side by side."""
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    server = WidetableServer(db, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}), port=0)
    threading.Thread(target=server.serve_forever, name="test-serve", daemon=True).start()
    yield db, server
    server.drain(5)
