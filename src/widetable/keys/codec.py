"""Order-preserving encoding of typed primary-key tuples.

Grammar (DO NOT CHANGE: embedded in on-disk data)::

    tuple    := element*
    element  := 0x01 escaped 0x00          BINARY
              | 0x02 escaped 0x00          STRING (UTF-8)
              | 0x15 uint64-big-endian     INTEGER, stored as value + 2**63
    escaped  := the bytes with every 0x00 written as 0x00 0xFF

Invariants (tested in ``tests/keys/test_codec.py`` with hypothesis):

* ``decode_tuple(encode_tuple(t)) == t``;
* for tuples of one schema, byte order equals logical order;
* a tuple sorts before each of its extensions, and every extension of ``t``
  falls inside ``prefix_range(encode_tuple(t))``.

No element starts with 0xFF, so ``prefix + b"\\xff"`` is above every key that
extends ``prefix``. Range bounds with ``INF_MIN``/``INF_MAX`` rely on that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

from ..errors import InvalidPK, PrimaryKeyTooLong, describe

PKValue = Union[str, int, bytes]

STRING = "STRING"
INTEGER = "INTEGER"
BINARY = "BINARY"
PK_TYPES = (STRING, INTEGER, BINARY)

CODE_BINARY = 0x01  # DO NOT CHANGE: embedded in on-disk data
CODE_STRING = 0x02  # DO NOT CHANGE: embedded in on-disk data
CODE_INTEGER = 0x15  # DO NOT CHANGE: embedded in on-disk data

MAX_KEY_VALUE_BYTES = 1024
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT_OFFSET = 2**63  # an INTEGER is stored as value + INT_OFFSET, unsigned


class _Infinity:
    """A bound that stands in for any key column in a range read."""

    __slots__ = ("_sign", "name")

    def __init__(self, name: str, sign: int) -> None:
        self.name = name
        self._sign = sign

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


INF_MIN = _Infinity("INF_MIN", -1)
INF_MAX = _Infinity("INF_MAX", 1)

_STRING_HEAD = bytes([CODE_STRING])
_BINARY_HEAD = bytes([CODE_BINARY])
_INTEGER_HEAD = bytes([CODE_INTEGER])
TERMINATOR = b"\x00"  # ends a STRING or BINARY value (whose 0x00 bytes are escaped 0x00 0xFF)


def encode_string(value: str, name: str = "") -> bytes:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPK(f"primary key value {describe(value)} is not valid Unicode text") from None
    if len(raw) > MAX_KEY_VALUE_BYTES:
        raise too_long(name, value, len(raw))
    return _STRING_HEAD + raw.replace(b"\x00", b"\x00\xff") + TERMINATOR


def encode_binary(value: bytes, name: str = "") -> bytes:
    if len(value) > MAX_KEY_VALUE_BYTES:
        raise too_long(name, value, len(value))
    return _BINARY_HEAD + bytes(value).replace(b"\x00", b"\x00\xff") + TERMINATOR


def too_long(name: str, value: object, size: int) -> PrimaryKeyTooLong:
    """Tablestore's error for a key value over 1 KB (its wording first, then ours)."""
    return PrimaryKeyTooLong(
        f"The length of primary key column: {name!r} exceeds the MaxLength:"
        f"{MAX_KEY_VALUE_BYTES} with CurrentLength:{size}. (value {describe(value)} is "
        f"{size} bytes; the limit is {MAX_KEY_VALUE_BYTES})"
    )


def encode_integer(value: int) -> bytes:
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidPK(f"primary key value {value} does not fit in a signed 64-bit integer")
    return _INTEGER_HEAD + (value + INT_OFFSET).to_bytes(8, "big")


def encode_element(value: PKValue, type_: str, name: str = "") -> bytes:
    """Encode one key column value, checking it against its declared type."""
    if type_ == STRING:
        if type(value) is str:
            return encode_string(value, name)
    elif type_ == INTEGER:
        if type(value) is int:
            return encode_integer(value)
    elif type_ == BINARY:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return encode_binary(bytes(value), name)
    else:
        raise InvalidPK(f"unknown primary key type {describe(type_)}")
    label = f"primary key column {name!r}" if name else "primary key value"
    if isinstance(value, _Infinity):
        raise InvalidPK(f"{label}: {value!r} is only allowed in range bounds")
    raise InvalidPK(
        f"{label} must be {type_}, got {type(value).__name__} {describe(value)}"
    )


