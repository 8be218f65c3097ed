"""Tablestore's Stream APIs (ListStream, DescribeStream, GetShardIterator, GetStreamRecord)
on a real server, and PlainBuffer's row extension (a stream record's sequence info).

The server runs in this process (``WidetableServer`` on a loopback port, on a thread), so
a test compares what goes over the wire with the embedded stream API on the same store.
The official SDK has the stream messages (``tablestore.protobuf.table_store_pb2``) but no
client calls for them: requests are signed, sent and their answers checked (MD5, date,
response signature) by the SDK's own protocol pieces."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from widetable.errors import ParameterInvalid
from widetable.table.values import now_ms
from widetable.wire import plainbuffer as pbuf
from widetable.wire.plainbuffer import Cell, PlainRow, SeqInfo

from . import serving
from .test_codec_fast import mutated

tablestore = pytest.importorskip("tablestore")
from tablestore import OTSServiceError
from tablestore.auth import RequestContext
from tablestore.plainbuffer.plain_buffer_coded_stream import PlainBufferCodedInputStream
from tablestore.plainbuffer.plain_buffer_stream import PlainBufferInputStream
from tablestore.protobuf import table_store_pb2 as sdk_pb

PK = [("k", "STRING"), ("s", "INTEGER")]
ACTIONS = {"PUT": sdk_pb.PUT_ROW, "UPDATE": sdk_pb.UPDATE_ROW, "DELETE": sdk_pb.DELETE_ROW}
EXTENSION_BYTES = 1 + 4 + 1 + 4 + pbuf.SEQ_INFO_LENGTH  # TAG_EXTENSION len TAG_SEQ_INFO len ...


# -- a server in this process, and the SDK's request pieces ---------------------------------


@pytest.fixture(params=["v2", "v4"])
def client(request, in_process):
    """An official-SDK OTSClient on the store ``in_process`` serves, signing with V2 or V4."""
    return serving.official_client(in_process[1].endpoint, request.param,
                                   "widetable-tests-streams", max_connection=2)


def call(client, api: str, request):
    """Send ``request`` as ``POST /<api>``, signed the SDK's way; the answer's headers and
    signature are checked the SDK's way too. The response message, or OTSServiceError."""
    context = RequestContext(client.credentials_provider.get_credentials())
    body = request.SerializeToString()
    query = "/" + api
    protocol = client.protocol
    headers = protocol._make_request_headers(body, query, client._signer, context)
    status, _, res_headers, res_body = client.connection.send_receive(query, headers, body)
    std = protocol._convert_urllib3_headers(res_headers)
    protocol._check_headers(std, res_body, status=status)
    if 200 <= status < 300:
        protocol._check_authorization(query, std, status, client._signer, context)
        return getattr(sdk_pb, f"{api}Response").FromString(res_body)
    error = sdk_pb.Error.FromString(res_body)
    raise OTSServiceError(status, error.code, error.message, std.get("x-ots-requestid", ""))


def failure(client, api: str, request) -> OTSServiceError:
    with pytest.raises(OTSServiceError) as info:
        call(client, api, request)
    return info.value


def list_stream(client, table: str | None = None):
    req = sdk_pb.ListStreamRequest()
    if table is not None:
        req.table_name = table
    return call(client, "ListStream", req)


def describe(client, stream_id: str, start: str | None = None, limit: int | None = None):
    req = sdk_pb.DescribeStreamRequest(stream_id=stream_id)
    if start is not None:
        req.inclusive_start_shard_id = start
    if limit is not None:
        req.shard_limit = limit
    return call(client, "DescribeStream", req)


def iterator(client, stream_id: str, shard_id: str) -> str:
    req = sdk_pb.GetShardIteratorRequest(stream_id=stream_id, shard_id=shard_id)
    return call(client, "GetShardIterator", req).shard_iterator


def records(client, it: str, limit: int | None = None):
    req = sdk_pb.GetStreamRecordRequest(shard_iterator=it)
    if limit is not None:
        req.limit = limit
    return call(client, "GetStreamRecord", req)


