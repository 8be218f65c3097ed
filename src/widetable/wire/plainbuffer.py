"""PlainBuffer: Tablestore's row encoding inside protobuf ``bytes`` fields, both directions.

Grammar (integers little-endian; ``crc`` is one CRC-8 byte, polynomial 0x07)::

    buffer     = header rows                       header = u32 0x75
    rows       = row*                              (GetRange: many; elsewhere: one)
    row        = TAG_ROW_PK pk_cell* [TAG_ROW_DATA cell*] [TAG_DELETE_ROW_MARKER]
                 [extension] TAG_ROW_CHECKSUM crc
    pk_cell    = TAG_CELL name TAG_CELL_VALUE value TAG_CELL_CHECKSUM crc
    cell       = TAG_CELL name [TAG_CELL_VALUE value] [TAG_CELL_TYPE op:u8]
                 [TAG_CELL_TIMESTAMP i64] TAG_CELL_CHECKSUM crc
    name       = TAG_CELL_NAME u32:len bytes
    value      = u32:len(rest) type:u8 payload     payload by type:
                 INTEGER i64 | DOUBLE f64 | BOOLEAN u8 | STRING, BLOB u32:len bytes
                 | INF_MIN, INF_MAX, AUTO_INCREMENT (nothing)
    extension  = TAG_EXTENSION u32:len(rest) ext_item*    (stream records: GetStreamRecord)
    ext_item   = TAG_SEQ_INFO u32:19 TAG_SEQ_INFO_EPOCH epoch:u32 TAG_SEQ_INFO_TS ts:i64
                 TAG_SEQ_INFO_ROW_INDEX row_index:u32
               | tag u32:len bytes                       (any other tag: skipped)

    tags: ROW_PK 1, ROW_DATA 2, CELL 3, CELL_NAME 4, CELL_VALUE 5, CELL_TYPE 6,
          CELL_TIMESTAMP 7, DELETE_ROW_MARKER 8, ROW_CHECKSUM 9, CELL_CHECKSUM 10,
          EXTENSION 11, SEQ_INFO 12, SEQ_INFO_EPOCH 13, SEQ_INFO_TS 14, SEQ_INFO_ROW_INDEX 15
    types: INTEGER 0, DOUBLE 1, BOOLEAN 2, STRING 3, BLOB 7, INF_MIN 9, INF_MAX 10,
           AUTO_INCREMENT 11
    cell ops (update rows): DELETE_ALL_VERSION 1, DELETE_ONE_VERSION 3, INCREMENT 4

Checksums: a cell's crc runs over its name bytes, then its value (type byte,
then the i64 / f64 bits as i64 / bool byte / u32 length and bytes), then its
timestamp (i64), then its op byte, in that order whatever the wire order. A
row's crc runs over each cell's crc, then one byte: 1 with a delete marker, else 0;
the extension is outside every checksum (the SDKs compute the row's crc from the
cells and the marker alone).

A stream record's extension carries its sequence info ``(epoch, timestamp,
row_index)``, which orders the records of a shard (``streams.py`` fills it).

DO NOT CHANGE: this is Tablestore's wire format; the official SDKs speak it.
The decoder checks every length and checksum and raises ``OTSParameterInvalid``
with the offset of the fault; it never reads past the buffer.

This module is the general coder and the reference. Rows that repeat one shape
(the same names, types and value lengths: a batch from one schema) are written
and read by ``rowshape`` in a few C calls per row; what it declines comes here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

import fastcrc

from ..errors import InvalidPK, ParameterInvalid, WidetableError, describe
from ..keys.codec import INF_MAX, INF_MIN
from ..table.schema import AUTO_INCREMENT

HEADER = 0x75
TAG_ROW_PK, TAG_ROW_DATA, TAG_CELL, TAG_CELL_NAME, TAG_CELL_VALUE = 1, 2, 3, 4, 5
TAG_CELL_TYPE, TAG_CELL_TIMESTAMP, TAG_DELETE_ROW_MARKER = 6, 7, 8
TAG_ROW_CHECKSUM, TAG_CELL_CHECKSUM = 9, 10
TAG_EXTENSION, TAG_SEQ_INFO, TAG_SEQ_INFO_EPOCH, TAG_SEQ_INFO_TS, TAG_SEQ_INFO_ROW_INDEX = (
    11, 12, 13, 14, 15)
SEQ_INFO_LENGTH = 1 + 4 + 1 + 8 + 1 + 4  # what follows a TAG_SEQ_INFO's length
VT_INTEGER, VT_DOUBLE, VT_BOOLEAN, VT_STRING, VT_BLOB = 0, 1, 2, 3, 7
VT_INF_MIN, VT_INF_MAX, VT_AUTO_INCREMENT = 9, 10, 11
DELETE_ALL_VERSION, DELETE_ONE_VERSION, INCREMENT = 1, 3, 4
OPS = (DELETE_ALL_VERSION, DELETE_ONE_VERSION, INCREMENT)

_CRC8 = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = ((_c << 1) ^ 0x07) & 0xFF if _c & 0x80 else (_c << 1) & 0xFF
    _CRC8.append(_c)
CRC8_TABLE: tuple[int, ...] = tuple(_CRC8)
del _CRC8

_I32, _I64, _F64 = struct.Struct("<i"), struct.Struct("<q"), struct.Struct("<d")
_U32 = struct.Struct("<I")
HEADER_BYTES = _U32.pack(HEADER)


# CRC-8/SMBUS (poly 0x07, init 0, no reflection, no xor-out), compiled: ``_crc(data, crc)``.
# fastcrc's call costs ~0.1 us (a Python loop: ~0.2 us per byte); the codec calls it on
# short pieces (names, values), per cell. tests/server/test_codec_fast.py checks it bit
# for bit against the table above.
_crc = fastcrc.crc8.smbus


def crc8(crc: int, data: bytes) -> int:
    """Extend ``crc`` over ``data``."""
    return _crc(data, crc)


class PlainBufferError(ParameterInvalid):
    """A malformed PlainBuffer: bad tag, length, type or checksum."""


@dataclass(slots=True)
class Cell:
    """One attribute cell of a row: a value (None for deletes), an op and a timestamp."""

    name: str
    value: object = None
    op: int | None = None
    timestamp: int | None = None


class SeqInfo(NamedTuple):
    """A stream record's sequence info, in its row's extension: ``epoch`` and
    ``row_index`` are u32, ``timestamp`` (microseconds) i64."""

    epoch: int
    timestamp: int
    row_index: int


@dataclass(slots=True)
class PlainRow:
    primary_key: list[tuple[str, object]]
    cells: list[Cell] = field(default_factory=list)
    delete_marker: bool = False
    sequence: SeqInfo | None = None  # in a row extension (stream records)


# -- encoding -------------------------------------------------------------------


def _value_bytes(value: object, pk: bool) -> tuple[bytes, bytes]:
    """``(wire bytes after TAG_CELL_VALUE, bytes the checksum covers)``."""
    if value is INF_MIN or value is INF_MAX or value is AUTO_INCREMENT:
        vt = VT_INF_MIN if value is INF_MIN else VT_INF_MAX if value is INF_MAX else VT_AUTO_INCREMENT
        return b"\x01\x00\x00\x00" + bytes((vt,)), bytes((vt,))
    t = type(value)
    if t is bool:
        body = bytes((VT_BOOLEAN, 1 if value else 0))
    elif t is int:
        if not -(2**63) <= value < 2**63:  # type: ignore[operator]
            raise ParameterInvalid(f"integer {value} is outside int64")
        body = bytes((VT_INTEGER,)) + _I64.pack(value)  # type: ignore[arg-type]
    elif t is float:
        body = bytes((VT_DOUBLE,)) + _F64.pack(value)  # type: ignore[arg-type]
    elif t is str:
        raw = _utf8(value)  # type: ignore[arg-type]
        body = bytes((VT_STRING,)) + _U32.pack(len(raw)) + raw
    elif t in (bytes, bytearray, memoryview):
        raw = bytes(value)  # type: ignore[arg-type]
        body = bytes((VT_BLOB,)) + _U32.pack(len(raw)) + raw
    else:
        raise ParameterInvalid(f"PlainBuffer cannot encode a value of type {t.__name__}")
    return _U32.pack(len(body)) + body, body


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8. A str that is not Unicode text (a lone surrogate) cannot travel:
    refused as the store refuses it, where ``str.encode`` would raise UnicodeEncodeError
    out of the client."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParameterInvalid(f"value {describe(text)} is not valid Unicode text") from None


def _refused(name: str, message: str, pk: bool) -> WidetableError:
    """The error for a cell the encoder cannot write: OTSInvalidPK for a key column, as the
    store names a bad key, else OTSParameterInvalid."""
    return (InvalidPK if pk else ParameterInvalid)(f"column {name!r}: {message}")


def encode_value(value: object) -> bytes:
    """A bare value (type byte + payload): what a filter's ``column_value`` carries."""
    return _value_bytes(value, False)[1]


