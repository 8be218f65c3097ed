"""Fixtures: ``widetable serve --bigtable-port`` on free loopback ports, and the official
``google-cloud-bigtable`` clients pointed at it through BIGTABLE_EMULATOR_HOST, as a
user's code would be."""

from __future__ import annotations

import os
import socket
import time
import uuid
import warnings

import pytest

from .. import serving

PROJECT = "test-project"
INSTANCE = "test-instance"


def wait_for_port(port: int, proc=None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"widetable serve exited early:\n{proc.stdout.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class BigtableServed:
    """A ``widetable serve`` subprocess with its Bigtable port; restartable on its store."""

    def __init__(self, data, *extra: str) -> None:
        self.data = data
        self.extra = extra
        self.bt_port = serving.free_port()
        self.served = None
        self.start()

    def start(self) -> None:
        self.served = serving.start(self.data, "--bigtable-port", str(self.bt_port), *self.extra)
        wait_for_port(self.bt_port, self.served.proc)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.bt_port}"

    def stop(self, sig=None) -> int:
        return self.served.stop() if sig is None else self.served.stop(sig)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def bt_server(tmp_path_factory):
    served = BigtableServed(tmp_path_factory.mktemp("bt") / "data")
    yield served
    served.stop()


@pytest.fixture
def emulator_env(bt_server, monkeypatch):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bt_server.host)
    warnings.filterwarnings("ignore", category=FutureWarning)
    return bt_server


@pytest.fixture
def classic(emulator_env):
    """The classic ``google.cloud.bigtable.Client`` (admin) and its instance."""
    from google.cloud import bigtable

    client = bigtable.Client(project=PROJECT, admin=True)
    yield client.instance(INSTANCE)
    client.close() if hasattr(client, "close") else None


@pytest.fixture
def data_client(emulator_env):
    from google.cloud.bigtable.data import BigtableDataClient

    client = BigtableDataClient(project=PROJECT)
    yield client
    client.close()


@pytest.fixture
def table_id(classic):
    """A fresh table name, its table deleted after the test."""
    name = f"t{uuid.uuid4().hex[:10]}"
    yield name
    try:
        classic.table(name).delete()
    except Exception:  # noqa: BLE001 - the test may have deleted it
        pass


def table_path(table: str) -> str:
    return f"projects/{PROJECT}/instances/{INSTANCE}/tables/{table}"


@pytest.fixture
def make_table(classic, table_id):
    """``make_table(families={"cf": None, ...}, splits=[...])``: create through the classic
    admin client; returns the table id."""
    def make(families=None, splits=()):
        classic.table(table_id).create(column_families=families or {"cf": None},
                                       initial_split_keys=list(splits))
        return table_id
    return make


def set_env_for_subprocess(host: str) -> dict:
    return dict(os.environ, BIGTABLE_EMULATOR_HOST=host)
