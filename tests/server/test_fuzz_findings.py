"""Defects the protocol fuzzer (``bench/fuzz``) found, each pinned over a plain socket
against ``widetable serve`` as the fuzzer met it."""

from __future__ import annotations

import socket
import time

from bench.fuzz import wire

from . import serving


def _account(server) -> wire.Account:
    return wire.Account("127.0.0.1", server.port, serving.ACCESS_KEY_ID,
                        serving.ACCESS_KEY_SECRET, serving.INSTANCE)


def _error(reply: wire.Reply) -> tuple[int | None, str]:
    from tablestore.protobuf import table_store_pb2 as p

    return reply.status, p.Error.FromString(reply.body).code


def test_a_head_ending_in_bare_lf_is_answered_not_waited_on(server) -> None:
    """A request whose lines end in LF alone, head ended by LF LF, got no answer: the
    server looked only for CRLF CRLF and waited for more bytes until the idle timeout.
    It is now refused at once, as a bare LF anywhere in a head already was."""
    account = _account(server)
    body = b""
    headers = wire.sign(account, "ListTable", wire.ots_headers(account, "ListTable", body))
    data = wire.http_request("/ListTable", headers, body).replace(b"\r\n", b"\n")
    for sent in (data, data[:data.index(b"\n") + 1] + b"\n"):  # a whole head; a line, then LF
        conn = wire.Conn(account, timeout=5)
        try:
            started = time.monotonic()
            conn.send(sent)
            reply = conn.read_http()
            assert not reply.timed_out, "no answer to a head ended by LF LF"
            assert _error(reply) == (400, "OTSParameterInvalid")
            assert time.monotonic() - started < 3
            assert conn.wait_closed(5)
        finally:
            conn.close()


def test_lf_lf_inside_a_body_is_still_a_body(server) -> None:
    """The bare-LF check looks at the head only: a body may hold LF LF."""
    account = _account(server)
    body = b"\n\n"  # not a ListTableRequest's bytes that parse, so 400, but an answer to a whole request
    headers = wire.sign(account, "ListTable", wire.ots_headers(account, "ListTable", body))
    conn = wire.Conn(account, timeout=5)
    try:
        conn.send(wire.http_request("/ListTable", headers, body))
        reply = conn.read_http()
    finally:
        conn.close()
    assert reply.status is not None and reply.status < 500
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /ListTable HTTP/1.1\r\nContent-Length: 0\r\n")  # a head not yet whole
        s.settimeout(0.5)
        try:
            got = s.recv(100)
        except TimeoutError:
            got = None
        assert got is None, "a head still arriving must be waited for"


def _empty_sub_filter() -> bytes:
    """A composite filter whose one sub-filter has neither its type nor its filter (both
    required fields), as protobuf parses without complaint."""
    from tablestore.protobuf import table_store_filter_pb2 as f

    composite = f.CompositeColumnValueFilter(combinator=f.LO_NOT)
    composite.sub_filters.add()
    return f.Filter(type=f.FT_COMPOSITE_COLUMN_VALUE,
                    filter=composite.SerializePartialToString()).SerializeToString()


