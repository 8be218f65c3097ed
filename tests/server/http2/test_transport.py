"""The HTTP/2 transport under the Bigtable port, end to end with real clients (grpcio's,
and ``h2`` for what grpcio never sends): flow control with a slow reader, cancellation,
deadlines, GOAWAY on stop, concurrency."""

from __future__ import annotations

import threading
import time

import grpc
import h2.events
import pytest

from widetable.server.http2 import connection as C
from widetable.wire.bigtable import v2

from .conftest import H2Client, messages, mutate_row, read_rows

BIG = 6 * 2**20  # a cell over the client's 4 MiB message default: chunked over messages
IDENT = lambda b: b  # noqa: E731


def _channel(served):
    return grpc.insecure_channel(served.host, options=[("grpc.max_receive_message_length", 2**28),
                                                       ("grpc.max_send_message_length", 2**28)])


def _put(served, key: bytes, value: bytes) -> None:
    ch = _channel(served)
    ch.unary_unary("/google.bigtable.v2.Bigtable/MutateRow", IDENT, IDENT)(
        mutate_row(key, value), timeout=30)
    ch.close()


def _busy_connection(served):
    """The one server connection with a stream open (a channel a test closed just before
    may still be listed until the server has seen its end)."""
    (conn,) = [x for x in served.connections if x.streams]
    return conn


def _cell_value(bodies: list[bytes]) -> bytes:
    out = bytearray()
    for body in bodies:
        for chunk in v2.ReadRowsResponse.FromString(body).chunks:
            out += chunk.value
    return bytes(out)


def test_a_slow_reader_gets_a_big_cell_within_its_window(served):
    value = bytes(range(256)) * (BIG // 256)
    _put(served, b"big", value)
    window = 65_535
    c = H2Client(served.host, window=window)
    sid = c.call("ReadRows", read_rows(b"big"))
    received = 0
    for _ in range(3):  # the server stops at the window each time (h2 would fail otherwise)
        c.until(lambda: len(c.data[sid]) >= received + window, timeout=20)
        time.sleep(0.2)
        c.sock.settimeout(0.2)
        assert len(c.data[sid]) == received + window  # not a byte more without a grant
        assert not c.finished(sid)
        received += window
        c.grant(sid, window)
    c.grant(sid, 2 * BIG)
    c.until(lambda: c.finished(sid), timeout=30)
    assert c.status(sid) == 0
    assert _cell_value(messages(bytes(c.data[sid]))) == value
    c.close()


def test_a_reader_that_stops_reading_holds_the_server_to_its_buffer(served):
    """The client's windows are huge but it reads nothing: the server pulls no more of the
    scan than its transport buffer's high-water mark (plus one message)."""
    ch = _channel(served)
    write = ch.unary_unary("/google.bigtable.v2.Bigtable/MutateRows", IDENT, IDENT)
    for start in range(0, 40, 10):
        entries = [v2.MutateRowsRequest.Entry(row_key=b"r%03d" % i, mutations=[
            v2.Mutation(set_cell=v2.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                     timestamp_micros=1000, value=b"x" * 2**20))])
            for i in range(start, start + 10)]
        write(v2.MutateRowsRequest(table_name="projects/p/instances/i/tables/t",
                                   entries=entries).SerializeToString(), timeout=60)
    ch.close()
    c = H2Client(served.host, window=2**31 - 1)
    c.conn.increment_flow_control_window(2**31 - 1 - 65_535)
    c.send()
    c.call("ReadRows", read_rows())  # 40 MiB of rows
    time.sleep(1.5)
    conn = _busy_connection(served)
    buffered = conn.transport.get_write_buffer_size()
    assert buffered <= C.WRITE_HIGH + 2 * 2**20, buffered
    (stream,) = conn.streams.values()
    assert stream.call.source is not None  # the scan waits, not finished into memory
    total = 0
    while c.pump(10):  # now read it all
        total = sum(len(d) for d in c.data.values())
        if c.trailers:
            break
    assert total > 40 * 2**20
    c.close()


