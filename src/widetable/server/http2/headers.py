"""HTTP/2 header blocks (HPACK, RFC 7541) as a gRPC server needs them.

Decoding is complete: indexed fields, literals with and without indexing (and never
indexed), Huffman strings (``hpack``'s decoder), dynamic table size updates up to the
table size this server advertises. It keeps the connection's dynamic table, so a block
that fails to decode is a connection error (``HeaderError``): the table can no longer be
trusted.

Encoding never uses the dynamic table: every header this server sends is an indexed
static entry or a literal without indexing, so the answer's header blocks are constants
(``RESPONSE``) or built by concatenation, and the peer's table size setting is moot.

Why not ``hpack.Decoder``: a gRPC client's request headers are mostly indexed fields of
the dynamic table, and ``hpack``'s decoder spent ~25 µs on such a block here; this one
decodes it in a few and remembers whole blocks (a client repeats them byte for byte)
while its table is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpack.exceptions import HPACKDecodingError
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

STATIC = (None,) + HeaderTable.STATIC_TABLE  # 1-based, RFC 7541 appendix A
TABLE_SIZE = 4096  # the dynamic table size this server allows (SETTINGS_HEADER_TABLE_SIZE)
ENTRY_OVERHEAD = 32
MAX_INTEGER_BYTES = 5  # continuation bytes of an HPACK integer (values up to 2**35)
CACHED_BLOCKS = 256


class HeaderError(Exception):
    """A header block that does not decode (HPACK's COMPRESSION_ERROR)."""


def _integer(data: bytes, i: int, prefix: int) -> tuple[int, int]:
    """The integer with a ``prefix``-bit prefix at ``data[i]`` and the index after it."""
    mask = (1 << prefix) - 1
    try:
        value = data[i] & mask
    except IndexError:
        raise HeaderError("header block ends inside an integer") from None
    i += 1
    if value < mask:
        return value, i
    shift = 0
    for _ in range(MAX_INTEGER_BYTES):
        try:
            b = data[i]
        except IndexError:
            raise HeaderError("header block ends inside an integer") from None
        i += 1
        value += (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
    raise HeaderError("an HPACK integer is too long")


def _string(data: bytes, i: int) -> tuple[bytes, int]:
    try:
        huffman = data[i] & 0x80
    except IndexError:
        raise HeaderError("header block ends before a string") from None
    length, i = _integer(data, i, 7)
    end = i + length
    if end > len(data):
        raise HeaderError("a header string runs past the end of its block")
    raw = data[i:end]
    if huffman:
        try:
            raw = decode_huffman(raw)
        except HPACKDecodingError as exc:
            raise HeaderError(f"bad Huffman string: {exc}") from None
    return bytes(raw), end


class HeaderDecoder:
    """One connection's HPACK decoder (its dynamic table and its block cache)."""

    def __init__(self, max_list_size: int, parse: Callable[[list], Any] = list) -> None:
        """``parse(header list)``: what ``decode`` returns for it; remembered with the
        block, so it must depend on the list alone."""
        self.max_list_size = max_list_size
        self.parse = parse
        self.table: list[tuple[bytes, bytes]] = []  # newest first
        self.size = 0
        self.max_size = TABLE_SIZE
        self._cache: dict[bytes, Any] = {}
        self._changed = False

    def decode(self, block: bytes) -> Any:
        """``parse`` of the header list of ``block``; HeaderError if it does not decode, or
        if the list is over ``max_list_size`` (counted as SETTINGS_MAX_HEADER_LIST_SIZE is)."""
        cached = self._cache.get(block)
        if cached is not None:
            return cached
        self._changed = False
        out = self.parse(self._decode(block))
        if self._changed:  # what the cache holds was decoded against the old table
            self._cache.clear()
        else:
            if len(self._cache) >= CACHED_BLOCKS:
                self._cache.clear()
            self._cache[block] = out
        return out

    def _field(self, index: int) -> tuple[bytes, bytes]:
        if 0 < index < len(STATIC):
            return STATIC[index]
        try:
            if index > 0:
                return self.table[index - len(STATIC)]
        except IndexError:
            pass
        raise HeaderError(f"header index {index} is not in the table")

    def _decode(self, data: bytes) -> list[tuple[bytes, bytes]]:
        out = []
        i, n, total, fields = 0, len(data), 0, False
        while i < n:
            b = data[i]
            if b & 0x80:  # indexed field
                index, i = _integer(data, i, 7)
                field = self._field(index)
            elif b & 0x40:  # literal, added to the table
                field, i = self._literal(data, i, 6)
                self._add(field)
            elif b & 0x20:  # table size update: only before the first field
                if fields:
                    raise HeaderError("a table size update follows a header field")
                size, i = _integer(data, i, 5)
                if size > TABLE_SIZE:
                    raise HeaderError(f"table size {size} is over the {TABLE_SIZE} allowed")
                self.max_size = size
                self._evict()
                self._changed = True
                continue
            else:  # literal without indexing / never indexed
                field, i = self._literal(data, i, 4)
            fields = True
            total += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
            if total > self.max_list_size:
                raise HeaderError(f"the header list is over {self.max_list_size} bytes")
            out.append(field)
        return out

    def _literal(self, data: bytes, i: int, prefix: int) -> tuple[tuple[bytes, bytes], int]:
        index, i = _integer(data, i, prefix)
        if index:
            name = self._field(index)[0]
        else:
            name, i = _string(data, i)
        value, i = _string(data, i)
        return (name, value), i

    def _add(self, field: tuple[bytes, bytes]) -> None:
        self._changed = True
        self.table.insert(0, field)
        self.size += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
        self._evict()

    def _evict(self) -> None:
        while self.size > self.max_size:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + ENTRY_OVERHEAD


# -- encoding: static indexes and literals without indexing --------------------------------

def _encode_integer(value: int, prefix: int, first: int = 0) -> bytes:
    mask = (1 << prefix) - 1
    if value < mask:
        return bytes([first | value])
    out = [first | mask]
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name: bytes, value: bytes) -> bytes:
    """``name: value`` as a literal without indexing, new name, no Huffman coding."""
    return (b"\x00" + _encode_integer(len(name), 7) + name
            + _encode_integer(len(value), 7) + value)


def literal_indexed_name(index: int, value: bytes) -> bytes:
    """A literal without indexing whose name is static entry ``index``."""
    return _encode_integer(index, 4) + _encode_integer(len(value), 7) + value


STATUS_200 = b"\x88"  # static entry 8
CONTENT_TYPE = literal_indexed_name(31, b"application/grpc")  # static 31: content-type
RESPONSE = STATUS_200 + CONTENT_TYPE  # the headers of every gRPC answer


def http_status(code: int) -> bytes:
    """``:status <code>`` (a non-gRPC answer: 415, 405 ...)."""
    return literal_indexed_name(8, str(code).encode())


def grpc_status(code: int, message: str = "") -> bytes:
    """The trailers' ``grpc-status`` and, if any, ``grpc-message`` (percent-encoded)."""
    out = _STATUS.get(code) or literal(b"grpc-status", str(code).encode())
    if message:
        out += literal(b"grpc-message", percent_encode(message))
    return out


_STATUS = {c: literal(b"grpc-status", str(c).encode()) for c in range(17)}
_SAFE = frozenset(range(0x20, 0x7F)) - {ord("%")}


def percent_encode(message: str) -> bytes:
    """gRPC's encoding of a status message: UTF-8, bytes outside printable ASCII and
    ``%`` as ``%XX``."""
    raw = message.encode("utf-8", "replace")
    if all(b in _SAFE for b in raw):
        return raw
    return b"".join(bytes([b]) if b in _SAFE else b"%%%02X" % b for b in raw)


_UNITS = {ord("H"): 3600.0, ord("M"): 60.0, ord("S"): 1.0, ord("m"): 1e-3, ord("u"): 1e-6,
          ord("n"): 1e-9}


def timeout_seconds(value: bytes) -> float | None:
    """A ``grpc-timeout`` (up to 8 digits and a unit: ``2S``, ``2010m``) in seconds;
    None if it is not one."""
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = _UNITS.get(value[-1])
    return None if unit is None else int(value[:-1]) * unit