def encode_tuple(values: Sequence[PKValue], types: Sequence[str] | None = None) -> bytes:
    """Encode a key tuple. Without ``types`` each value's Python type decides."""
    if types is None:
        types = [_infer(v) for v in values]
    if len(types) != len(values):
        raise InvalidPK(f"key {describe(values)} has {len(values)} values for {len(types)} types")
    return b"".join(encode_element(v, t) for v, t in zip(values, types))


def _infer(value: object) -> str:
    if type(value) is str:
        return STRING
    if type(value) is int:
        return INTEGER
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BINARY
    raise InvalidPK(f"primary key value {describe(value)} is not STRING, INTEGER or BINARY")


def _read_escaped(data: bytes, pos: int) -> tuple[bytes, int]:
    out = bytearray()
    n = len(data)
    while True:
        end = data.find(b"\x00", pos)
        if end < 0:
            raise InvalidPK(f"truncated key bytes {describe(data)}")
        out += data[pos:end]
        if end + 1 < n and data[end + 1] == 0xFF:
            out.append(0)
            pos = end + 2
            continue
        return bytes(out), end + 1


def decode_tuple(data: bytes, pos: int = 0) -> tuple[PKValue, ...]:
    """Decode every element from ``pos`` to the end of ``data``."""
    out: list[PKValue] = []
    n = len(data)
    while pos < n:
        code = data[pos]
        pos += 1
        if code == CODE_STRING:
            raw, pos = _read_escaped(data, pos)
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidPK(f"invalid UTF-8 in key bytes {describe(data)}") from None
        elif code == CODE_BINARY:
            raw, pos = _read_escaped(data, pos)
            out.append(raw)
        elif code == CODE_INTEGER:
            if pos + 8 > n:
                raise InvalidPK(f"truncated integer in key bytes {describe(data)}")
            out.append(int.from_bytes(data[pos : pos + 8], "big") - INT_OFFSET)
            pos += 8
        else:
            raise InvalidPK(f"unknown type code 0x{code:02x} in key bytes {describe(data)}")
    return tuple(out)


def prefix_end(prefix: bytes) -> bytes:
    """The exclusive upper bound of every key that extends ``prefix``."""
    return prefix + b"\xff"


def make_encoder(types: Sequence[str], names: Sequence[str]):
    """Return a fast ``encode(values) -> bytes`` for one schema.

    The returned function checks arity and types and raises :class:`InvalidPK`
    with the column name on mismatch.
    """
    types = tuple(types)
    names = tuple(names)
    arity = len(types)

    if types == (STRING,):
        name0 = names[0]

        def encode_one_string(values: Sequence[PKValue]) -> bytes:
            if len(values) != 1:
                raise InvalidPK(f"primary key needs 1 column ({name0}), got {describe(values)}")
            v = values[0]
            if type(v) is not str:
                return encode_element(v, STRING, name0)
            if len(v) <= 256 and "\x00" not in v and v.isascii():
                return b"\x02" + v.encode() + b"\x00"
            return encode_string(v, name0)

        return encode_one_string

    def encode(values: Sequence[PKValue]) -> bytes:
        if len(values) != arity:
            raise InvalidPK(
                f"primary key needs {arity} columns ({', '.join(names)}), got {describe(values)}"
            )
        return b"".join([encode_element(v, t, n) for v, t, n in zip(values, types, names)])

    return encode


def encode_keys(
    prefix: bytes, keys: Sequence[Sequence[PKValue]], types: Sequence[str], encode
) -> list[bytes]:
    """``prefix`` + the encoding of each key, ``encode`` being :func:`make_encoder`'s function.

    Keys of one STRING column of plain ASCII text, the common bulk load, are
    encoded in one pass with no per-key checks beyond what the batch shows.
    """
    if tuple(types) == (STRING,) and set(map(len, keys)) == {1}:
        texts = [k[0] for k in keys]
        if set(map(type, texts)) == {str}:
            joined = "".join(texts)
            if joined.isascii() and "\x00" not in joined and max(map(len, texts)) <= MAX_KEY_VALUE_BYTES:
                head = prefix + _STRING_HEAD
                return [head + t.encode() + TERMINATOR for t in texts]
    return [prefix + encode(k) for k in keys]