def test_cancelling_a_stream_closes_its_scan_and_the_server_goes_on(served):
    _put(served, b"big", b"z" * BIG)
    ch = _channel(served)
    call = ch.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", IDENT, IDENT)(read_rows(),
                                                                                  timeout=30)
    next(call)  # one message of the stream arrived
    call.cancel()
    deadline = time.monotonic() + 10
    while any(conn.streams for conn in served.connections) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(conn.streams for conn in served.connections)
    got = list(ch.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", IDENT, IDENT)(
        read_rows(b"big"), timeout=30))
    assert _cell_value(got) == b"z" * BIG
    ch.close()


def test_a_reset_from_the_client_ends_the_stream(served):
    _put(served, b"big", b"z" * BIG)
    c = H2Client(served.host, window=65_535)
    sid = c.call("ReadRows", read_rows(b"big"))
    c.until(lambda: len(c.data[sid]) >= 65_535)
    conn = _busy_connection(served)
    assert sid in conn.streams
    c.conn.reset_stream(sid)
    c.send()
    deadline = time.monotonic() + 5
    while conn.streams and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not conn.streams
    sid2 = c.call("ReadRows", read_rows(b"nothing"))  # the connection still serves
    c.until(lambda: c.finished(sid2))
    assert c.status(sid2) == 0
    c.close()


def test_a_deadline_ends_a_stream_waiting_for_its_window(served):
    _put(served, b"big", b"z" * BIG)
    c = H2Client(served.host, window=0)  # the server may send no DATA at all
    sid = c.call("ReadRows", read_rows(b"big"), extra=[("grpc-timeout", "300m")])
    start = time.monotonic()
    c.until(lambda: c.finished(sid), timeout=10)
    assert 0.25 < time.monotonic() - start < 5
    assert c.status(sid) == 4  # DEADLINE_EXCEEDED
    assert not c.data[sid]
    c.close()


def test_a_deadline_mid_message_resets_the_stream(served):
    _put(served, b"big", b"z" * BIG)
    c = H2Client(served.host, window=65_535)
    sid = c.call("ReadRows", read_rows(b"big"), extra=[("grpc-timeout", "300m")])
    c.until(lambda: c.finished(sid), timeout=10)
    assert c.reset.get(sid) == 8  # CANCEL: part of a message was sent, no status can follow
    c.close()


def test_grpc_timeout_from_grpcio_on_a_blocked_call(served):
    """grpcio's own deadline on a call the server cannot finish in time."""
    ch = grpc.insecure_channel(served.host, options=[("grpc.max_receive_message_length", 2**28)])
    _put(served, b"big", b"z" * BIG)
    call = ch.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", IDENT, IDENT)
    with pytest.raises(grpc.RpcError) as info:
        for _ in call(read_rows(), timeout=0.001):
            pass
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    ch.close()


def test_other_encodings_are_unimplemented_and_metadata_is_read(served):
    c = H2Client(served.host)
    sid = c.call("ReadRows", read_rows(b"k"), extra=[("grpc-encoding", "gzip")])
    c.until(lambda: c.finished(sid))
    assert c.status(sid) == 12
    assert c.headers[sid][b"grpc-accept-encoding"] == b"identity"
    c.close()


def test_stop_sends_goaway_and_lets_an_in_flight_call_finish(tmp_path):
    from .conftest import Served

    s = Served(tmp_path / "d")
    ch = grpc.insecure_channel(s.host, options=[("grpc.max_send_message_length", 2**28)])
    write = ch.unary_unary("/google.bigtable.v2.Bigtable/MutateRows", IDENT, IDENT)
    entries = [v2.MutateRowsRequest.Entry(row_key=b"r%06d" % i, mutations=[
        v2.Mutation(set_cell=v2.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                 timestamp_micros=1000, value=b"v" * 100))])
        for i in range(30_000)]
    request = v2.MutateRowsRequest(table_name="projects/p/instances/i/tables/t",
                                   entries=entries).SerializeToString()
    result: dict = {}

    def call():
        try:
            result["answer"] = write(request, timeout=60)
        except grpc.RpcError as exc:  # pragma: no cover - reported by the assertion
            result["error"] = exc

    t = threading.Thread(target=call)
    t.start()
    deadline = time.monotonic() + 30
    while not s.server._server.jobs[0] and time.monotonic() < deadline:
        time.sleep(0.005)  # until the call runs on the pool
    assert s.server._server.jobs[0]
    other = H2Client(s.host)
    other.pump(2)  # its SETTINGS
    stopping = threading.Thread(target=s.server.stop, args=(30,))
    stopping.start()
    other.until(lambda: any(isinstance(e, h2.events.ConnectionTerminated) for e in other.events)
                or other.closed, timeout=10)
    goaway = [e for e in other.events if isinstance(e, h2.events.ConnectionTerminated)]
    assert goaway and goaway[0].error_code == 0  # NO_ERROR
    stopping.join(40)
    t.join(40)
    assert "error" not in result, result.get("error")
    answer = v2.MutateRowsResponse.FromString(result["answer"])
    assert len(answer.entries) == 30_000 and all(e.status.code == 0 for e in answer.entries)
    ch.close()
    other.close()
    s.thread.join(10)
    assert not s.thread.is_alive()
    rows = s.db.bigtable.table("t").read_rows()
    assert sum(1 for _ in rows) == 30_000
    s.pool.shutdown()
    s.db.close()


