"""HTTP/2 frames (RFC 9113 §4, §6): the numbers, and the frames a server sends.

A frame is a 9-byte header -- length (24 bits), type, flags, a reserved bit and the
stream id (31 bits) -- then ``length`` bytes of payload.
"""

from __future__ import annotations

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADER = struct.Struct(">BHBBI")  # length's high byte, its low 16 bits, type, flags, stream
_U32 = struct.Struct(">I")
_SETTING = struct.Struct(">HI")

# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
# flags
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# error codes
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, \
    FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, \
    ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, HTTP_1_1_REQUIRED = range(14)

# settings
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)

DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
MAX_WINDOW = 2**31 - 1
MAX_FRAME_LIMIT = 2**24 - 1


class ConnectionError(Exception):  # noqa: A001 - HTTP/2's own term, never the builtin here
    """A connection error: the connection is answered GOAWAY ``code`` and closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def frame_header(kind: int, flags: int, stream: int, length: int) -> bytes:
    return HEADER.pack(length >> 16, length & 0xFFFF, kind, flags, stream)


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload) >> 16, len(payload) & 0xFFFF, kind, flags, stream) + payload


def settings(values: dict[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(_SETTING.pack(k, v) for k, v in values.items()))


def parse_settings(payload: bytes) -> list[tuple[int, int]]:
    return [_SETTING.unpack_from(payload, i) for i in range(0, len(payload), 6)]


SETTINGS_ACK = frame(SETTINGS, ACK, 0)


def window_update(stream: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream, _U32.pack(increment))


def rst_stream(stream: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream, _U32.pack(code))


def goaway(last_stream: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, _U32.pack(last_stream) + _U32.pack(code) + debug[:256])


def u32(payload: bytes, offset: int = 0) -> int:
    """The 31-bit value at ``offset`` (its reserved top bit dropped)."""
    return _U32.unpack_from(payload, offset)[0] & 0x7FFFFFFF


def code_of(payload: bytes, offset: int = 0) -> int:
    return _U32.unpack_from(payload, offset)[0]