def read_shard(client, it: str, limit: int) -> tuple[list, object]:
    """Every record from ``it`` in pages of ``limit``, and the last page."""
    out = []
    while True:
        page = records(client, it, limit)
        out += page.stream_records
        if not page.stream_records or not page.HasField("next_shard_iterator"):
            return out, page
        it = page.next_shard_iterator


def strip_extension(buf: bytes) -> bytes:
    """The record without its row extension, which sits just before the row checksum and
    outside it: what remains is a plain row (the Python SDK's reader knows no extensions)."""
    ext = len(buf) - 2 - EXTENSION_BYTES
    assert buf[ext] == pbuf.TAG_EXTENSION and buf[-2] == pbuf.TAG_ROW_CHECKSUM
    return buf[:ext] + buf[-2:]


def sdk_row(buf: bytes) -> tuple[list, list]:
    """``(primary key, [(name, value, timestamp)])`` as the official SDK reads a row."""
    pk, cells = PlainBufferCodedInputStream(PlainBufferInputStream(buf)).read_row()
    return [(n, _plain(v)) for n, v in pk], [(n, _plain(v), ts) for n, v, ts in cells]


def _plain(value):
    return bytes(value) if isinstance(value, bytearray) else value  # the SDK's BINARY


def extension_bytes(epoch: int, ts_us: int, row_index: int) -> bytes:
    """A row extension holding one sequence info, laid out by hand from the protocol."""
    return (bytes([0x0B]) + struct.pack("<I", 24) + bytes([0x0C]) + struct.pack("<I", 19)
            + bytes([0x0D]) + struct.pack("<I", epoch) + bytes([0x0E]) + struct.pack("<q", ts_us)
            + bytes([0x0F]) + struct.pack("<I", row_index))


def expected_extension(seq: int, ts_ms: int) -> bytes:
    """The extension of the record with sequence number ``seq`` committed at ``ts_ms``."""
    return extension_bytes(seq >> 32, ts_ms * 1000, seq & 0xFFFFFFFF)


def write_changes(db) -> int:
    """A put, updates of all three change kinds, a delete; returns the deleted version."""
    t = db.table("t")
    old = now_ms() - 60_000
    t.put_row(("a", 1), {"i": 1, "f": 1.5, "c": "x", "b": b"\x00\xff", "ok": True, "v": (7, old)})
    t.update_row(("a", 1), put={"i": 2})  # only puts: the SDK reads it
    t.update_row(("a", 1), put={"n": 9}, delete_column=["c"], delete_version={"v": old})
    t.delete_row(("a", 1))
    t.put_row(("b", 2), {"x": "y"})
    return old


# -- the four APIs -------------------------------------------------------------------------


