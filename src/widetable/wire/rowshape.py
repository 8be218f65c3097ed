"""Row shapes: a PlainBuffer row written by one ``%`` format, read by one ``unpack``.

A row's *shape* is all of it but its free fields: the names, value types and
value lengths of its cells (primary key first), whether its attribute cells
carry timestamps, whether it ends with a delete marker. Rows of one shape
differ only in values, timestamps and checksums, so the whole row is laid out
once (grammar in ``plainbuffer``)::

    row  = cell* tail rowcrc:u8
    cell = head value [0x07 ts:8] 0x0A crc:u8       (ts: stamped attribute cells only)
    head = [0x75:u32 TAG_ROW_PK | TAG_ROW_DATA] TAG_CELL TAG_CELL_NAME u32:len name
           TAG_CELL_VALUE u32:len(rest) type [u32:len(value)]   (prefix: first cell of a part)
    tail = [TAG_DELETE_ROW_MARKER] TAG_ROW_CHECKSUM

Writing a row is one bytes ``%`` format whose literal text is every head; reading
one is a ``struct.unpack`` and one tuple comparison of every fixed field (tags,
lengths, names, types). A cell's checksum starts from the CRC of its head's
covered bytes (name, type, length), a constant of the shape, so the checksums
cost one fastcrc call per cell (two with a timestamp) in C-level ``map`` loops,
and the row checksum one call over the cells' CRC bytes. What is left in Python
is per row, not per cell.

Shapes cover the rows the data path sends by the thousand: cells without
operations, values INTEGER / DOUBLE / BOOLEAN / STRING / BINARY, attribute
cells all stamped or none. Every other row, and any buffer that does not match
the shape learned for its length, goes through ``plainbuffer``'s general coder,
which also says exactly what is wrong with a bad buffer. The decoder learns a
shape from a row the general decoder read (``learn``), the encoder makes one
for a combination of names, types and lengths, each on its second sighting; and
both try shapes less often while they do not pay (``_Gate``).
"""

from __future__ import annotations

import struct
from functools import partial
from operator import call, itemgetter

import fastcrc

from .plainbuffer import (
    CRC8_TABLE,
    HEADER_BYTES,
    TAG_CELL,
    TAG_CELL_CHECKSUM,
    TAG_CELL_NAME,
    TAG_CELL_TIMESTAMP,
    TAG_CELL_VALUE,
    TAG_DELETE_ROW_MARKER,
    TAG_ROW_CHECKSUM,
    TAG_ROW_DATA,
    TAG_ROW_PK,
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INTEGER,
    VT_STRING,
    PlainRow,
)

_crc = fastcrc.crc8.smbus  # plainbuffer's CRC-8: _crc(data, crc) extends crc over data
_U32, _I64, _F64 = struct.Struct("<I"), struct.Struct("<q"), struct.Struct("<d")
_MAX_SHAPES = 1024  # per cache; a full cache starts over

# Python type -> (value type, its raw bytes: what follows the type byte and length). An
# int outside int64 raises struct.error and the row goes to the general encoder,
# which names the value.
_RAW: dict[type, tuple[int, object]] = {
    bytes: (VT_BLOB, bytes),
    str: (VT_STRING, str.encode),
    int: (VT_INTEGER, _I64.pack),
    float: (VT_DOUBLE, _F64.pack),
    bool: (VT_BOOLEAN, {False: b"\x00", True: b"\x01"}.__getitem__),
}
_VT_OF_TYPE = {t: vt for t, (vt, _) in _RAW.items()}
_FIXED_LENGTH = {VT_INTEGER: 8, VT_DOUBLE: 8, VT_BOOLEAN: 1}
# value type -> the value of raw bytes, raising (UnicodeDecodeError, KeyError) on the
# bytes the general decoder rejects.
_OF_RAW: dict[int, object] = {
    VT_BLOB: bytes,
    VT_STRING: bytes.decode,
    VT_INTEGER: partial(int.from_bytes, byteorder="little", signed=True),
    VT_DOUBLE: lambda raw: _F64.unpack(raw)[0],
    VT_BOOLEAN: {b"\x00": False, b"\x01": True}.__getitem__,
}
_BAIL = (struct.error, UnicodeError, KeyError, TypeError, ValueError, AttributeError,
         OverflowError)


def _getter(positions: list[int]):
    """A tuple of the items at ``positions`` (itemgetter gives a bare item for one)."""
    if len(positions) == 1:
        at = positions[0]
        return lambda items: (items[at],)
    if not positions:
        return lambda items: ()
    return itemgetter(*positions)


