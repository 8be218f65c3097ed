"""Row shapes (server/rowshape.py) against the general PlainBuffer coder and the
official SDK: the same bytes out, the same values in, every checksum still
checked, the same capacity-unit sizes; and a corrupted row over the wire is
still a 400 OTSParameterInvalid."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import widetable
from widetable.table.row import Row
from widetable.wire import convert, rowshape
from widetable.wire import plainbuffer as pbuf
from widetable.wire.plainbuffer import Cell, PlainRow
from widetable.wire.proto import pb

from . import serving

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.binary(max_size=12),
                   st.booleans(), st.floats(allow_nan=False))
stamps = st.integers(-(2**63), 2**63 - 1)


@st.composite
def shaped_rows(draw) -> PlainRow:
    """Rows a shape covers: no operations, attribute cells all stamped or none (and
    often all with one timestamp, as one put writes them)."""
    pk = draw(st.lists(st.tuples(names, values), min_size=1, max_size=3))
    stamped, shared = draw(st.booleans()), draw(st.sampled_from([None, 0, 2**40, -1]))
    cells = draw(st.lists(st.tuples(names, values, stamps), max_size=5))
    return PlainRow(pk, [Cell(n, v, None, (ts if shared is None else shared) if stamped else None)
                         for n, v, ts in cells], draw(st.booleans()))


def _open_gates() -> None:
    """Shapes tried on every call: hypothesis's ever-new shapes would close the gates."""
    rowshape._ENCODING.score = rowshape._LEARNING.score = 0


def _encode(row: PlainRow):
    """rowshape.encode of a row, its shape made (a new shape is made on its second sighting)."""
    _open_gates()
    pk_names = tuple(n for n, _ in row.primary_key)
    pk_values = tuple(v for _, v in row.primary_key)
    stamped = any(c.timestamp is not None for c in row.cells)
    args = (pk_names, pk_values, tuple(c.name for c in row.cells),
            tuple(c.value for c in row.cells),
            tuple(c.timestamp for c in row.cells) if stamped else None, row.delete_marker)
    return rowshape.encode(*args) or rowshape.encode(*args)


def _learn(data: bytes) -> PlainRow:
    """The general decoder's row; the second row of a shape teaches it."""
    _open_gates()
    convert.decode_row(data)
    return convert.decode_row(data)