def test_records_over_the_wire_match_the_embedded_stream(in_process, client) -> None:
    db, _ = in_process
    db.create_table("t", PK, stream=True, stream_retention=5401)
    db.create_table("plain", PK)
    old = write_changes(db)
    [info] = db.list_stream()

    listed = list_stream(client).streams
    assert [(s.stream_id, s.table_name, s.creation_time) for s in listed] == [
        (info.stream_id, "t", round(info.created_at * 1_000_000))]
    assert [s.stream_id for s in list_stream(client, "t").streams] == [info.stream_id]
    assert list(list_stream(client, "plain").streams) == []

    d = describe(client, info.stream_id)
    assert (d.stream_id, d.table_name, d.creation_time) == (info.stream_id, "t", listed[0].creation_time)
    assert d.expiration_time == 2  # 5401 s, rounded up to hours
    assert d.stream_status == sdk_pb.STREAM_ACTIVE
    assert [s.shard_id for s in d.shards] == ["0"] and not d.HasField("next_shard_id")
    assert not d.shards[0].HasField("parent_id") and not d.shards[0].HasField("parent_sibling_id")

    got, last = read_shard(client, iterator(client, info.stream_id, "0"), limit=2)
    assert last.HasField("next_shard_iterator")  # an open shard: more may come
    want = db.get_stream_record(db.get_shard_iterator(info.stream_id, 0)).records
    assert [r.operation for r in want] == ["PUT", "UPDATE", "UPDATE", "DELETE", "PUT"]
    assert [m.action_type for m in got] == [ACTIONS[r.operation] for r in want]
    for msg, rec in zip(got, want):
        row = pbuf.decode_row(msg.record)  # ours: it reads the extension and cell types
        assert row.primary_key == list(zip(["k", "s"], rec.primary_key))
        assert not row.delete_marker  # a DELETE_ROW record is its primary key alone
        # The sequence info gives back the record's sequence number and commit time.
        epoch, ts_us, index = row.sequence
        assert ((epoch << 32) | index, ts_us) == (rec.sequence, rec.timestamp * 1000)
        assert msg.record[-2 - EXTENSION_BYTES:-2] == expected_extension(rec.sequence, rec.timestamp)
        kinds = {None: "PUT", pbuf.DELETE_ONE_VERSION: "DELETE_ONE_VERSION",
                 pbuf.DELETE_ALL_VERSION: "DELETE_ALL_VERSIONS"}
        assert [(c.name, kinds[c.op], c.value, c.timestamp) for c in row.cells] == [
            (c.name, c.kind, c.value, c.timestamp) for c in rec.columns]
        if all(c.kind == "PUT" for c in rec.columns):
            # The official SDK's reader on the same row, minus the extension it cannot read.
            # (It cannot read cell types either, DELETE_ONE_VERSION / DELETE_ALL_VERSION:
            # its read_column refers to an undefined name there; ours decodes those above.)
            pk, cells = sdk_row(strip_extension(msg.record))
            assert pk == row.primary_key
            assert cells == [(c.name, c.value, c.timestamp) for c in rec.columns]
    put, _, update, delete, _ = [pbuf.decode_row(m.record) for m in got]
    assert {(c.name, c.value) for c in put.cells} == {
        ("i", 1), ("f", 1.5), ("c", "x"), ("b", b"\x00\xff"), ("ok", True), ("v", 7)}
    assert [c.timestamp for c in put.cells if c.name == "v"] == [old]
    changes = {c.name: c for c in update.cells}
    assert changes["n"].value == 9 and changes["n"].op is None and changes["n"].timestamp > old
    assert changes["v"] == Cell("v", None, pbuf.DELETE_ONE_VERSION, old)
    assert changes["c"] == Cell("c", None, pbuf.DELETE_ALL_VERSION, None)
    assert (delete.cells, delete.primary_key) == ([], [("k", "a"), ("s", 1)])
    seqs = [pbuf.decode_row(m.record).sequence for m in got]
    assert seqs == sorted(seqs)  # (epoch, timestamp, row_index) orders them as the log does

    # One request with the default limit (100) gives the same records.
    page = records(client, iterator(client, info.stream_id, "0"))
    assert [m.record for m in page.stream_records] == [m.record for m in got]
    # A later write shows up from where the last page left off.
    db.table("t").put_row(("c", 3), {"x": 1})
    more = records(client, last.next_shard_iterator)
    assert [pbuf.decode_row(m.record).primary_key for m in more.stream_records] == [
        [("k", "c"), ("s", 3)]]