class Shape:
    """The fixed part of a row, and its layouts for writing and reading.

    ``size`` is what the row counts for capacity units: the UTF-8 bytes of every
    name and the size of every value (convert.row_size's rule). ``plain``: a put
    the library takes as ``{name: value}`` (each column once, no timestamps, no
    delete marker).
    """

    __slots__ = (
        "_consts", "_crcs", "_fixed", "_inits", "_of_raw", "_pk_of_raw", "_stamp_ints", "_stamps",
        "_template", "_values", "marker", "names", "npk", "pk_names", "plain", "size",
        "stamped", "struct", "unique",
    )

    def __init__(self, pk: tuple, cells: tuple, stamped: bool, marker: bool) -> None:
        """``pk``, ``cells``: ``(name, value type, value length)`` per cell."""
        self.npk = npk = len(pk)
        self.pk_names = tuple(c[0] for c in pk)
        self.names = tuple(c[0] for c in cells)
        self.unique = len(set(self.names)) == len(self.names)
        self.stamped = stamped = bool(stamped and cells)
        self.marker = marker
        self.plain = not stamped and not marker and self.unique
        self.size = 0
        fmt, template = ["<"], []
        inits, fixed = [], []
        at: dict[str, list[int]] = {"fixed": [], "value": [], "stamp": [], "crc": []}

        def field(kind: str, code: str, value: object = None) -> None:
            at[kind].append(len(fmt) - 1)
            fmt.append(code)
            if kind == "fixed":
                fixed.append(value)

        for i, (name, vt, n) in enumerate(pk + cells):
            raw_name = name.encode("utf-8")
            typed = bytes((vt,)) + (_U32.pack(n) if vt in (VT_STRING, VT_BLOB) else b"")
            prefix = (HEADER_BYTES + bytes((TAG_ROW_PK,)) if i == 0
                      else bytes((TAG_ROW_DATA,)) if i == npk else b"")
            head = (prefix + bytes((TAG_CELL, TAG_CELL_NAME)) + _U32.pack(len(raw_name)) + raw_name
                    + bytes((TAG_CELL_VALUE,)) + _U32.pack(len(typed) + n) + typed)
            inits.append(_crc(typed, _crc(raw_name, 0)))
            self.size += len(raw_name) + n
            field("fixed", f"{len(head)}s", head)
            field("value", f"{n}s")
            template += [head.replace(b"%", b"%%"), b"%b"]
            if stamped and i >= npk:
                field("fixed", "B", TAG_CELL_TIMESTAMP)
                field("stamp", "8s")
                template.append(bytes((TAG_CELL_TIMESTAMP,)) + b"%b")
            field("fixed", "B", TAG_CELL_CHECKSUM)
            field("crc", "B")
            template.append(bytes((TAG_CELL_CHECKSUM,)) + b"%c")
        tail = (bytes((TAG_DELETE_ROW_MARKER,)) if marker else b"") + bytes((TAG_ROW_CHECKSUM,))
        field("fixed", f"{len(tail)}s", tail)
        fmt.append("B")  # the row checksum, the last item
        template += [tail.replace(b"%", b"%%"), b"%c"]
        self.struct = struct.Struct("".join(fmt))
        self._template = b"".join(template)
        self._inits = tuple(inits)
        self._consts = tuple(fixed)
        self._fixed = _getter(at["fixed"])
        self._values = _getter(at["value"])
        self._stamps = _getter(at["stamp"])
        self._stamp_ints = struct.Struct(f"<{len(at['stamp'])}q")
        self._crcs = _getter(at["crc"])
        self._pk_of_raw = tuple(_OF_RAW[c[1]] for c in pk)
        self._of_raw = (None if all(c[1] == VT_BLOB for c in cells)  # BINARY: its raw bytes
                        else tuple(_OF_RAW[c[1]] for c in cells))

    def _checksums(self, raws: tuple, stamp_bytes: tuple) -> bytes:
        """Every cell's checksum, in cell order."""
        inits = self._inits
        if not self.stamped:
            return bytes(map(_crc, raws, inits))
        npk = self.npk
        first = stamp_bytes[0]
        if stamp_bytes.count(first) == len(stamp_bytes):  # one put wrote the row: one timestamp
            stamped = bytes(map(_crc, raws[npk:], inits[npk:])).translate(_then_stamp(first))
        else:
            stamped = bytes(map(_crc, stamp_bytes, map(_crc, raws[npk:], inits[npk:])))
        return bytes(map(_crc, raws[:npk], inits)) + stamped

    def pack(self, raws: tuple, stamps: tuple) -> bytes:
        """The row of these raw values (and int64 timestamps, when stamped)."""
        if not self.stamped:
            crcs = self._checksums(raws, ())
            args: list = [None] * (2 * len(raws) + 1)
            args[0:-1:2] = raws
            args[1:-1:2] = crcs
        else:
            first = stamps[0]
            if stamps.count(first) == len(stamps):
                stamp_bytes = (_I64.pack(first),) * len(stamps)
            else:
                stamp_bytes = tuple(map(_I64.pack, stamps))
            crcs = self._checksums(raws, stamp_bytes)
            npk = self.npk
            k = 2 * npk
            args = [None] * (k + 3 * len(stamps) + 1)
            args[0:k:2] = raws[:npk]
            args[1:k:2] = crcs[:npk]
            args[k:-1:3] = raws[npk:]
            args[k + 1:-1:3] = stamp_bytes
            args[k + 2:-1:3] = crcs[npk:]
        args[-1] = CRC8_TABLE[_crc(crcs, 0) ^ self.marker]
        return self._template % tuple(args)

    def unpack(self, buf: bytes) -> tuple[Shape, tuple, tuple, tuple] | None:
        """``(self, primary-key values, attribute values, timestamps)`` of a row of
        this shape, every checksum verified; None when ``buf`` is not one."""
        items = self.struct.unpack(buf)
        if self._fixed(items) != self._consts:
            return None
        raws = self._values(items)
        crcs = bytes(self._crcs(items))
        stamp_bytes = self._stamps(items)
        if self._checksums(raws, stamp_bytes) != crcs:
            return None
        if CRC8_TABLE[_crc(crcs, 0) ^ self.marker] != items[-1]:
            return None
        npk = self.npk
        stamps = self._stamp_ints.unpack(b"".join(stamp_bytes)) if stamp_bytes else ()
        pk = tuple(map(call, self._pk_of_raw, raws[:npk]))
        if self._of_raw is None:
            return self, pk, raws[npk:], stamps
        return self, pk, tuple(map(call, self._of_raw, raws[npk:])), stamps