_NAME_HEADS: dict[str, tuple[bytes, int]] = {}  # name -> (TAG_CELL .. name bytes, crc of name)
_NAME_CACHE_MAX = 4096
_VALUE_HEAD = struct.Struct("<BI")  # TAG_CELL_VALUE, length of the rest
_LEN_HEAD = struct.Struct("<BI")  # type byte, payload length (STRING, BLOB)


def _name_head(name: str) -> tuple[bytes, int]:
    hit = _NAME_HEADS.get(name) if type(name) is str else None
    if hit is None:
        if not isinstance(name, str):
            raise ParameterInvalid(f"column name {describe(name)} must be a string")
        try:
            raw = name.encode("utf-8")
        except UnicodeEncodeError:
            raise ParameterInvalid(
                f"column name {describe(name)} is not valid Unicode text") from None
        hit = (bytes((TAG_CELL, TAG_CELL_NAME)) + _U32.pack(len(raw)) + raw, _crc(raw, 0))
        if type(name) is str and len(_NAME_HEADS) < _NAME_CACHE_MAX:
            _NAME_HEADS[name] = hit
    return hit


def _encode_cell(out: bytearray, name: str, value: object, op: int | None, ts: int | None,
                 pk: bool) -> int:
    head, crc = _name_head(name)
    out += head
    t = type(value)
    if t is bytes or t is str:  # the common cases, without building intermediate buffers
        if t is bytes:
            raw = value
        else:
            try:
                raw = value.encode("utf-8")  # type: ignore[union-attr]
            except UnicodeEncodeError:  # a lone surrogate: refused as the store refuses it
                raise _refused(name, f"value {describe(value)} is not valid Unicode text",
                               pk) from None
        n = len(raw)
        covered = _LEN_HEAD.pack(VT_BLOB if t is bytes else VT_STRING, n)
        out += _VALUE_HEAD.pack(TAG_CELL_VALUE, n + 5)
        out += covered
        out += raw
        crc = _crc(raw, _crc(covered, crc))
    elif value is not None or pk:
        try:
            wire, covered = _value_bytes(value, pk)
        except ParameterInvalid as exc:
            raise _refused(name, exc.message, pk) from None
        out.append(TAG_CELL_VALUE)
        out += wire
        crc = _crc(covered, crc)
    if op is not None:
        out += bytes((TAG_CELL_TYPE, op))
    if ts is not None:
        if type(ts) is not int or not -(2**63) <= ts < 2**63:
            raise ParameterInvalid(f"timestamp {ts!r} of column {name!r} must be an int64")
        stamp = _I64.pack(ts)
        out.append(TAG_CELL_TIMESTAMP)
        out += stamp
        crc = _crc(stamp, crc)
    if op is not None:
        crc = CRC8_TABLE[crc ^ op]
    out += bytes((TAG_CELL_CHECKSUM, crc))
    return crc


