"""widetable.connect and a connection that drops mid-call, on both protocols.

A proxy on loopback sits between the client and a real server. Armed, it forwards the
next request to the server, lets the server run it and answer, then closes the
client's connection instead of passing the answer on: the server applied the call,
the client never heard. A call that may not run twice must then raise
OutcomeUnknown (and have run once); an idempotent one is sent again and succeeds;
and a call on a connection the server had closed while idle never left the client,
so it is sent on a fresh one whatever it is.
"""

from __future__ import annotations

import selectors
import socket
import threading

import pytest

import widetable
from widetable import AUTO_INCREMENT, EXPECT_EXIST, WidetableError
from widetable.errors import OUTCOME_UNKNOWN

from . import serving


class DroppingProxy:
    """Forwards loopback TCP connections to ``target``; ``drop_next_answer()`` makes the
    next answer from the server, on a connection that has had an answer before (a kept-
    alive one: not a new connection's upgrade), close the client's connection instead of
    reaching it; ``close_idle()`` closes every client connection now (as a server's idle
    timeout does)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._armed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self.dropped = 0
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop_next_answer(self) -> None:
        self._armed.set()

    def close_idle(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            _close(client)
            _close(upstream)

    def close(self) -> None:
        self._closing = True
        _close(self.listener)
        self.close_idle()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        answered = False
        try:
            while True:
                for key, _ in sel.select():
                    src, dst = key.fileobj, key.data
                    data = src.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    if src is upstream and answered and self._armed.is_set():
                        self._armed.clear()  # the server ran the call: the client never hears
                        self.dropped += 1
                        return
                    answered = answered or src is upstream
                    dst.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@pytest.fixture
def proxy(server):
    host, port = server.endpoint.removeprefix("http://").split(":")
    p = DroppingProxy((host, int(port)))
    yield p
    p.close()


@pytest.fixture(params=["native", "tablestore"])
def through(request, proxy, server):
    """``(client through the proxy, client straight to the server)``, one protocol."""
    keys = {"access_key_id": serving.ACCESS_KEY_ID, "access_key_secret": serving.ACCESS_KEY_SECRET}
    via = widetable.connect(proxy.endpoint, protocol=request.param, **keys)
    direct = widetable.connect(server.endpoint, **keys)
    direct.create_table("c", [("k", "STRING")])
    direct.create_table("auto", [("k", "STRING"), ("seq", "INTEGER", AUTO_INCREMENT)])
    via.table("c").put_row(("warm",), {"n": 0})  # the connection (and its upgrade) is up
    assert via.protocol == request.param
    yield via, direct
    via.close()
    for name in direct.list_tables():
        direct.delete_table(name)
    direct.close()


def warm(via) -> None:
    """Both of the client's connections up (data calls, and calls over Tablestore's
    protocol), and every table's schema known: the next call goes out on a kept-alive
    connection."""
    via.table("c").get_row(("warm",))
    for name in via.list_tables():
        via.table(name)


def outcome_unknown(proxy, via, call) -> WidetableError:
    warm(via)
    proxy.dropped = 0
    proxy.drop_next_answer()
    with pytest.raises(WidetableError) as info:
        call()
    assert proxy.dropped == 1
    assert info.value.code == OUTCOME_UNKNOWN, info.value
    assert "not idempotent" in info.value.message
    return info.value


def test_an_increment_that_lost_its_answer_is_not_sent_again(proxy, through) -> None:
    via, direct = through
    c = via.table("c")
    outcome_unknown(proxy, via, lambda: c.update_row(("k",), increment={"n": 1}))
    assert direct.table("c").get_row(("k",))["n"] == 1  # ran once, never twice
    assert c.update_row(("k",), increment={"n": 1}).increments == {"n": 2}  # and on it goes


def test_conditional_writes_and_auto_increment_puts(proxy, through) -> None:
    via, direct = through
    c = via.table("c")
    outcome_unknown(proxy, via, lambda: c.put_row(("p",), {"v": 1}, condition="EXPECT_NOT_EXIST"))
    assert direct.table("c").get_row(("p",))["v"] == 1  # a resend would have failed its check
    outcome_unknown(proxy, via, lambda: c.delete_row(("p",), condition=EXPECT_EXIST))
    assert direct.table("c").get_row(("p",)) is None
    outcome_unknown(proxy, via, lambda: via.table("auto").put_row(("a", AUTO_INCREMENT), {"v": 1}))
    assert len(list(direct.table("auto").scan())) == 1  # no duplicate row
    outcome_unknown(proxy, via, lambda: via.batch_write_row([
        ("c", "put", ("b1",), {"v": 1}), ("c", "update", ("b2",), {"increment": {"n": 5}})]))
    assert direct.table("c").get_row(("b2",))["n"] == 5


def test_a_commit_that_lost_its_answer_is_not_sent_again(proxy, through) -> None:
    via, direct = through
    txn = via.start_local_transaction("c", "t")
    txn.update_row(("t",), increment={"n": 1})
    outcome_unknown(proxy, via, txn.commit)
    assert direct.table("c").get_row(("t",))["n"] == 1


def test_idempotent_calls_are_sent_again(proxy, through) -> None:
    via, direct = through
    c = via.table("c")
    for call in (lambda: c.put_row(("i",), {"v": 1}),
                 lambda: c.update_row(("i",), put={"w": 2}),
                 lambda: c.get_row(("i",)),
                 lambda: list(c.scan()),
                 lambda: via.batch_write_row([("c", "put", ("j",), {"v": 3}),
                                              ("c", "delete", ("warm",))]),
                 lambda: via.describe_table("c"),
                 lambda: c.delete_row(("j",))):
        warm(via)
        proxy.drop_next_answer()
        call()
        assert proxy.dropped == 1
        proxy.dropped = 0
    assert direct.table("c").get_row(("i",)).columns == {"v": 1, "w": 2}
    assert direct.table("c").get_row(("j",)) is None


def test_a_call_on_a_connection_closed_while_idle_never_left(proxy, through) -> None:
    """The server closed the kept-alive connection before the call: the call goes out on
    a fresh one, increments and commits too, and runs once."""
    via, direct = through
    c = via.table("c")
    for n in (1, 2):
        proxy.close_idle()
        assert c.update_row(("z",), increment={"n": 1}).increments == {"n": n}
    txn = via.start_local_transaction("c", "y")
    txn.update_row(("y",), increment={"n": 7})
    proxy.close_idle()
    txn.commit()
    assert direct.table("c").get_row(("y",))["n"] == 7
    assert direct.table("c").get_row(("z",))["n"] == 2