def _same(a: object, b: object) -> bool:
    """Equal, and of the same type (True == 1 and 1.0 == 1 are not the same cell)."""
    if isinstance(a, (tuple, list)):
        return (isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and (
        a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(shaped_rows())
def test_shape_writes_the_general_encoders_bytes(row: PlainRow) -> None:
    hit = _encode(row)
    assert hit is not None
    data, shape = hit
    assert data == pbuf.encode_row(row)
    size = sum(len(n.encode()) + convert.value_size(v) for n, v in row.primary_key)
    size += sum(len(c.name.encode()) + convert.value_size(c.value) for c in row.cells)
    assert shape.size == size  # what convert.row_size / write_cu count


@settings(max_examples=400, deadline=None)
@given(shaped_rows())
def test_shape_reads_what_the_general_decoder_reads(row: PlainRow) -> None:
    data = pbuf.encode_row(row)
    general = _learn(data)
    hit = rowshape.decode(data)
    assert hit is not None
    shape, pk, vals, stamps_ = hit
    assert shape.pk_names == tuple(n for n, _ in general.primary_key)
    assert shape.names == tuple(c.name for c in general.cells)
    assert _same(pk, tuple(v for _, v in general.primary_key))
    assert _same(vals, tuple(c.value for c in general.cells))
    assert _same(stamps_, tuple(c.timestamp for c in general.cells if c.timestamp is not None))
    assert shape.marker == general.delete_marker


edits = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=3)


@settings(max_examples=500, deadline=None)
@given(shaped_rows(), edits)
def test_a_changed_byte_is_read_as_the_general_decoder_reads_it(row: PlainRow, changes) -> None:
    """Bytes changed in place (same length: the learned shape is tried): the shape
    gives the general decoder's answer, or declines; it never accepts a bad checksum."""
    data = pbuf.encode_row(row)
    _learn(data)
    buf = bytearray(data)
    for where, byte in changes:
        buf[where % len(buf)] = byte
    bad = bytes(buf)
    hit = rowshape.decode(bad)
    if hit is None:
        return
    general = pbuf.decode_row(bad)  # raises if the shape accepted a malformed row
    assert _same(hit[1], tuple(v for _, v in general.primary_key))
    assert _same(hit[2], tuple(c.value for c in general.cells))


def test_every_flipped_bit_of_a_shaped_row_is_refused() -> None:
    _open_gates()
    row = PlainRow([("k", "user1")], [Cell("a", b"x" * 20), Cell("b", 7), Cell("c", "héllo")])
    data = pbuf.encode_row(row)
    _learn(data)
    assert rowshape.decode(data) is not None
    for i in range(4, len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            assert rowshape.decode(bytes(bad)) is None
            with pytest.raises(pbuf.PlainBufferError):
                convert.read_put(bytes(bad)) or convert.decode_row(bytes(bad))


def test_a_shape_is_made_on_its_second_sighting() -> None:
    """Rows whose lengths never repeat never pay for making a shape."""
    _open_gates()
    key = (("k",), ("once_",), ("v",), (b"x" * 4321,))  # lengths no other test uses
    assert rowshape.encode(*key) is None
    assert rowshape.encode(*key) is not None
    data = pbuf.encode_row(PlainRow([("k", "v")], [Cell("twice_", b"y" * 5432)]))
    convert.decode_row(data)
    assert rowshape.decode(data) is None
    convert.decode_row(data)
    assert rowshape.decode(data) is not None


def test_shapes_are_tried_less_while_they_do_not_pay() -> None:
    _open_gates()
    for n in range(200):  # every row of a new shape
        assert rowshape.encode(("k",), ("v",), ("gate",), (b"x" * (6000 + n),)) is None
    assert not rowshape._ENCODING.open()
    tried = sum(rowshape._ENCODING.open() for _ in range(160))
    assert tried == 10  # one call in 16
    key = (("k",), ("v",), ("gate",), (b"y" * 7000,))
    while rowshape.encode(*key) is None:  # tried now and then: made, then hits reopen
        pass
    for _ in range(20):
        rowshape.encode(*key)
    assert rowshape._ENCODING.open()


def test_values_shapes_do_not_cover_go_to_the_general_encoder() -> None:
    assert rowshape.encode(("k",), (widetable.INF_MIN,)) is None
    assert rowshape.encode(("k",), (2**63,)) is None  # the general encoder names the value
    assert rowshape.encode(("k",), ("a",), ("c",), (bytearray(b"x"),)) is None
    assert rowshape.encode(("k",), ("a",), (1,), (b"x",)) is None  # a name that is not text
    with pytest.raises(widetable.WidetableError, match="outside int64"):
        convert.encode_put(("k",), ("a",), {"c": 2**63})
    # ... and the general encoder writes what shapes decline
    assert convert.encode_key(("k",), (widetable.INF_MIN,)) == pbuf.encode_primary_key(
        [("k", widetable.INF_MIN)])


def test_read_put_takes_only_plain_puts() -> None:
    plain = pbuf.encode_row(PlainRow([("k", "a")], [Cell("x", b"1"), Cell("y", 2)]))
    _learn(plain)
    assert convert.read_put(plain) == (("k",), ("a",), {"x": b"1", "y": 2}, 2 + 2 + 1 + 8)
    for row in (PlainRow([("k", "b")], [Cell("x", b"1", None, 5)]),  # a timestamp
                PlainRow([("k", "b")], [Cell("x", b"1"), Cell("x", b"2")]),  # a column twice
                PlainRow([("k", "b")], [Cell("x", b"1")], True)):  # a delete marker
        data = pbuf.encode_row(row)
        _learn(data)
        assert rowshape.decode(data) is not None and convert.read_put(data) is None


def test_result_rows_encode_as_before() -> None:
    """encode_result (a shape) writes what plain_row + encode_row write, versions aside."""
    names_ = ("k", "n")
    for row in (Row(("a", 1), {"b": b"x", "a": 2.5, "c": True}, 17),
                Row(("a", 1), {"b": "y", "a": -3}, {"b": 5, "a": 6}),
                Row(("a", 1), {}, {}),
                Row(("a", 1), {"a": 1}, {"a": 3}, {"a": [(3, 1), (2, 0)]})):
        data, size = convert.encode_result(names_, row)
        assert data == pbuf.encode_row(convert.plain_row(names_, row))
        assert size == convert.row_size(names_, row)
    rows = [Row(("a", i), {"v": b"x" * i}, i) for i in range(3)]
    data, size = convert.encode_results(names_, rows)
    assert data == pbuf.encode_rows([convert.plain_row(names_, r) for r in rows])
    assert size == sum(convert.row_size(names_, r) for r in rows)
    assert convert.encode_results(names_, []) == (b"", 0)


sdk = pytest.importorskip("tablestore.plainbuffer.plain_buffer_builder")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(names, st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=10),
                                           st.binary(max_size=10))), min_size=1, max_size=3),
       st.lists(st.tuples(names, values), max_size=6, unique_by=lambda c: c[0]))
def test_sdk_put_rows_read_by_shape(pk, cols) -> None:
    def wire(v):
        return bytearray(v) if isinstance(v, bytes) else v  # the SDK's BINARY type

    data = bytes(sdk.PlainBufferBuilder.serialize_for_put_row(
        [(n, wire(v)) for n, v in pk], [(n, wire(v)) for n, v in cols]))
    assert data == pbuf.encode_row(PlainRow(pk, [Cell(n, v) for n, v in cols]))
    _learn(data)
    got = convert.read_put(data)
    assert got is not None
    assert got[0] == tuple(n for n, _ in pk) and _same(got[1], tuple(v for _, v in pk))
    assert _same(list(got[2].items()), cols)


# -- over the wire -------------------------------------------------------------------


def test_corrupted_rows_of_a_known_shape_are_refused(remote_db, server) -> None:
    t = remote_db.create_table("shaped", [("k", "STRING")])
    rows = [(f"k{i}", {"a": b"x" * 10, "b": 5}) for i in range(100)]
    remote_db.batch_write_row([("shaped", "put", (k,), c) for k, c in rows])  # the server learns
    good = convert.encode_put(("k",), ("kx",), {"a": b"y" * 10, "b": 6})
    for at in (len(good) - 1, len(good) - 3, 12, 30):  # row crc, a cell crc, a name, a value
        bad = bytearray(good)
        bad[at] ^= 0x10
        req = pb.BatchWriteRowRequest()
        row = req.tables.add(table_name="shaped").rows.add(type=1, row_change=bytes(bad))
        row.condition.row_existence = 0
        status, err = serving.post(server.port, "BatchWriteRow", req.SerializeToString())
        assert (status, err.code) == (400, "OTSParameterInvalid") and "PlainBuffer" in err.message
        put = pb.PutRowRequest(table_name="shaped", row=bytes(bad))
        put.condition.row_existence = 0
        status, err = serving.post(server.port, "PutRow", put.SerializeToString())
        assert (status, err.code) == (400, "OTSParameterInvalid")
    assert t.get_row(("kx",)) is None
    assert len(list(t.scan())) == 100
    assert t.get_row(("k1",)).columns == {"a": b"x" * 10, "b": 5}
