"""The codec's fast paths against their references: the compiled CRC-8
(fastcrc, CRC-8/SMBUS) against a table-driven CRC, bit for bit; the inline PlainBuffer
decoder against the careful one, on valid and mutated buffers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from widetable import INF_MAX, INF_MIN
from widetable.wire import plainbuffer as pbuf
from widetable.wire.plainbuffer import Cell, PlainRow


def _table() -> tuple[int, ...]:
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ 0x07) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        out.append(c)
    return tuple(out)


TABLE = _table()


def reference(crc: int, data: bytes) -> int:
    for b in data:
        crc = TABLE[crc ^ b]
    return crc


def test_reference_table_is_the_codec_table() -> None:
    assert pbuf.CRC8_TABLE == TABLE
    assert reference(0, b"123456789") == 0xF4  # CRC-8/SMBUS check value


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 255), st.binary(max_size=600))
def test_crc8_matches_reference(init: int, data: bytes) -> None:
    assert pbuf.crc8(init, data) == reference(init, data)
    assert pbuf.crc8(init, bytearray(data)) == reference(init, data)
    assert pbuf.crc8(init, memoryview(data)) == reference(init, data)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_crc8_is_incremental(chunks: list[bytes]) -> None:
    crc = 0
    for chunk in chunks:
        crc = pbuf.crc8(crc, chunk)
    assert crc == reference(0, b"".join(chunks))


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.binary(max_size=12),
                   st.booleans(), st.floats(allow_nan=False))
pk_values = st.one_of(values, st.sampled_from([INF_MIN, INF_MAX]))
cells = st.builds(Cell, names, st.one_of(st.none(), values),
                  st.sampled_from([None, pbuf.DELETE_ALL_VERSION, pbuf.DELETE_ONE_VERSION,
                                   pbuf.INCREMENT]),
                  st.one_of(st.none(), st.integers(0, 2**62)))
rows = st.builds(PlainRow, st.lists(st.tuples(names, pk_values), min_size=1, max_size=3),
                 st.lists(cells, max_size=4), st.booleans())
edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.integers(0, 255)),
                 max_size=3)


def mutated(plain: list[PlainRow], changes: list) -> bytes:
    """The encoding of ``plain`` with ``changes`` (from ``edits``): each overwrites a byte,
    cuts the buffer there, or inserts a byte."""
    buf = bytearray(pbuf.encode_rows(plain))
    for kind, where, byte in changes:
        at = where % (len(buf) + 1)
        if kind == 0 and at < len(buf):
            buf[at] = byte
        elif kind == 1:
            del buf[at:]
        else:
            buf.insert(at, byte)
    return bytes(buf)


def _careful(buf: bytes, one: bool):
    try:
        r = pbuf._reader(buf)
        out = [pbuf._read_row(r)] if one else []
        while r.pos < r.end:
            if one:
                return "error"
            out.append(pbuf._read_row(r))
        return out
    except pbuf.PlainBufferError:
        return "error"


@settings(max_examples=400, deadline=None)
@given(st.lists(rows, min_size=1, max_size=3), edits)
def test_fast_decoder_agrees_with_the_careful_one(plain: list[PlainRow], changes) -> None:
    data = mutated(plain, changes)
    if not changes:
        assert pbuf.decode_rows(data) == plain
    for one in (False, True):
        careful = _careful(data, one)
        try:
            fast = pbuf._fast_rows(data, one)
        except pbuf._BAIL:
            continue  # the careful decoder decides, and says where
        assert careful != "error" and fast == careful