def _encode_row(out: bytearray, row: PlainRow) -> None:
    out.append(TAG_ROW_PK)
    row_crc = 0
    table = CRC8_TABLE
    for name, value in row.primary_key:
        row_crc = table[row_crc ^ _encode_cell(out, name, value, None, None, True)]
    if row.cells:
        out.append(TAG_ROW_DATA)
        for c in row.cells:
            row_crc = table[row_crc ^ _encode_cell(out, c.name, c.value, c.op, c.timestamp, False)]
    if row.delete_marker:
        out.append(TAG_DELETE_ROW_MARKER)
    row_crc = table[row_crc ^ (1 if row.delete_marker else 0)]
    if row.sequence is not None:
        out += _extension(row.sequence)
    out += bytes((TAG_ROW_CHECKSUM, row_crc))


_SEQ_INFO = struct.Struct("<BIBIBqBI")  # TAG_SEQ_INFO len TAG_EPOCH u32 TAG_TS i64 TAG_INDEX u32
_EXTENSION_HEAD = struct.Struct("<BI")  # TAG_EXTENSION, length of the rest


def _extension(seq: SeqInfo) -> bytes:
    """A row extension holding ``seq`` (outside the row's checksum)."""
    epoch, ts, index = seq if isinstance(seq, tuple) and len(seq) == 3 else (None, None, None)
    if not (type(epoch) is int and 0 <= epoch < 2**32 and type(index) is int
            and 0 <= index < 2**32 and type(ts) is int and -(2**63) <= ts < 2**63):
        raise ParameterInvalid(f"sequence info {seq!r}: epoch and row_index must be u32, "
                               "timestamp an int64")
    body = _SEQ_INFO.pack(TAG_SEQ_INFO, SEQ_INFO_LENGTH, TAG_SEQ_INFO_EPOCH, epoch,
                          TAG_SEQ_INFO_TS, ts, TAG_SEQ_INFO_ROW_INDEX, index)
    return _EXTENSION_HEAD.pack(TAG_EXTENSION, len(body)) + body