def test_shard_paging_split_and_merge_links_and_a_drained_shard(in_process, client) -> None:
    db, _ = in_process
    db.create_table("t", [("k", "STRING")], stream=True)
    t = db.table("t")
    t.put_row(("a",), {"v": 0})  # shard 0
    t.put_row(("x",), {"v": 0})
    db.split_partition("t", "m")  # 0 -> 1, 2
    t.put_row(("a",), {"v": 1})  # shard 1
    t.put_row(("x",), {"v": 1})  # shard 2
    db.merge_partitions("t", 0)  # 1 + 2 -> 3
    t.put_row(("a",), {"v": 2})  # shard 3
    sid = db.list_stream()[0].stream_id
    embedded = {s.shard_id: s for s in db.describe_stream(sid).shards}

    whole = describe(client, sid)
    assert not whole.HasField("next_shard_id")
    links = {s.shard_id: (s.parent_id if s.HasField("parent_id") else None,
                          s.parent_sibling_id if s.HasField("parent_sibling_id") else None)
             for s in whole.shards}
    assert [s.shard_id for s in whole.shards] == ["0", "1", "2", "3"]
    assert links["0"] == (None, None)
    assert links["1"] == links["2"] == ("0", None)  # a split: one parent
    merged = embedded[3].parents
    assert sorted(merged) == [1, 2] and links["3"] == (str(merged[0]), str(merged[1]))

    # Pages of one shard, then of three, chained by next_shard_id.
    for limit, pages in ((1, [["0"], ["1"], ["2"], ["3"]]), (3, [["0", "1", "2"], ["3"]])):
        seen, start = [], None
        while True:
            page = describe(client, sid, start, limit)
            seen.append([s.shard_id for s in page.shards])
            if not page.HasField("next_shard_id"):
                break
            start = page.next_shard_id
        assert seen == pages
    assert [s.shard_id for s in describe(client, sid, "2").shards] == ["2", "3"]
    assert [s.shard_id for s in describe(client, sid, "3", 5).shards] == ["3"]

    # A closed shard read to its end has no next iterator; an open one keeps one.
    for shard, values in (("0", [0, 0]), ("1", [1]), ("2", [1])):
        got, last = read_shard(client, iterator(client, sid, shard), limit=1)
        assert [pbuf.decode_row(m.record).cells[0].value for m in got] == values
        assert not last.HasField("next_shard_iterator")
        assert embedded[int(shard)].closed
    got, last = read_shard(client, iterator(client, sid, "3"), limit=10)
    assert [pbuf.decode_row(m.record).cells[0].value for m in got] == [2]
    assert last.HasField("next_shard_iterator")


def test_errors(in_process, client) -> None:
    db, _ = in_process
    db.create_table("t", PK, stream=True)
    db.create_table("plain", PK)
    db.table("t").put_row(("a", 1), {"x": 1})
    sid = db.list_stream()[0].stream_id
    plain_id = f"plain/{db.table('plain').schema.table_id}"

    def check(e: OTSServiceError, code: str, *words: str) -> None:
        assert (e.get_error_code(), e.get_http_status()) == (code, 404 if code == "OTSObjectNotExist" else 400)
        for w in words:
            assert w in e.get_error_message(), (w, e.get_error_message())

    # No stream: a table without one, an unknown id, a missing table.
    for stream_id in (plain_id, "nope/1", "nope", ""):
        check(failure(client, "DescribeStream", sdk_pb.DescribeStreamRequest(stream_id=stream_id)),
              "OTSObjectNotExist")
        check(failure(client, "GetShardIterator",
                      sdk_pb.GetShardIteratorRequest(stream_id=stream_id, shard_id="0")),
              "OTSObjectNotExist")
    check(failure(client, "ListStream", sdk_pb.ListStreamRequest(table_name="missing")),
          "OTSObjectNotExist")
    # Shard ids are decimal shard numbers; anything else is named in the error.
    for bad in ("abc", "01", "-1", "1.0", " 1", "", "99999999999", "٣"):
        check(failure(client, "GetShardIterator",
                      sdk_pb.GetShardIteratorRequest(stream_id=sid, shard_id=bad)),
              "OTSParameterInvalid", repr(bad), "shard_id")
    for bad in ("x", "01", "7"):
        e = failure(client, "DescribeStream",
                    sdk_pb.DescribeStreamRequest(stream_id=sid, inclusive_start_shard_id=bad))
        check(e, "OTSParameterInvalid", repr(bad), "inclusive_start_shard_id")
    for bad in (0, -3):
        e = failure(client, "DescribeStream", sdk_pb.DescribeStreamRequest(stream_id=sid, shard_limit=bad))
        check(e, "OTSParameterInvalid", "shard_limit", str(bad))
    check(failure(client, "GetShardIterator", sdk_pb.GetShardIteratorRequest(stream_id=sid, shard_id="7")),
          "OTSParameterInvalid", "7")
    # Iterators and limits.
    it = iterator(client, sid, "0")
    for limit in (0, 1001, -1):
        check(failure(client, "GetStreamRecord",
                      sdk_pb.GetStreamRecordRequest(shard_iterator=it, limit=limit)),
              "OTSParameterInvalid", "limit", str(limit))
    assert len(records(client, it, 1000).stream_records) == 1
    check(failure(client, "GetStreamRecord", sdk_pb.GetStreamRecordRequest(shard_iterator="nope")),
          "OTSParameterInvalid", "iterator")
    # The stream turned off: its id and iterators no longer resolve.
    db.update_table("t", stream=False)
    check(failure(client, "GetStreamRecord", sdk_pb.GetStreamRecordRequest(shard_iterator=it)),
          "OTSObjectNotExist")
    check(failure(client, "DescribeStream", sdk_pb.DescribeStreamRequest(stream_id=sid)),
          "OTSObjectNotExist")
    assert list(list_stream(client).streams) == []


