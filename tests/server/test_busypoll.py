"""Busy polling: the server's loop after each answer (``server/busypoll.py``) and the
client's wait for an answer (``client/native.py``), on real loops, sockets and servers."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import widetable
from widetable.cli import serve as cli_serve
from widetable.client import native as client_native
from widetable.client.transport import _Connection
from widetable.errors import ParameterInvalid
from widetable.server import KeyStore, WidetableServer
from widetable.server.core.listen import loop_factory
from widetable.wire import busypoll, native
from widetable.wire.busypoll import MAX_MISSES, MAX_WINDOW_US, QUIET, BusyPoll, check_window

from . import serving


@pytest.fixture
def steady(monkeypatch):
    """No giving way for a stall (PREEMPTED a second): a test of the other rules holds
    on a loaded machine, where a poller may stand still for a moment now and then."""
    monkeypatch.setattr(busypoll, "PREEMPTED", 1.0)
    monkeypatch.setattr(client_native, "PREEMPTED", 1.0)


def _run_loop(poll: BusyPoll, body) -> None:
    """``body(loop)`` as a coroutine on the server's kind of loop, with ``poll`` on it."""
    async def main() -> None:
        poll.loop = asyncio.get_running_loop()
        await body(poll.loop)

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(main())


def test_a_window_with_no_request_is_a_miss_and_misses_stop_the_polling(steady) -> None:
    poll = BusyPoll(2000, lambda: False)

    async def body(loop) -> None:
        for n in range(1, MAX_MISSES + 1):
            poll.answered()
            assert poll._polling
            await asyncio.sleep(0.02)  # the 2 ms window closes with no request
            assert not poll._polling and poll.misses == n
        poll.answered()  # off now: no window opens
        assert not poll._polling
        await asyncio.sleep(0.01)
        assert poll.windows == MAX_MISSES

    _run_loop(poll, body)


def test_a_request_soon_after_an_answer_turns_polling_back_on(steady) -> None:
    poll = BusyPoll(50_000, lambda: False)

    async def body(loop) -> None:
        poll.misses = MAX_MISSES
        poll.answered()
        assert not poll._polling
        await asyncio.sleep(0.08)
        poll.arrived()  # 80 ms after the answer: longer than the 50 ms window
        assert poll.misses == MAX_MISSES
        poll.answered()
        poll.arrived()  # at once: a client calling back to back
        assert poll.misses == 0
        poll.answered()
        assert poll._polling

    _run_loop(poll, body)


def test_the_window_stays_open_while_requests_keep_coming(steady) -> None:
    poll = BusyPoll(30_000, lambda: False)

    async def body(loop) -> None:
        for _ in range(6):  # 60 ms of answers, 10 ms apart, in one 30 ms window after another
            poll.answered()
            await asyncio.sleep(0.01)
            assert poll._polling
        await asyncio.sleep(0.06)
        assert poll.misses == 1 and poll.windows == 1

    _run_loop(poll, body)


def test_no_polling_while_the_pool_runs_a_request(steady) -> None:
    jobs = [1]
    poll = BusyPoll(50_000, lambda: jobs[0])

    async def body(loop) -> None:
        poll.answered()
        await asyncio.sleep(0.005)
        assert not poll._polling and poll.misses == 0  # stopped, and not counted a miss
        jobs[0] = 0
        poll.answered()
        await asyncio.sleep(0.005)
        assert poll._polling

    _run_loop(poll, body)


def test_a_loop_that_lost_its_cpu_stops_polling_for_a_while() -> None:
    """A gap between two polls with no answer between them (here the loop's thread is
    held up by a callback, as by another thread taking its CPU) ends the polling, and
    no window opens for QUIET seconds; it is not a miss."""
    # On a loaded machine the loop's thread may really lose its CPU during the first
    # millisecond, before the stall below: that attempt proves nothing, so it is retried.
    for _ in range(20):
        poll = BusyPoll(50_000, lambda: False)
        if _stall_once(poll):
            return
    pytest.fail("the loop lost its CPU before the injected stall in every attempt")


def _stall_once(poll: BusyPoll) -> bool:
    started: list[bool] = []

    async def body(loop) -> None:
        poll.answered()
        await asyncio.sleep(0.001)  # polling
        if not poll._polling:  # preempted for real before the stall: try again
            assert poll.preempted == 1 and poll.misses == 0
            return
        started.append(True)
        loop.call_soon(time.sleep, 0.003)  # the loop stands still for 3 ms
        await asyncio.sleep(0.005)
        assert not poll._polling and poll.preempted == 1 and poll.misses == 0
        poll.answered()
        assert not poll._polling  # quiet
        await asyncio.sleep(QUIET)
        poll.answered()
        assert poll._polling

    _run_loop(poll, body)
    return bool(started)