def test_many_threads_over_many_channels(served):
    channels = [_channel(served) for _ in range(4)]
    errors: list = []

    def work(n: int) -> None:
        ch = channels[n % len(channels)]
        put = ch.unary_unary("/google.bigtable.v2.Bigtable/MutateRow", IDENT, IDENT)
        get = ch.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", IDENT, IDENT)
        try:
            for i in range(60):
                key, value = b"k%02d-%03d" % (n, i), b"v%d" % (n * 1000 + i)
                put(mutate_row(key, value), timeout=30)
                got = list(get(read_rows(key), timeout=30))
                assert _cell_value(got) == value
        except Exception as exc:  # noqa: BLE001 - collected, then failed below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert sum(1 for _ in served.db.bigtable.table("t").read_rows()) == 16 * 60
    for ch in channels:
        ch.close()


def test_a_pooled_streamed_answer_is_pulled_as_the_client_reads(served):
    """ExecuteQuery runs on the worker pool: its first message is made there, the rest
    pulled as the client takes them, so a reader that stops leaves the query waiting
    (not answered whole into the server's memory); read on, and every row arrives."""
    t = served.db.bigtable.table("t")
    from widetable.bigtable.types import SetCell
    for start in range(0, 30_000, 5000):
        t.mutate_rows([(b"k%06d" % i, [SetCell("cf", b"v", 1000, b"x" * 300)])
                       for i in range(start, start + 5000)])
    ch = _channel(served)
    prepared = ch.unary_unary("/google.bigtable.v2.Bigtable/PrepareQuery", IDENT,
                              v2.PrepareQueryResponse.FromString)(
        v2.PrepareQueryRequest(instance_name="projects/p/instances/i",
                               query="SELECT _key, cf['v'] AS v FROM t").SerializeToString(),
        timeout=30).prepared_query
    ch.close()

    def bytes_read() -> int:
        stats = served.db.table_stats("t")
        return sum(p["bytes_read"] for b in stats["buckets"] for p in b["partitions"])

    before = bytes_read()
    c = H2Client(served.host, window=65_535)
    sid = c.call("ExecuteQuery", v2.ExecuteQueryRequest(
        instance_name="projects/p/instances/i", prepared_query=prepared).SerializeToString())
    c.until(lambda: len(c.data[sid]) >= 65_535)
    time.sleep(1.0)
    conn = _busy_connection(served)
    (stream,) = conn.streams.values()
    assert stream.call.source is not None  # the query waits for the reader
    assert len(c.data[sid]) == 65_535  # not a byte past the window
    waiting = bytes_read() - before
    c.grant(sid, 2**30)
    c.until(lambda: c.finished(sid), timeout=60)
    assert c.status(sid) == 0
    assert waiting < (bytes_read() - before) / 2  # the scan had read only what was sent
    answers = [v2.ExecuteQueryResponse.FromString(m) for m in messages(bytes(c.data[sid]))]
    # a batch may be split over messages; serialized ProtoRows concatenate into one
    data = b"".join(a.results.proto_rows_batch.batch_data for a in answers if a.HasField("results"))
    assert len(v2.ProtoRows.FromString(data).values) == 30_000 * 2  # _key and v of each row
    c.close()