def test_stream_apis_run_in_the_pool() -> None:
    from widetable.server.tablestore import service

    for api in ("ListStream", "DescribeStream", "GetShardIterator", "GetStreamRecord"):
        assert api in service.HANDLERS and api not in service.LATER
        assert service.pooled(api, None, 10)


# -- PlainBuffer's row extension -----------------------------------------------------------

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.binary(max_size=12),
                   st.booleans(), st.floats(allow_nan=False))
pk_values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.binary(max_size=12))
seq_infos = st.builds(SeqInfo, st.integers(0, 2**32 - 1), st.integers(-(2**63), 2**63 - 1),
                      st.integers(0, 2**32 - 1))
cells = st.builds(Cell, names, st.one_of(st.none(), values),
                  st.sampled_from([None, pbuf.DELETE_ALL_VERSION, pbuf.DELETE_ONE_VERSION,
                                   pbuf.INCREMENT]),
                  st.one_of(st.none(), st.integers(0, 2**62)))
rows = st.builds(PlainRow, st.lists(st.tuples(names, values), min_size=1, max_size=3),
                 st.lists(cells, max_size=4), st.booleans(), st.one_of(st.none(), seq_infos))


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, min_size=1, max_size=3))
def test_rows_with_sequence_info_round_trip(plain: list[PlainRow]) -> None:
    data = pbuf.encode_rows(plain)
    assert pbuf.decode_rows(data) == plain
    for row in plain:
        one = pbuf.encode_row(row)
        assert pbuf.decode_row(one) == row
        bare = pbuf.encode_row(PlainRow(row.primary_key, row.cells, row.delete_marker))
        if row.sequence is None:
            assert one == bare
            continue
        # The extension sits before the row checksum and outside it: the same row without
        # it is the row without a sequence, checksum and all.
        assert strip_extension(one) == bare
        assert one[-2 - EXTENSION_BYTES:-2] == extension_bytes(*row.sequence)
        with pytest.raises(pbuf._Slow):  # the fast decoder leaves extensions to the careful one
            pbuf._fast_rows(one, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(names, pk_values), min_size=1, max_size=3),
       st.lists(st.tuples(names, values, st.integers(0, 2**62)), max_size=4), seq_infos)
def test_the_sdk_reads_our_rows_once_the_extension_is_gone(pk, cols, seq) -> None:
    row = PlainRow(pk, [Cell(n, v, None, ts) for n, v, ts in cols], False, seq)
    data = pbuf.encode_row(row)
    assert sdk_row(strip_extension(data)) == (pk, cols)


def _extension(*items: bytes) -> bytes:
    body = b"".join(items)
    return bytes([pbuf.TAG_EXTENSION]) + struct.pack("<I", len(body)) + body