def test_a_sub_filter_missing_required_fields_is_parameter_invalid(server) -> None:
    """Such a filter raised protobuf's EncodeError while the server re-serialized the
    sub-filter: an internal error with its text over the native protocol (a 500 over
    Tablestore's). Both now answer OTSParameterInvalid, and nothing reaches the log."""
    import msgpack
    from tablestore import CapacityUnit, ReservedThroughput, TableMeta, TableOptions
    from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder
    from tablestore.protobuf import table_store_pb2 as p

    account = _account(server)
    ots = serving.official_client(server.endpoint, "v2", "widetable-tests-sdk")
    ots.create_table(TableMeta("fzf", [("k", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    try:
        key = bytes(PlainBufferBuilder.serialize_primary_key([("k", "a")]))
        for filter_ in (_empty_sub_filter(),):
            body = p.GetRowRequest(table_name="fzf", primary_key=key, max_versions=1,
                                   filter=filter_).SerializeToString()
            conn = wire.Conn(account, timeout=10)
            try:
                conn.send(wire.http_request("/GetRow", wire.sign(
                    account, "GetRow", wire.ots_headers(account, "GetRow", body)), body))
                assert _error(conn.read_http()) == (400, "OTSParameterInvalid")
            finally:
                conn.close()
            native = wire.upgrade(account, timeout=10)
            try:
                for call in ([1, "fzf", ["a"], None, None, None, filter_, None],  # GET_ROW
                             [3, "fzf", ["a"], {"v": 1}, p.Condition(  # PUT_ROW, a condition
                                 row_existence=0, column_condition=filter_).SerializeToString(),
                              None]):
                    frame = msgpack.packb(call)
                    native.send(wire.FRAME_HEADER.pack(len(frame)) + frame)
                    answer = msgpack.unpackb(native.read_frame().frame)
                    assert answer[:2] == [1, "OTSParameterInvalid"], answer
            finally:
                native.close()
        _, row, _ = ots.get_row("fzf", [("k", "a")], max_version=1)
        assert row is None  # the put with the bad condition wrote nothing
    finally:
        ots.delete_table("fzf")


def _post(account: wire.Account, api: str, body: bytes) -> wire.Reply:
    conn = wire.Conn(account, timeout=10)
    try:
        conn.send(wire.http_request("/" + api, wire.sign(
            account, api, wire.ots_headers(account, api, body)), body))
        return conn.read_http()
    finally:
        conn.close()


def test_malformed_messages_inside_search_requests_are_parameter_invalid(server) -> None:
    """A search query (a protobuf message carried in a bytes field, and each query inside
    it in another) that does not parse raised protobuf's DecodeError inside the handler:
    500 OTSInternalServerError and a traceback in the log. It is now 400
    OTSParameterInvalid, like a body that does not parse. So is a minimum_should_match
    that is not a number (its int() raised ValueError: 500 too)."""
    from tablestore import CapacityUnit, ReservedThroughput, TableMeta, TableOptions
    from tablestore.protobuf import search_pb2 as s

    account = _account(server)
    ots = serving.official_client(server.endpoint, "v2", "widetable-tests-sdk")
    ots.create_table(TableMeta("fzs", [("k", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    try:
        term = s.SearchQuery(query=s.Query(type=s.TERM_QUERY, query=b"\xff")).SerializeToString()
        for api, body in (
            ("Search", s.SearchRequest(table_name="fzs", index_name="ix",
                                       search_query=b"\x0a\xff")),
            ("Search", s.SearchRequest(table_name="fzs", index_name="ix", search_query=term)),
            ("ParallelScan", s.ParallelScanRequest(table_name="fzs", index_name="ix",
                                                   scan_query=b"\x0a\xff", session_id=b"x")),
        ) + tuple(  # a minimum_should_match (a string on the wire) that is not a number
            ("Search", s.SearchRequest(table_name="fzs", index_name="ix", search_query=s.SearchQuery(
                query=s.Query(type=kind, query=msg.SerializePartialToString())
            ).SerializeToString()))
            for kind, msg in ((s.BOOL_QUERY, s.BoolQuery(new_minimum_should_match="(\\d+)")),
                              (s.MATCH_QUERY, s.MatchQuery(field_name="k", text="a",
                                                           new_minimum_should_match="x")))):
            reply = _post(account, api, body.SerializePartialToString())
            assert _error(reply) == (400, "OTSParameterInvalid"), (api, reply)
    finally:
        ots.delete_table("fzs")


def test_text_that_is_not_utf8_inside_search_requests_is_parameter_invalid(server) -> None:
    """Tablestore's messages are proto2: protobuf hands back a ``string`` field holding
    invalid UTF-8 as ``bytes``. An aggregation whose field_name was such bytes reached
    the index's field lookup and raised TypeError (500). It is now 400
    OTSParameterInvalid, at the request body and inside the messages carried in it."""
    from tablestore import (CapacityUnit, FieldSchema, FieldType, ReservedThroughput,
                            SearchIndexMeta, TableMeta, TableOptions)
    from tablestore.protobuf import search_pb2 as s

    account = _account(server)
    ots = serving.official_client(server.endpoint, "v2", "widetable-tests-sdk")
    ots.create_table(TableMeta("fzu", [("k", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    try:
        ots.create_search_index("fzu", "ix", SearchIndexMeta(
            [FieldSchema("n", FieldType.LONG, enable_sort_and_agg=True)]))

        def bad(message) -> bytes:  # the field name "nn" replaced by two bytes that are not UTF-8
            return message.SerializeToString().replace(b"nn", b"\xff\xfe")

        match_all = s.Query(type=s.MATCH_ALL_QUERY, query=s.MatchAllQuery().SerializeToString())
        agg = s.Aggregation(name="a", type=s.AGG_SUM,
                            body=bad(s.SumAggregation(field_name="nn")))
        group = s.GroupBy(name="g", type=s.GROUP_BY_FIELD,
                          body=bad(s.GroupByField(field_name="nn", size=3)))
        for query in (s.SearchQuery(query=match_all, aggs=s.Aggregations(aggs=[agg])),
                      s.SearchQuery(query=match_all, group_bys=s.GroupBys(group_bys=[group]))):
            body = s.SearchRequest(table_name="fzu", index_name="ix",
                                   search_query=query.SerializeToString())
            reply = _post(account, "Search", body.SerializeToString())
            assert _error(reply) == (400, "OTSParameterInvalid"), reply
        body = s.SearchRequest(table_name="fzu", index_name="ix",
                               search_query=s.SearchQuery(query=match_all).SerializeToString())
        reply = _post(account, "Search", body.SerializeToString().replace(b"fzu", b"\xff\xfe\xfd"))
        assert _error(reply) == (400, "OTSParameterInvalid"), reply
    finally:
        ots.delete_search_index("fzu", "ix")
        ots.delete_table("fzu")