def test_a_window_of_zero_never_polls() -> None:
    poll = BusyPoll(0, lambda: False)

    async def body(loop) -> None:
        poll.answered()
        assert not poll._polling

    _run_loop(poll, body)


@pytest.mark.parametrize("bad", [-1, MAX_WINDOW_US + 1, 1.5, True, "200", None])
def test_a_bad_window_is_refused_by_name(bad) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        check_window(bad)
    with pytest.raises(ValueError, match="busy_poll"):  # checked before anything is bound
        WidetableServer(None, KeyStore({"k": "s"}), port=0, busy_poll=bad)  # type: ignore[arg-type]


def test_the_command_line_knows_the_server_s_limit() -> None:
    assert cli_serve.MAX_BUSY_POLL_US == MAX_WINDOW_US
    assert 0 < cli_serve.DEFAULT_BUSY_POLL_US <= MAX_WINDOW_US


@pytest.mark.parametrize("protocol", ["native", "tablestore"])
@pytest.mark.parametrize("window", [0, 2000])
def test_the_server_polls_after_answers_of_both_protocols(tmp_path, protocol, window) -> None:
    db = widetable.open(str(tmp_path / "d"), purge_interval=None)
    server = WidetableServer(db, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}),
                             port=0, busy_poll=window)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET, protocol=protocol)
        t = client.create_table("t", [("k", "STRING")])
        poll = server.core.poll
        # In one process the client's thread and the loop's share the GIL: the loop may
        # have found itself held up while polling, and be quiet for QUIET seconds.
        time.sleep(QUIET + 0.05)
        before = poll.polls
        t.put_row(("a",), {"v": 1})
        assert t.get_row(("a",))["v"] == 1
        assert client.protocol == protocol
        client.close()
        time.sleep(0.1)  # the last window closes
        # Answers of either protocol start the polling, unless the window is 0; it ends.
        assert (poll.polls > before) == bool(window)
        assert not poll._polling
    finally:
        server.drain(5)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_served_store_costs_no_cpu_once_its_clients_stop(tmp_path) -> None:
    """``widetable serve`` polls by default; after the last answer's window it sleeps."""
    served = serving.start(tmp_path / "data", "--busy-poll", "1000")
    try:
        db = widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
        t = db.create_table("t", [("k", "STRING")])
        for i in range(300):
            t.put_row((f"k{i}",), {"v": i})
            assert t.get_row((f"k{i}",))["v"] == i
        db.close()
        time.sleep(0.2)
        start = _cpu_seconds(served.proc.pid)
        time.sleep(1.0)
        # Background work (stats, purges) costs a few ticks a second at most; a loop
        # still polling would cost the whole second.
        assert _cpu_seconds(served.proc.pid) - start < 0.2
    finally:
        served.stop()
    out = served.proc.stdout.read()
    assert "busy poll: 1000 µs after each answer" in out


def test_the_banner_says_when_busy_polling_is_off(tmp_path) -> None:
    served = serving.start(tmp_path / "data", "--busy-poll", "0")
    served.stop()
    assert "busy poll: off" in served.proc.stdout.read()


@pytest.mark.parametrize("bad", ["-1", str(MAX_WINDOW_US + 1), "fast"])
def test_the_command_line_refuses_a_bad_window(tmp_path, bad) -> None:
    done = subprocess.run([sys.executable, "-m", "widetable", "serve", "--data",
                           str(tmp_path / "d"), "--port", "0", "--busy-poll", bad],
                          check=False, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, COLUMNS="200"))  # no wrapped message
    assert done.returncode == 2
    assert "Invalid value for '--busy-poll'" in done.stderr
    assert not (tmp_path / "d").exists()  # refused before the store is made


# -- the client ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, MAX_WINDOW_US + 1, 2.5, True, "200"])
def test_connect_refuses_a_bad_window_by_name(bad) -> None:
    with pytest.raises(ParameterInvalid, match="busy_poll") as caught:
        widetable.connect("http://127.0.0.1:1", access_key_id="k", access_key_secret="s",
                          busy_poll=bad)
    assert str(bad) in str(caught.value)


def _pair_connection():
    here, there = socket.socketpair()
    conn = _Connection("unused", None, 5.0, None, "localhost")
    conn.sock = here
    return conn, here, there


def _answer_later(sock: socket.socket, delay: float, value: object) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), sock.sendall(native.frame(value))))
    thread.start()
    return thread