def _item(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + struct.pack("<I", len(body)) + body


def _seq_body(epoch: int = 1, ts: int = 2, index: int = 3) -> bytes:
    return (bytes([pbuf.TAG_SEQ_INFO_EPOCH]) + struct.pack("<I", epoch) + bytes([pbuf.TAG_SEQ_INFO_TS])
            + struct.pack("<q", ts) + bytes([pbuf.TAG_SEQ_INFO_ROW_INDEX]) + struct.pack("<I", index))


def _with(extension: bytes, marker: bool = False) -> bytes:
    """A row (with a delete marker if asked) carrying ``extension`` before its checksum."""
    bare = pbuf.encode_row(PlainRow([("k", 1)], [Cell("c", "v", None, 5)], marker))
    return bare[:-2] + extension + bare[-2:]


def test_extension_items_of_other_tags_are_skipped() -> None:
    seq = _item(pbuf.TAG_SEQ_INFO, _seq_body(4, -5, 6))
    for ext, want in ((_extension(seq), SeqInfo(4, -5, 6)),
                      (_extension(_item(0x10, b"future"), seq, _item(0x7F, b"")), SeqInfo(4, -5, 6)),
                      (_extension(_item(0x10, b"\x0c\x0d\x0e")), None),
                      (_extension(), None)):
        for marker in (False, True):
            row = pbuf.decode_row(_with(ext, marker))
            assert (row.sequence, row.delete_marker, row.cells) == (want, marker, [Cell("c", "v", None, 5)])
    two = pbuf.encode_rows([PlainRow([("k", 1)]), PlainRow([("k", 2)], sequence=SeqInfo(1, 2, 3)),
                            PlainRow([("k", 3)])])
    assert [r.sequence for r in pbuf.decode_rows(two)] == [None, SeqInfo(1, 2, 3), None]


@pytest.mark.parametrize("ext, fault", [
    (_extension(_item(pbuf.TAG_SEQ_INFO, _seq_body()[:-1])), "sequence info length"),
    (_extension(_item(pbuf.TAG_SEQ_INFO, _seq_body() + b"\0")), "sequence info length"),
    (_extension(_item(pbuf.TAG_SEQ_INFO, _seq_body()), _item(pbuf.TAG_SEQ_INFO, _seq_body())),
     "two sequence infos"),
    (_extension(_item(pbuf.TAG_SEQ_INFO, bytes([pbuf.TAG_SEQ_INFO_TS]) + _seq_body()[1:])), "epoch"),
    (bytes([pbuf.TAG_EXTENSION]) + struct.pack("<I", 8) + bytes([0x10]) + struct.pack("<I", 10)
     + b"abc", "overruns its extension"),
    (bytes([pbuf.TAG_EXTENSION]) + struct.pack("<I", 1000), "extension length"),
    (_extension(b"\x10\x01"), "left"),
])
def test_malformed_extensions_are_a_clear_parameter_invalid(ext: bytes, fault: str) -> None:
    with pytest.raises(pbuf.PlainBufferError, match=fault) as err:
        pbuf.decode_row(_with(ext))
    assert err.value.code == "OTSParameterInvalid"


def test_every_truncation_of_an_extension_row_is_caught() -> None:
    data = pbuf.encode_row(PlainRow([("k", "v")], [Cell("c", 5, None, 7)], True, SeqInfo(1, 2, 3)))
    for n in range(len(data)):
        with pytest.raises(pbuf.PlainBufferError):
            pbuf.decode_row(data[:n])


@pytest.mark.parametrize("seq", [SeqInfo(-1, 0, 0), SeqInfo(2**32, 0, 0), SeqInfo(0, 2**63, 0),
                                 SeqInfo(0, 0, 2**32), SeqInfo(0, 1.5, 0), (1, 2), "seq"])
def test_sequence_infos_out_of_range_are_refused(seq) -> None:
    with pytest.raises(ParameterInvalid, match="sequence info"):
        pbuf.encode_row(PlainRow([("k", 1)], sequence=seq))


edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.integers(0, 255)),
                 min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, min_size=1, max_size=3), edits)
def test_mutated_extension_rows_fail_only_with_parameter_invalid(plain, changes) -> None:
    data = mutated(plain, changes)
    try:
        careful = pbuf.decode_rows(data)
    except pbuf.PlainBufferError:
        careful = "error"
    try:
        fast = pbuf._fast_rows(data, False)
    except pbuf._BAIL:
        return
    assert fast == careful
