"""Structure-aware fuzzing with hypothesis, which shrinks a failing request to its core:
native frames of any shape, and PlainBuffer rows of any cells, with checksums right so
that they reach the decoders. Every answer must be a well-formed error or a success,
and an accepted row must read back as it was sent."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bench.fuzz import plainbuffer as pbuf
from bench.fuzz import run, wire
from bench.fuzz.mutate import Case

from . import serving

pytest.importorskip("tablestore")

TABLE = "fzh"
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

leaves = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
          | st.floats(allow_nan=True) | st.text(max_size=12) | st.binary(max_size=12)
          | st.sampled_from([TABLE, "k", "v", "put", "update", "delete", "forward", "backward",
                             "EXPECT_EXIST", "IGNORE", msgpack.ExtType(1, b""),
                             msgpack.ExtType(2, b""), msgpack.ExtType(9, b"x")]))
values = st.recursive(leaves, lambda kids: st.lists(kids, max_size=4)
                      | st.dictionaries(st.text(max_size=4), kids, max_size=3), max_leaves=10)


@pytest.fixture(scope="module")
def account(server):
    ots = serving.official_client(server.endpoint, "v2", "widetable-tests-sdk")
    from tablestore import CapacityUnit, ReservedThroughput, TableMeta, TableOptions

    ots.create_table(TableMeta(TABLE, [("k", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    yield wire.Account("127.0.0.1", server.port, serving.ACCESS_KEY_ID,
                       serving.ACCESS_KEY_SECRET, serving.INSTANCE)
    ots.delete_table(TABLE)


@pytest.fixture(scope="module")
def native(account):
    conn = wire.upgrade(account, timeout=10)
    yield conn
    conn.close()


ARITY = {1: 7, 2: 10, 3: 5, 4: 8, 5: 4, 6: 1, 7: 2, 8: 1, 9: 1, 10: 3, 11: 2, 12: 1}


@SETTINGS
@given(op=st.sampled_from(sorted(ARITY)) | st.integers(-1, 14), data=st.data())
def test_native_frames_of_any_shape_are_answered_cleanly(native, op, data) -> None:
    """Calls of every op, mostly with the right number of arguments, of any values."""
    n = ARITY.get(op, 2)
    n = data.draw(st.sampled_from([n] * 6 + [0, n - 1, n + 1]))
    table = data.draw(st.sampled_from([TABLE]) | values)
    frame = msgpack.packb([op, table, *data.draw(st.lists(values, min_size=max(n - 1, 0),
                                                          max_size=max(n - 1, 0)))])
    native.send(wire.FRAME_HEADER.pack(len(frame)) + frame)
    reply = native.read_frame()
    outcome, finding = run.judge_native(Case("native", "hypothesis", frame, False), reply)
    event(outcome)
    assert finding is None, finding


names = st.sampled_from([b"v", b"w", b"k", b"", b"\xff", b"x" * 300])
types = st.sampled_from(pbuf.TYPES + (4, 12, 255))


@st.composite
def cells(draw, pk: bool = False):
    """A cell, well-formed two times in three (a value of its type, as the SDK writes it)."""
    name = b"k" if pk else draw(names)
    if draw(st.integers(0, 2)):
        vtype = draw(st.sampled_from([pbuf.STRING] if pk else
                                     [pbuf.INTEGER, pbuf.DOUBLE, pbuf.BOOLEAN, pbuf.STRING,
                                      pbuf.BLOB]))
        if vtype in (pbuf.STRING, pbuf.BLOB):
            body = draw(st.text(max_size=10)).encode() if vtype == pbuf.STRING else \
                draw(st.binary(max_size=10))
            payload = struct.pack("<I", len(body)) + body
        elif vtype == pbuf.BOOLEAN:
            payload = bytes((draw(st.integers(0, 1)),))
        else:
            payload = struct.pack("<q", draw(st.integers(-(2**63), 2**63 - 1)))
        return pbuf.Cell(name, vtype, payload)
    vtype = draw(types)
    if vtype in (pbuf.STRING, pbuf.BLOB):
        body = draw(st.binary(max_size=20))
        n = draw(st.sampled_from([len(body)] * 4 + [0, len(body) + 1, 2**32 - 1]))
        payload = struct.pack("<I", n) + body
    elif vtype in (pbuf.INTEGER, pbuf.DOUBLE):
        payload = draw(st.sampled_from([8] * 4 + [0, 7])) * b"\x01"
    else:
        payload = draw(st.binary(max_size=2))
    return pbuf.Cell(name, vtype, payload,
                     op=None if pk else draw(st.sampled_from([None, None, 1, 3, 4, 9])),
                     ts=None if pk else draw(st.sampled_from([None, 1, -1, 2**63 - 1])))


@SETTINGS
@given(key=cells(pk=True), columns=st.lists(cells(), max_size=4),
       api=st.sampled_from(["PutRow", "UpdateRow"]))
def test_plainbuffer_rows_of_any_cells_are_answered_cleanly(account, key, columns, api) -> None:
    """Rows with right checksums, whose cells have any type, length, op and timestamp."""
    from tablestore.protobuf import table_store_pb2 as p

    row = pbuf.encode([pbuf.Row(pk=[key], data=columns)])
    msg = p.PutRowRequest(table_name=TABLE, row=row) if api == "PutRow" else \
        p.UpdateRowRequest(table_name=TABLE, row_change=row)
    msg.condition.row_existence = 0
    body = msg.SerializeToString()
    conn = wire.Conn(account, timeout=10)
    try:
        conn.send(wire.http_request("/" + api, wire.sign(
            account, api, wire.ots_headers(account, api, body)), body))
        reply = conn.read_http()
    finally:
        conn.close()
    case = Case("http", "hypothesis", body, False, api=api, body=body)
    outcome, finding = run.judge_http(case, reply)
    event(outcome)
    assert finding is None, finding
    if reply.status == 200 and api == "PutRow":
        # accepted: the row reads back with every column sent, as sent
        from tablestore import OTSClient

        ots = OTSClient(f"http://{account.host}:{account.port}", account.key_id, account.secret,
                        account.instance, logger_name="widetable-tests-sdk")
        got = ots.get_row(TABLE, [("k", pbuf.value_of(key))], max_version=1)[1]
        assert got is not None
        sent = {c.name.decode() for c in columns}
        assert {c[0] for c in got.attribute_columns} == sent