# CRC-8 is linear: crc(data, s) == crc(data, 0) ^ crc(zeros, s) for zeros as long as data.
# So running a cell's CRC on over a timestamp is one table lookup per cell, the table
# made from the timestamp's own CRC: a row whose cells share one timestamp costs one
# fastcrc call per cell, not two.
_ZEROS8 = tuple(_crc(bytes(8), s) for s in range(256))  # state -> state after 8 zero bytes
_STAMP_TABLES: list[bytes | None] = [None] * 256  # crc of the timestamp -> translate table


def _then_stamp(stamp: bytes) -> bytes:
    """A ``bytes.translate`` table: each cell's CRC before the 8-byte ``stamp`` -> after."""
    k = _crc(stamp, 0)
    table = _STAMP_TABLES[k]
    if table is None:
        table = _STAMP_TABLES[k] = bytes(k ^ z for z in _ZEROS8)
    return table


class _Gate:
    """Whether trying shapes pays: on every call while they hit, on one call in 16 while
    misses outrun hits (rows whose shapes never repeat then cost little more than the
    general coder alone). The score rises 4 per hit, falls 1 per miss, within +-64."""

    __slots__ = ("_calls", "score")

    def __init__(self) -> None:
        self.score = 0
        self._calls = 0

    def open(self) -> bool:
        if self.score > -64:
            return True
        self._calls += 1
        return not self._calls & 15

    def hit(self) -> None:
        if self.score < 64:
            self.score += 4

    def miss(self) -> None:
        if self.score > -64:
            self.score -= 1


# Making a shape costs what tens of rows cost the general coder, so one is made on the
# second sighting of its key (encoder) or spec (decoder); the caches hold False for
# a first sighting.
_BY_SPEC: dict[tuple, Shape | bool] = {}  # (pk specs, cell specs, stamped, marker) -> shape
_BY_KEY: dict[tuple, Shape | bool] = {}  # encoder: names, Python types, lengths -> shape
_BY_LENGTH: dict[int, Shape] = {}  # decoder: buffer length -> the last shape learned
_CONVERTERS: dict[tuple, tuple] = {}  # Python types -> (position, to raw) of non-bytes
_ENCODING, _LEARNING = _Gate(), _Gate()


def _remember(cache: dict, key: object, value: object) -> None:
    if len(cache) >= _MAX_SHAPES:
        cache.clear()
    cache[key] = value