def encode_rows(rows: list[PlainRow]) -> bytes:
    """A header and every row: GetRange's ``rows``. No rows gives an empty buffer."""
    if not rows:
        return b""
    out = bytearray(_U32.pack(HEADER))
    for row in rows:
        _encode_row(out, row)
    return bytes(out)


def encode_row(row: PlainRow) -> bytes:
    """One row with its header."""
    out = bytearray(_U32.pack(HEADER))
    _encode_row(out, row)
    return bytes(out)


def encode_primary_key(primary_key: list[tuple[str, object]]) -> bytes:
    return encode_row(PlainRow(primary_key))


# -- decoding -------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)

    def fail(self, what: str) -> PlainBufferError:
        return PlainBufferError(f"malformed PlainBuffer at byte {self.pos}: {what}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"{n} bytes needed, {self.end - self.pos} left")
        chunk = self.buf[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end of buffer")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def peek(self) -> int | None:
        return self.buf[self.pos] if self.pos < self.end else None

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def expect(self, tag: int, what: str) -> None:
        got = self.byte()
        if got != tag:
            self.pos -= 1
            raise self.fail(f"expected {what} (tag {tag}), found tag {got}")


def _read_name(r: _Reader) -> tuple[str, bytes]:
    r.expect(TAG_CELL_NAME, "a cell name")
    n = r.u32()
    raw = r.take(n)
    try:
        return raw.decode("utf-8"), raw
    except UnicodeDecodeError:
        raise r.fail(f"cell name {raw[:40]!r} is not UTF-8") from None


def _read_value(r: _Reader) -> tuple[object, bytes]:
    total = r.u32()
    start = r.pos
    vt = r.byte()
    if vt in (VT_INF_MIN, VT_INF_MAX, VT_AUTO_INCREMENT):
        value: object = INF_MIN if vt == VT_INF_MIN else INF_MAX if vt == VT_INF_MAX else AUTO_INCREMENT
    elif vt == VT_INTEGER:
        value = _I64.unpack(r.take(8))[0]
    elif vt == VT_DOUBLE:
        value = _F64.unpack(r.take(8))[0]
    elif vt == VT_BOOLEAN:
        b = r.byte()
        if b > 1:
            raise r.fail(f"boolean byte {b} is neither 0 nor 1")
        value = bool(b)
    elif vt in (VT_STRING, VT_BLOB):
        raw = r.take(r.u32())
        if vt == VT_BLOB:
            value = raw
        else:
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise r.fail("STRING value is not UTF-8") from None
    else:
        raise r.fail(f"unknown value type {vt}")
    if r.pos - start != total:
        raise r.fail(f"value length says {total} bytes, its type takes {r.pos - start}")
    return value, r.buf[start:r.pos]


def _read_crc(r: _Reader, tag: int, computed: int, what: str) -> None:
    r.expect(tag, f"the checksum of {what}")
    got = r.byte()
    if got != computed:
        raise r.fail(f"checksum of {what} is {got}, computed {computed}")


def _read_cell(r: _Reader, pk: bool) -> tuple[str, object, int | None, int | None, int]:
    r.expect(TAG_CELL, "a cell")
    name, raw = _read_name(r)
    crc = _crc(raw, 0)
    value: object = None
    op = ts = None
    if r.peek() == TAG_CELL_VALUE:
        r.pos += 1
        value, covered = _read_value(r)
        crc = _crc(covered, crc)
    elif pk:
        raise r.fail(f"primary-key cell {name!r} has no value")
    if not pk and r.peek() == TAG_CELL_TYPE:
        r.pos += 1
        op = r.byte()
        if op not in OPS:
            raise r.fail(f"unknown cell operation {op} on {name!r}")
    if not pk and r.peek() == TAG_CELL_TIMESTAMP:
        r.pos += 1
        raw_ts = r.take(8)
        ts = _I64.unpack(raw_ts)[0]
        crc = _crc(raw_ts, crc)
    if op is not None:
        crc = CRC8_TABLE[crc ^ op]
    _read_crc(r, TAG_CELL_CHECKSUM, crc, f"cell {name!r}")
    return name, value, op, ts, crc


def _read_row(r: _Reader) -> PlainRow:
    r.expect(TAG_ROW_PK, "a row's primary key")
    row = PlainRow([])
    row_crc = 0
    while r.peek() == TAG_CELL:
        name, value, _, _, crc = _read_cell(r, True)
        row.primary_key.append((name, value))
        row_crc = CRC8_TABLE[row_crc ^ crc]
    if r.peek() == TAG_ROW_DATA:
        r.pos += 1
        while r.peek() == TAG_CELL:
            name, value, op, ts, crc = _read_cell(r, False)
            row.cells.append(Cell(name, value, op, ts))
            row_crc = CRC8_TABLE[row_crc ^ crc]
    if r.peek() == TAG_DELETE_ROW_MARKER:
        r.pos += 1
        row.delete_marker = True
    row_crc = CRC8_TABLE[row_crc ^ (1 if row.delete_marker else 0)]
    if r.peek() == TAG_EXTENSION:
        r.pos += 1
        row.sequence = _read_extension(r)
    _read_crc(r, TAG_ROW_CHECKSUM, row_crc, "the row")
    return row


def _read_extension(r: _Reader) -> SeqInfo | None:
    """The sequence info in a row extension (after its tag), if it holds one; items
    of other tags are skipped by their length."""
    total = r.u32()
    end = r.pos + total
    if end > r.end:
        raise r.fail(f"row extension length says {total} bytes, {r.end - r.pos} left")
    seq = None
    while r.pos < end:
        tag = r.byte()
        length = r.u32()
        start = r.pos
        if start + length > end:
            raise r.fail(f"extension item (tag {tag}) of {length} bytes overruns its extension")
        if tag != TAG_SEQ_INFO:
            r.pos += length
            continue
        if seq is not None:
            raise r.fail("a row extension holds two sequence infos")
        if length != SEQ_INFO_LENGTH:
            raise r.fail(f"sequence info length is {length}, not {SEQ_INFO_LENGTH}")
        r.expect(TAG_SEQ_INFO_EPOCH, "the sequence info's epoch")
        epoch = r.u32()
        r.expect(TAG_SEQ_INFO_TS, "the sequence info's timestamp")
        ts = _I64.unpack(r.take(8))[0]
        r.expect(TAG_SEQ_INFO_ROW_INDEX, "the sequence info's row index")
        seq = SeqInfo(epoch, ts, r.u32())
    if r.pos != end:
        taken = r.pos - (end - total)
        raise r.fail(f"row extension length says {total} bytes, its items take {taken}")
    return seq


def _reader(buf: bytes) -> _Reader:
    r = _Reader(buf)
    if r.end < 4 or _U32.unpack(r.take(4))[0] != HEADER:
        raise PlainBufferError("malformed PlainBuffer: it does not start with the header 0x75")
    return r


# -- fast decoding ----------------------------------------------------------------
#
# The decoder above reads through small methods and says exactly where a buffer is
# wrong. The one below does the same checks inline, and on anything unexpected
# gives up (_Slow, or the IndexError / struct.error of reading past the end); the
# careful decoder then runs on the same buffer and raises its precise error.


class _Slow(Exception):
    pass


_BAIL = (_Slow, IndexError, struct.error, UnicodeDecodeError)
_NAMES: dict[bytes, tuple[str, int]] = {}  # name bytes -> (name, crc of name)
_u32_at = _U32.unpack_from
_i64_at = _I64.unpack_from
_f64_at = _F64.unpack_from


def _fast_cell(buf: bytes, pos: int, end: int, pk: bool) -> tuple:
    """``(name, value, op, ts, crc, next pos)`` of the cell at ``buf[pos]`` (TAG_CELL)."""
    if buf[pos + 1] != TAG_CELL_NAME:
        raise _Slow
    start = pos + 6
    pos = start + _u32_at(buf, pos + 2)[0]
    if pos > end:
        raise _Slow
    raw = buf[start:pos]
    hit = _NAMES.get(raw)
    if hit is None:
        hit = (raw.decode("utf-8"), _crc(raw, 0))
        if len(_NAMES) < _NAME_CACHE_MAX:
            _NAMES[raw] = hit
    name, crc = hit
    value: object = None
    op = ts = None
    tag = buf[pos]
    if tag == TAG_CELL_VALUE:
        total = _u32_at(buf, pos + 1)[0]
        start = pos + 5
        pos = start + total
        if pos > end or total == 0:
            raise _Slow
        vt = buf[start]
        if vt == VT_BLOB or vt == VT_STRING:
            if total != _u32_at(buf, start + 1)[0] + 5:
                raise _Slow
            value = buf[start + 5:pos]
            if vt == VT_STRING:
                value = value.decode("utf-8")  # type: ignore[union-attr]
        elif vt == VT_INTEGER:
            if total != 9:
                raise _Slow
            value = _i64_at(buf, start + 1)[0]
        elif vt == VT_DOUBLE:
            if total != 9:
                raise _Slow
            value = _f64_at(buf, start + 1)[0]
        elif vt == VT_BOOLEAN:
            if total != 2 or buf[start + 1] > 1:
                raise _Slow
            value = buf[start + 1] == 1
        elif vt == VT_INF_MIN or vt == VT_INF_MAX or vt == VT_AUTO_INCREMENT:
            if total != 1:
                raise _Slow
            value = INF_MIN if vt == VT_INF_MIN else INF_MAX if vt == VT_INF_MAX else AUTO_INCREMENT
        else:
            raise _Slow
        crc = _crc(buf[start:pos], crc)
        tag = buf[pos]
    elif pk:
        raise _Slow
    if not pk:
        if tag == TAG_CELL_TYPE:
            op = buf[pos + 1]
            if op not in OPS:
                raise _Slow
            pos += 2
            tag = buf[pos]
        if tag == TAG_CELL_TIMESTAMP:
            if pos + 9 > end:
                raise _Slow
            ts = _i64_at(buf, pos + 1)[0]
            crc = _crc(buf[pos + 1:pos + 9], crc)
            pos += 9
            tag = buf[pos]
        if op is not None:
            crc = CRC8_TABLE[crc ^ op]
    if tag != TAG_CELL_CHECKSUM or buf[pos + 1] != crc:
        raise _Slow
    return name, value, op, ts, crc, pos + 2


def _fast_rows(buf: bytes, one: bool) -> list[PlainRow]:
    end = len(buf)
    if buf[:4] != HEADER_BYTES:
        raise _Slow
    pos = 4
    table = CRC8_TABLE
    rows: list[PlainRow] = []
    while pos < end:
        if buf[pos] != TAG_ROW_PK:
            raise _Slow
        pos += 1
        pk: list[tuple[str, object]] = []
        cells: list[Cell] = []
        row_crc = 0
        while pos < end and buf[pos] == TAG_CELL:
            name, value, _, _, crc, pos = _fast_cell(buf, pos, end, True)
            pk.append((name, value))
            row_crc = table[row_crc ^ crc]
        if pos < end and buf[pos] == TAG_ROW_DATA:
            pos += 1
            while pos < end and buf[pos] == TAG_CELL:
                name, value, op, ts, crc, pos = _fast_cell(buf, pos, end, False)
                cells.append(Cell(name, value, op, ts))
                row_crc = table[row_crc ^ crc]
        marker = pos < end and buf[pos] == TAG_DELETE_ROW_MARKER
        if marker:
            pos += 1
        row_crc = table[row_crc ^ (1 if marker else 0)]
        # A row extension (TAG_EXTENSION) is no TAG_ROW_CHECKSUM: the careful decoder reads it.
        if buf[pos] != TAG_ROW_CHECKSUM or buf[pos + 1] != row_crc:
            raise _Slow
        pos += 2
        rows.append(PlainRow(pk, cells, marker))
        if one:
            break
    if pos != end or not rows:
        raise _Slow
    return rows


def decode_rows(buf: bytes) -> list[PlainRow]:
    """Every row of a buffer; an empty buffer holds none."""
    if not buf:
        return []
    buf = bytes(buf)
    try:
        return _fast_rows(buf, False)
    except _BAIL:
        pass
    r = _reader(buf)
    rows = []
    while r.pos < r.end:
        rows.append(_read_row(r))
    return rows


def decode_row(buf: bytes) -> PlainRow:
    """The one row of a buffer; anything after it is an error."""
    buf = bytes(buf)
    try:
        return _fast_rows(buf, True)[0]
    except _BAIL:
        pass
    r = _reader(buf)
    row = _read_row(r)
    if r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} bytes after the row")
    return row


def decode_value(buf: bytes) -> object:
    """A bare value (type byte + payload), as a filter's ``column_value`` carries."""
    r = _Reader(_U32.pack(len(buf)) + bytes(buf))
    value, _ = _read_value(r)
    if r.pos != r.end:
        raise r.fail("bytes after the value")
    return value


__all__ = [
    "Cell", "PlainBufferError", "PlainRow", "SeqInfo", "crc8", "decode_row", "decode_rows",
    "decode_value", "encode_primary_key", "encode_row", "encode_rows", "encode_value",
]
