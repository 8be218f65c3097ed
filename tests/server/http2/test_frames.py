"""Bad bytes and bad frames on the Bigtable port: each closes its own connection with
the GOAWAY code RFC 9113 names (or resets only its stream), and the server goes on
serving other connections; PING is answered; a header block split over CONTINUATION
frames is served."""

from __future__ import annotations

import socket
import struct

import grpc
import pytest
from hpack import Encoder

from widetable.server.http2 import frames as F

from .conftest import grpc_body, read_rows

HELLO = F.PREFACE + F.settings({})


def _request_headers(path: str = "/google.bigtable.v2.Bigtable/ReadRows", **extra) -> list:
    return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x"),
            ("content-type", "application/grpc"), ("te", "trailers")] + list(extra.items())


def _block(headers) -> bytes:
    return Encoder().encode(headers)


def exchange(host: str, data: bytes, timeout: float = 5.0) -> list[tuple[int, int, int, bytes]]:
    """Send ``data`` on a fresh connection; the frames the server sent until it closed
    (or went quiet): ``[(type, flags, stream, payload)]``."""
    addr, port = host.rsplit(":", 1)
    with socket.create_connection((addr, int(port)), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        try:
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                got += chunk
        except (TimeoutError, socket.timeout, ConnectionResetError):
            pass
    out, i = [], 0
    while len(got) - i >= 9:
        high, low, kind, flags, sid = F.HEADER.unpack_from(got, i)
        n = high << 16 | low
        out.append((kind, flags, sid & 0x7FFFFFFF, got[i + 9:i + 9 + n]))
        i += 9 + n
    return out


def goaway_code(frames) -> int | None:
    codes = [struct.unpack(">II", p[:8])[1] for kind, _, _, p in frames if kind == F.GOAWAY]
    return codes[-1] if codes else None


def _still_serving(host: str) -> None:
    ch = grpc.insecure_channel(host)
    got = list(ch.unary_stream("/google.bigtable.v2.Bigtable/ReadRows", lambda b: b,
                               lambda b: b)(read_rows(b"nothing"), timeout=10))
    assert got == []
    ch.close()


H = _block(_request_headers())
CASES = {
    "not HTTP/2 at all": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", F.PROTOCOL_ERROR),
    "the first frame is not SETTINGS": (F.PREFACE + F.frame(F.PING, 0, 0, b"12345678"),
                                        F.PROTOCOL_ERROR),
    "DATA on stream 0": (HELLO + F.frame(F.DATA, 0, 0, b"x"), F.PROTOCOL_ERROR),
    "HEADERS on an even stream": (HELLO + F.frame(F.HEADERS, F.END_HEADERS, 2, H),
                                  F.PROTOCOL_ERROR),
    "a frame over the size allowed": (HELLO + F.frame_header(F.DATA, 0, 1, 2**20 + 1),
                                      F.FRAME_SIZE_ERROR),
    "an HPACK integer that never ends": (HELLO + F.frame(F.HEADERS, F.END_HEADERS, 1,
                                                         b"\xff" * 12), F.COMPRESSION_ERROR),
    "an HPACK index past the table": (HELLO + F.frame(F.HEADERS, F.END_HEADERS, 1, b"\xbf"),
                                      F.COMPRESSION_ERROR),
    "a table size over the one allowed": (HELLO + F.frame(F.HEADERS, F.END_HEADERS, 1,
                                                          b"\x3f\xe1\x7f" + H),
                                          F.COMPRESSION_ERROR),
    "a PING of 7 bytes": (HELLO + F.frame(F.PING, 0, 0, b"1234567"), F.FRAME_SIZE_ERROR),
    "a WINDOW_UPDATE of 0": (HELLO + F.window_update(0, 0), F.PROTOCOL_ERROR),
    "the connection window overflows": (HELLO + F.window_update(0, 2**31 - 1),
                                        F.FLOW_CONTROL_ERROR),
    "CONTINUATION without HEADERS": (HELLO + F.frame(F.CONTINUATION, F.END_HEADERS, 1, H),
                                     F.PROTOCOL_ERROR),
    "a header block interrupted": (HELLO + F.frame(F.HEADERS, 0, 1, H[:3])
                                   + F.frame(F.PING, 0, 0, b"12345678"), F.PROTOCOL_ERROR),
    "PUSH_PROMISE from a client": (HELLO + F.frame(F.PUSH_PROMISE, F.END_HEADERS, 1,
                                                   b"\x00\x00\x00\x02" + H), F.PROTOCOL_ERROR),
    "SETTINGS of 5 bytes": (F.PREFACE + F.frame(F.SETTINGS, 0, 0, b"\x00\x04\x00\x00\x00"),
                            F.FRAME_SIZE_ERROR),
    "an initial window over 2**31-1": (F.PREFACE + F.settings({F.INITIAL_WINDOW_SIZE: 2**31}),
                                       F.FLOW_CONTROL_ERROR),
    "a max frame size under 16384": (F.PREFACE + F.settings({F.MAX_FRAME_SIZE: 100}),
                                     F.PROTOCOL_ERROR),
    "DATA on an idle stream": (HELLO + F.frame(F.DATA, 0, 5, b"x"), F.PROTOCOL_ERROR),
    "RST_STREAM on an idle stream": (HELLO + F.rst_stream(7, F.CANCEL), F.PROTOCOL_ERROR),
    "padding past the frame": (HELLO + F.frame(F.HEADERS, F.END_HEADERS | F.PADDED, 1,
                                               b"\x40" + H), F.PROTOCOL_ERROR),
    "SETTINGS on a stream": (HELLO + F.frame(F.SETTINGS, 0, 1, b""), F.PROTOCOL_ERROR),
    "HEADERS again on a closed stream": (
        HELLO + F.frame(F.HEADERS, F.END_HEADERS | F.END_STREAM, 3, H)
        + F.frame(F.HEADERS, F.END_HEADERS | F.END_STREAM, 1, b"\x82\x86\x84"),
        F.STREAM_CLOSED),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_protocol_error_closes_its_connection_only(served, case):
    data, code = CASES[case]
    frames = exchange(served.host, data)
    assert goaway_code(frames) == code, frames
    _still_serving(served.host)


def test_garbage_after_the_preface_closes_the_connection(served):
    import random

    rng = random.Random(5)
    for _ in range(20):
        frames = exchange(served.host, HELLO + bytes(rng.randrange(256) for _ in range(300)),
                          timeout=2)
        assert all(kind in (F.SETTINGS, F.WINDOW_UPDATE, F.GOAWAY, F.RST_STREAM, F.HEADERS,
                            F.PING, F.DATA) for kind, *_ in frames)
    _still_serving(served.host)


def test_ping_is_answered_with_its_payload(served):
    frames = exchange(served.host, HELLO + F.frame(F.PING, 0, 0, b"abcdefgh"), timeout=1)
    assert (F.PING, F.ACK, 0, b"abcdefgh") in frames
    assert goaway_code(frames) is None  # and the connection stays open


def _call(headers, body=grpc_body(read_rows(b"k")), split: int = 0) -> bytes:
    block = _block(headers)
    if split:
        head = F.frame(F.HEADERS, 0, 1, block[:split])
        head += F.frame(F.CONTINUATION, 0, 1, block[split:split + 5])
        head += F.frame(F.CONTINUATION, F.END_HEADERS, 1, block[split + 5:])
    else:
        head = F.frame(F.HEADERS, F.END_HEADERS, 1, block)
    return HELLO + head + F.frame(F.DATA, F.END_STREAM, 1, body)


def _trailers(frames) -> bytes:
    return b"".join(p for kind, _, sid, p in frames if kind == F.HEADERS and sid == 1)


def test_a_header_block_over_continuation_frames_is_served(served):
    frames = exchange(served.host, _call(_request_headers(), split=10), timeout=1)
    assert goaway_code(frames) is None
    assert b"grpc-status\x010" in _trailers(frames)


@pytest.mark.parametrize("headers,expect", [
    ([(":method", "POST"), (":path", "/x")], "rst"),  # no :scheme
    (_request_headers() + [("Upper", "x")], "rst"),
    (_request_headers() + [("connection", "close")], "rst"),
    (_request_headers()[:2] + [("x-a", "b")] + _request_headers()[2:], "rst"),  # pseudo late
    ([(k, "text/plain" if k == "content-type" else v) for k, v in _request_headers()], b"415"),
    ([(k, "GET" if k == ":method" else v) for k, v in _request_headers()], b"405"),
])
def test_a_malformed_request_resets_its_stream_not_the_connection(served, headers, expect):
    frames = exchange(served.host, _call(headers), timeout=1)
    assert goaway_code(frames) is None
    if expect == "rst":
        assert (F.RST_STREAM, 0, 1, struct.pack(">I", F.PROTOCOL_ERROR)) in frames
    else:
        assert expect in _trailers(frames)
    _still_serving(served.host)


def test_an_unknown_method_and_a_bad_message_get_grpc_statuses(served):
    frames = exchange(served.host, _call(_request_headers("/no.Such/Method")), timeout=1)
    assert b"grpc-status\x0212" in _trailers(frames)
    frames = exchange(served.host, _call(_request_headers(), body=b"\x00\x00\x00\x00\x09abc"),
                      timeout=1)
    assert b"grpc-status\x0213" in _trailers(frames)  # INTERNAL: a truncated message
    frames = exchange(served.host, _call(_request_headers(), body=b"\x01\x00\x00\x00\x01a"),
                      timeout=1)
    assert b"grpc-status\x0212" in _trailers(frames)  # a compressed message: unsupported