def _shape(spec: tuple) -> Shape | None:
    shape = _BY_SPEC.get(spec)
    if not shape:
        try:
            shape = Shape(*spec)
        except _BAIL:  # a name that is not text: the general encoder reports it
            return None
        _remember(_BY_SPEC, spec, shape)
    return shape  # type: ignore[return-value]


def _raws(values: tuple, types: tuple) -> tuple:
    """Each value's raw bytes. Raises (KeyError for a type shapes do not cover,
    struct.error for an int outside int64)."""
    convert = _CONVERTERS.get(types)
    if convert is None:
        convert = tuple((i, _RAW[t][1]) for i, t in enumerate(types) if t is not bytes)
        if len(_CONVERTERS) >= _MAX_SHAPES:
            _CONVERTERS.clear()
        _CONVERTERS[types] = convert
    if not convert:
        return values
    raws = list(values)
    for i, to_raw in convert:
        raws[i] = to_raw(raws[i])  # type: ignore[operator]
    return tuple(raws)


def encode(pk_names: tuple, pk_values: tuple, names: tuple = (), values: tuple = (),
           stamps: tuple | None = None, marker: bool = False) -> tuple[bytes, Shape] | None:
    """The row and its shape, or None when a value is of a type shapes do not
    cover or out of range, or the row's shape is new (the general encoder then writes
    it, or names the fault).

    ``stamps``: one int per attribute value (the store's: not checked for bool), or
    None for cells without timestamps.
    """
    if not _ENCODING.open():
        return None
    every = pk_values + values
    types = tuple(map(type, every))
    try:
        raws = _raws(every, types)
    except _BAIL:
        return None
    lengths = tuple(map(len, raws))
    key = (pk_names, names, types, lengths, stamps is not None, marker)
    shape = _BY_KEY.get(key)
    if shape is None:
        _ENCODING.miss()
        _remember(_BY_KEY, key, False)
        return None
    if shape is False:
        npk = len(pk_names)
        if npk != len(pk_values) or len(names) != len(values) or not npk:
            return None
        if stamps is not None and len(stamps) != len(values):
            return None
        vts = tuple(map(_VT_OF_TYPE.__getitem__, types))
        shape = _shape((tuple(zip(pk_names, vts[:npk], lengths[:npk])),
                        tuple(zip(names, vts[npk:], lengths[npk:])), stamps is not None, marker))
        if shape is None:
            return None
        _BY_KEY[key] = shape
    else:
        _ENCODING.hit()
    try:
        return shape.pack(raws, stamps or ()), shape  # type: ignore[union-attr]
    except _BAIL:
        return None


def decode(buf: bytes) -> tuple[Shape, tuple, tuple, tuple] | None:
    """``(shape, primary-key values, attribute values, timestamps)`` of a one-row
    buffer of a learned shape, every checksum verified; None otherwise (the
    general decoder then reads it, or says what is wrong)."""
    shape = _BY_LENGTH.get(len(buf))
    if shape is None:
        return None
    try:
        got = shape.unpack(buf)
    except _BAIL:
        return None
    if got is not None:
        _LEARNING.hit()
    return got


def learn(buf: bytes, row: PlainRow) -> None:
    """Remember the shape of ``row``, which the general decoder read from ``buf``,
    for buffers of its length (from the second row of that shape on). Rows that
    shapes do not cover are ignored."""
    if not _LEARNING.open():
        return
    pk: list[tuple] = []
    cells: list[tuple] = []
    stamped = None
    try:
        for name, value in row.primary_key:
            pk.append(_spec(name, value))
        for c in row.cells:
            if c.op is not None or (stamped is not None and (c.timestamp is not None) != stamped):
                return
            stamped = c.timestamp is not None
            cells.append(_spec(c.name, c.value))
    except _BAIL:
        return
    if not pk:
        return
    spec = (tuple(pk), tuple(cells), bool(stamped), row.delete_marker)
    if spec not in _BY_SPEC:
        _LEARNING.miss()
        _remember(_BY_SPEC, spec, False)
        return
    shape = _shape(spec)
    if shape is not None and shape.struct.size == len(buf):
        _remember(_BY_LENGTH, len(buf), shape)


def _spec(name: str, value: object) -> tuple[str, int, int]:
    vt = _VT_OF_TYPE[type(value)]
    to_raw = _RAW[type(value)][1]
    return name, vt, _FIXED_LENGTH.get(vt) or len(to_raw(value))  # type: ignore[operator]


__all__ = ["Shape", "decode", "encode", "learn"]
