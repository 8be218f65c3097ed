"""PlainBuffer, the fuzzer's own reader and writer, for mutating rows by their structure.

Written from the format's definition (Tablestore's row encoding; its grammar
is at the top of widetable's own coder), not from widetable's code: a mutated
row is read into cells, changed, and written back with checksums that are
right (so the change reaches the decoder's checks behind the checksum) or
deliberately wrong. Integers are little-endian; checksums are CRC-8, polynomial
0x07, a cell's over its name, value (type byte and payload), timestamp and op
byte, a row's over its cells' checksums and one delete-marker byte.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import fastcrc

HEADER = 0x75
ROW_PK, ROW_DATA, CELL, CELL_NAME, CELL_VALUE, CELL_TYPE, CELL_TS = 1, 2, 3, 4, 5, 6, 7
DELETE_MARKER, ROW_CHECKSUM, CELL_CHECKSUM = 8, 9, 10
INTEGER, DOUBLE, BOOLEAN, STRING, BLOB, INF_MIN, INF_MAX, AUTO_INC = 0, 1, 2, 3, 7, 9, 10, 11
TYPES = (INTEGER, DOUBLE, BOOLEAN, STRING, BLOB, INF_MIN, INF_MAX, AUTO_INC)


def _table() -> list[int]:
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ 0x07) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        out.append(c)
    return out


_CRC = _table()


def crc8(crc: int, data: bytes) -> int:
    if len(data) > 64:  # megabyte values: fastcrc (CRC-8/SMBUS: this polynomial, init 0)
        return fastcrc.crc8.smbus(data, initial=crc)
    for b in data:
        crc = _CRC[crc ^ b]
    return crc


@dataclass(slots=True)
class Cell:
    name: bytes
    vtype: int | None = None  # None: no value (a delete cell)
    payload: bytes = b""  # what follows the type byte
    op: int | None = None
    ts: int | None = None
    vlen: int | None = None  # the value's declared length, if not 1 + len(payload)
    crc: int | None = None  # a checksum to write instead of the right one

    def checksum(self) -> int:
        c = crc8(0, self.name)
        if self.vtype is not None:
            c = crc8(c, bytes((self.vtype & 0xFF,)) + self.payload)
        if self.ts is not None:
            c = crc8(c, struct.pack("<q", self.ts))
        if self.op is not None:
            c = crc8(c, bytes((self.op & 0xFF,)))
        return c


@dataclass(slots=True)
class Row:
    pk: list[Cell] = field(default_factory=list)
    data: list[Cell] | None = None
    delete: bool = False
    crc: int | None = None


def _encode_cell(cell: Cell, out: bytearray) -> int:
    out.append(CELL)
    out.append(CELL_NAME)
    out += struct.pack("<I", len(cell.name) & 0xFFFFFFFF) + cell.name
    if cell.vtype is not None:
        vlen = 1 + len(cell.payload) if cell.vlen is None else cell.vlen
        out.append(CELL_VALUE)
        out += struct.pack("<I", vlen & 0xFFFFFFFF) + bytes((cell.vtype & 0xFF,)) + cell.payload
    if cell.op is not None:
        out += bytes((CELL_TYPE, cell.op & 0xFF))
    if cell.ts is not None:
        out.append(CELL_TS)
        out += struct.pack("<q", cell.ts)
    crc = cell.checksum()
    out += bytes((CELL_CHECKSUM, (crc if cell.crc is None else cell.crc) & 0xFF))
    return crc


def row_checksum(row: Row) -> int:
    """The right checksum of ``row``, with its cells' right checksums."""
    crc = 0
    for cell in row.pk + (row.data or []):
        crc = _CRC[crc ^ cell.checksum()]
    return _CRC[crc ^ (1 if row.delete else 0)]


def encode(rows: list[Row], header: int = HEADER) -> bytes:
    out = bytearray(struct.pack("<I", header & 0xFFFFFFFF))
    for row in rows:
        crc = 0
        out.append(ROW_PK)
        for cell in row.pk:
            crc = _CRC[crc ^ _encode_cell(cell, out)]
        if row.data is not None:
            out.append(ROW_DATA)
            for cell in row.data:
                crc = _CRC[crc ^ _encode_cell(cell, out)]
        if row.delete:
            out.append(DELETE_MARKER)
        crc = _CRC[crc ^ (1 if row.delete else 0)]
        out += bytes((ROW_CHECKSUM, (crc if row.crc is None else row.crc) & 0xFF))
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("short")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]


def _read_cell(r: _Reader) -> Cell:
    if r.take(1)[0] != CELL or r.take(1)[0] != CELL_NAME:
        raise ValueError("cell")
    cell = Cell(r.take(r.u32()))
    if r.peek() == CELL_VALUE:
        r.take(1)
        vlen = r.u32()
        if vlen == 0:
            raise ValueError("a value without its type")
        value = r.take(vlen)
        cell.vtype, cell.payload = value[0], value[1:]
    if r.peek() == CELL_TYPE:
        r.take(1)
        cell.op = r.take(1)[0]
    if r.peek() == CELL_TS:
        r.take(1)
        cell.ts = struct.unpack("<q", r.take(8))[0]
    if r.take(1)[0] != CELL_CHECKSUM:
        raise ValueError("cell checksum")
    r.take(1)
    return cell