@pytest.mark.skipif(not client_native._DONTWAIT, reason="no MSG_DONTWAIT on this platform")
def test_a_client_polls_for_an_answer_only_while_answers_come_within_the_window(steady) -> None:
    """Polling costs the waiting thread CPU up to the window; a connection whose answers
    take longer than the window waits asleep from the start."""
    conn, here, there = _pair_connection()
    window = 0.03
    with here, there:
        # Fast answers so far (rtt 0): poll for up to 30 ms of a 100 ms wait, then sleep.
        answer = _answer_later(there, 0.1, (0, "first"))
        cpu, sent = time.thread_time(), time.perf_counter()
        assert client_native._read_frame(conn, client_native.read_answer, window, sent) == [0, "first"]
        polled = time.thread_time() - cpu
        answer.join()
        assert conn.rtt == pytest.approx(0.25 * 0.1, rel=0.5)  # a quarter of the way to 0.1 s
        conn.rtt = 0.1  # answers have been taking longer than the window: no polling
        answer = _answer_later(there, 0.1, (0, "second"))
        cpu, sent = time.thread_time(), time.perf_counter()
        assert client_native._read_frame(conn, client_native.read_answer, window, sent) == [0, "second"]
        slept = time.thread_time() - cpu
        answer.join()
    assert polled > 0.005, polled  # most of the 30 ms polling (less only if preempted)
    assert slept < 0.003, slept


@pytest.mark.skipif(not client_native._DONTWAIT, reason="no MSG_DONTWAIT on this platform")
def test_a_client_that_loses_the_cpu_while_polling_sleeps_and_stays_quiet() -> None:
    """Another thread holding the GIL (as another process taking the CPU would) makes a
    gap between two polls: the call stops polling and waits asleep, and the connection
    does not poll for QUIET seconds."""
    conn, here, there = _pair_connection()
    stop = threading.Event()

    def hog() -> None:  # pure Python: holds the GIL until the interpreter switches it out
        while not stop.is_set():
            sum(range(1000))

    with here, there:
        hogger = threading.Thread(target=hog)
        hogger.start()
        try:
            answer = _answer_later(there, 0.1, (0, "late"))
            sent = time.perf_counter()
            got = client_native._read_frame(conn, client_native.read_answer, 0.05, sent)
            answer.join()
        finally:
            stop.set()
            hogger.join()
        assert got == [0, "late"]
        assert sent < conn.quiet <= time.perf_counter() + QUIET


def test_a_polling_client_reads_every_answer_of_a_served_store(tmp_path) -> None:
    """Busy polling on both sides (``widetable serve``'s default and the client's): every
    call's answer is its own, rows and pages alike, over TCP and the unix socket."""
    sock = tmp_path / "s.sock"
    served = serving.start(tmp_path / "data", "--socket", str(sock))
    try:
        for endpoint in (served.endpoint, f"unix://{sock}"):
            db = widetable.connect(endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET)
            t = db.create_table("t", [("k", "INTEGER")])
            for i in range(200):
                t.put_row((i,), {"v": str(i) * (i % 50)})
            for i in range(200):
                assert t.get_row((i,))["v"] == str(i) * (i % 50)
                page = t.get_range((i,), (widetable.INF_MAX,), limit=1 + i % 100)
                assert [r.primary_key[0] for r in page.rows] == list(range(i, min(200, i + 1 + i % 100)))
            conn = db._native._conns.get()
            assert db.protocol == "native" and 0 < conn.rtt < 1
            db.delete_table("t")
            db.close()
    finally:
        served.stop()


def test_a_call_polls_only_while_no_other_call_waits(tmp_path) -> None:
    """Threads share a connection object: a call polls (and times its answer, ``rtt``)
    only while no other thread's call waits, as each poll takes the GIL the others
    need. The answers stay each thread's own."""
    served = serving.start(tmp_path / "data")
    try:
        db = widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
        t = db.create_table("t", [("k", "INTEGER")])
        t.put_row((0,), {"v": 0})
        channel = db._native
        conn = channel._conns.get()
        other = _Connection("unused", None, 5.0, None, "localhost")
        channel._waiting.add(other)  # another thread's call, waiting
        conn.rtt = 0.0
        assert t.get_row((0,))["v"] == 0
        assert conn.rtt == 0.0  # it did not poll
        channel._waiting.discard(other)
        assert t.get_row((0,))["v"] == 0
        assert conn.rtt > 0.0  # alone, it polled

        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(100):
                    t.put_row((n * 1000 + i,), {"v": n})
                    assert t.get_row((n * 1000 + i,))["v"] == n
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 5)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        assert channel._waiting == set()  # every call took itself out
        db.close()
    finally:
        served.stop()