def decode(data: bytes) -> list[Row]:
    """The rows of a well-formed buffer (ValueError otherwise); checksums are not checked."""
    try:
        return _decode(data)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"malformed: {exc}") from None


def _decode(data: bytes) -> list[Row]:
    r = _Reader(data)
    if r.u32() != HEADER:
        raise ValueError("header")
    rows = []
    while r.peek() is not None:
        if r.take(1)[0] != ROW_PK:
            raise ValueError("row")
        row = Row()
        while r.peek() == CELL:
            row.pk.append(_read_cell(r))
        if r.peek() == ROW_DATA:
            r.take(1)
            row.data = []
            while r.peek() == CELL:
                row.data.append(_read_cell(r))
        if r.peek() == DELETE_MARKER:
            r.take(1)
            row.delete = True
        if r.take(1)[0] != ROW_CHECKSUM:
            raise ValueError("row checksum")
        r.take(1)
        rows.append(row)
    return rows


def value_of(cell: Cell) -> object:
    """A primary-key cell's value as the SDK would give it (for attributing writes)."""
    t, p = cell.vtype, cell.payload
    if t == INTEGER and len(p) == 8:
        return struct.unpack("<q", p)[0]
    if t in (STRING, BLOB) and len(p) >= 4:
        raw = p[4:4 + struct.unpack("<I", p[:4])[0]]
        return raw.decode("utf-8", "replace") if t == STRING else bytes(raw)
    return (t, bytes(p))


# -- structural mutations, checksums kept right ------------------------------------------

INTERESTING_I64 = (0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31), 2**32, 1 << 62, 10**13)
INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 255, 256, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 24)


def _payload(rng: random.Random, vtype: int) -> bytes:
    if vtype in (INTEGER, DOUBLE):
        if rng.random() < 0.3:
            return rng.randbytes(rng.choice((0, 1, 7, 9)))  # the wrong size
        if vtype == DOUBLE and rng.random() < 0.5:
            return struct.pack("<d", rng.choice((float("nan"), float("inf"), -0.0, 1e308)))
        return struct.pack("<q", rng.choice(INTERESTING_I64))
    if vtype == BOOLEAN:
        return bytes((rng.choice((0, 1, 2, 255)),)) if rng.random() < 0.8 else b""
    if vtype in (STRING, BLOB):
        body = _junk_text(rng) if vtype == STRING else rng.randbytes(rng.randint(0, 40))
        n = len(body) if rng.random() < 0.7 else rng.choice(INTERESTING_U32)
        return struct.pack("<I", n) + body
    return b"" if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 9))


def _junk_text(rng: random.Random) -> bytes:
    return rng.choice((
        b"", b"a", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", "é".encode(), b"\0\0", b"k" * 1025,
        b"x" * rng.randint(0, 64), rng.randbytes(rng.randint(1, 16)),
    ))


def _mutate_cell(rng: random.Random, cell: Cell, names: list[bytes]) -> None:
    what = rng.randrange(8)
    if what == 0:
        cell.vtype = rng.choice(TYPES + (4, 5, 6, 8, 12, 255))
        cell.payload = _payload(rng, cell.vtype)
    elif what == 1 and cell.vtype is not None:
        cell.payload = _payload(rng, cell.vtype)
    elif what == 2:
        cell.name = rng.choice([*names, b"", b"\xff", b"n" * 256, b"\0", "é".encode()])
    elif what == 3:
        cell.op = rng.choice((None, 0, 1, 2, 3, 4, 5, 255))
    elif what == 4:
        cell.ts = rng.choice((None, -1, 0, 1, 2**63 - 1, -(2**63), 10**15, 10**12))
    elif what == 5:
        cell.vlen = rng.choice(INTERESTING_U32)
    elif what == 6:
        cell.vtype = None
    else:
        cell.vtype = rng.choice((INF_MIN, INF_MAX, AUTO_INC))
        cell.payload = b""


def mutate_rows(rng: random.Random, rows: list[Row]) -> list[Row]:
    """One to three structural changes to ``rows`` (changed in place and returned)."""
    if not rows:
        rows.append(Row())
    names = [c.name for row in rows for c in row.pk + (row.data or [])] or [b"k"]
    for _ in range(rng.randint(1, 3)):
        row = rng.choice(rows)
        cells = row.pk + (row.data or [])
        what = rng.randrange(10)
        if what < 4 and cells:
            _mutate_cell(rng, rng.choice(cells), names)
        elif what == 4:
            row.pk.append(Cell(rng.choice(names), STRING, _payload(rng, STRING)))
        elif what == 5 and row.pk:
            del row.pk[rng.randrange(len(row.pk))]
        elif what == 6:
            many = rng.choice((2, 5, 1025, 2000))
            row.data = (row.data or []) + [
                Cell(rng.choice(names) if rng.random() < 0.5 else b"c%d" % i, INTEGER,
                     struct.pack("<q", i)) for i in range(many)]
        elif what == 7:
            row.delete = not row.delete
        elif what == 8:
            rows.append(Row(pk=list(row.pk), data=list(row.data or [])))
        else:
            row.pk, row.data = (row.data or []), row.pk
    return rows
