"""Seeds: valid requests of both protocols, recorded from real clients on the wire.

A recording proxy sits between a client and ``widetable serve`` and keeps what
the client sent. The official ``tablestore`` SDK then runs a workload of every
served API (its HTTP requests are the Tablestore seeds), and ``widetable.connect``
runs one over widetable's own protocol (its frames, after the upgrade, are the
native seeds). The fuzzer mutates these, so it starts from what real clients
send rather than from what its author thought they send.

The workload writes with explicit timestamps into the fuzz tables (``TABLES``),
so a seed sent again as it is rewrites a row as it was; DDL seeds name tables
that do not exist.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass

from . import wire

TABLES = {  # name -> primary key (the fuzz tables; their rows must survive the run unchanged)
    "fz_a": [("k", "STRING"), ("n", "INTEGER")],
    "fz_b": [("h", "INTEGER"), ("r", "BINARY")],
    "fz_s": [("p", "STRING")],  # with a stream: the stream calls' seeds read it
    "fz_q": [("id", "INTEGER")],  # with a search index: the search calls' seeds query it
}
LIVE = "fz_live"  # the valid clients' table, written throughout the run
ABSENT = "fz_absent"  # the name DDL seeds use
STREAMED = "fz_s"
SEARCHED, SEARCH_INDEX = "fz_q", "fz_q_ix"


@dataclass(frozen=True, slots=True)
class HttpSeed:
    api: str
    headers: dict[str, str]  # as sent, lower-cased names
    body: bytes


@dataclass(frozen=True, slots=True)
class NativeSeed:
    frame: bytes  # one MessagePack array (without its length)


class Recorder:
    """A TCP proxy on a free loopback port that keeps every byte its clients send."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.streams: list[bytearray] = []
        self._threads: list[threading.Thread] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True, name="fuzz-recorder").start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            sent = bytearray()
            self.streams.append(sent)
            for src, dst, keep in ((client, server, sent), (server, client, None)):
                t = threading.Thread(target=_pump, args=(src, dst, keep), daemon=True)
                t.start()
                self._threads.append(t)

    def close(self) -> None:
        self._stop = True
        self.listener.close()


def _pump(src: socket.socket, dst: socket.socket, keep: bytearray | None) -> None:
    try:
        while data := src.recv(65536):
            if keep is not None:
                keep += data
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def parse_stream(data: bytes) -> tuple[list[HttpSeed], list[NativeSeed]]:
    """The HTTP requests of one recorded connection, and its native frames if it upgraded."""
    http, native = [], []
    pos = 0
    while True:
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        lines = data[pos:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = data[end + 4:end + 4 + length]
        api = lines[0].split(" ")[1].lstrip("/")
        pos = end + 4 + length
        if api == wire.NATIVE_API:
            while pos + 4 <= len(data):
                size = wire.FRAME_HEADER.unpack_from(data, pos)[0]
                native.append(NativeSeed(bytes(data[pos + 4:pos + 4 + size])))
                pos += 4 + size
            break
        http.append(HttpSeed(api, headers, bytes(body)))
    return http, native


def record(account: wire.Account) -> tuple[list[HttpSeed], list[NativeSeed]]:
    """Create the fuzz tables and their rows through the proxy; the seeds it recorded."""
    recorder = Recorder((account.host, account.port))
    endpoint = f"http://127.0.0.1:{recorder.port}"
    try:
        _sdk_workload(endpoint, account)
        _native_workload(endpoint, account)
        time.sleep(0.2)  # the pumps copy the last bytes
    finally:
        recorder.close()
    http, native = [], []
    for stream in recorder.streams:
        h, n = parse_stream(bytes(stream))
        http += h
        native += n
    return http, native


def sdk_client(endpoint: str, account: wire.Account, **options):
    from tablestore import OTSClient

    logging.getLogger("widetable-fuzz-sdk").setLevel(logging.CRITICAL)
    return OTSClient(endpoint, account.key_id, account.secret, account.instance,
                     logger_name="widetable-fuzz-sdk", **options)


def _sdk_workload(endpoint: str, account: wire.Account) -> None:
    from tablestore import (
        INF_MAX,
        INF_MIN,
        BatchGetRowRequest,
        BatchWriteRowRequest,
        CapacityUnit,
        ComparatorType,
        CompositeColumnCondition,
        Condition,
        DeleteRowItem,
        Direction,
        LogicalOperator,
        OTSServiceError,
        PutRowItem,
        ReservedThroughput,
        Row,
        SingleColumnCondition,
        TableInBatchGetRowItem,
        TableInBatchWriteRowItem,
        TableMeta,
        TableOptions,
        UpdateRowItem,
    )

    ots = sdk_client(endpoint, account)
    ts = int(time.time() * 1000) - 3_600_000  # explicit: a seed sent again rewrites the same row

    def attempt(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OTSServiceError:
            return None

    for name, pk in TABLES.items():
        if name == STREAMED:
            continue  # created by widetable.connect, which turns its stream on
        ots.create_table(TableMeta(name, pk), TableOptions(max_version=3, time_to_live=-1),
                         ReservedThroughput(CapacityUnit(0, 0)))
    ots.create_table(TableMeta(LIVE, [("w", "STRING"), ("i", "INTEGER")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    for i in range(20):
        ots.put_row("fz_a", Row([("k", f"k{i % 4}"), ("n", i)],
                                [("s", f"v{i}", ts), ("i", i, ts), ("d", i / 3, ts),
                                 ("b", i % 2 == 0, ts), ("x", bytearray(b"\0\xff%d" % i), ts)]))
        ots.put_row("fz_b", Row([("h", i), ("r", bytearray(b"r%d" % i))], [("v", i, ts)]))
    key = [("k", "k1"), ("n", 1)]
    ots.get_row("fz_a", key, max_version=1)
    ots.get_row("fz_a", key, columns_to_get=["s", "i"], max_version=2, time_range=(ts - 1, ts + 1))
    ots.get_row("fz_a", key, column_filter=SingleColumnCondition("i", 1, ComparatorType.EQUAL),
                max_version=1)
    both = CompositeColumnCondition(LogicalOperator.OR)
    both.add_sub_condition(SingleColumnCondition("i", 1, ComparatorType.GREATER_THAN))
    both.add_sub_condition(SingleColumnCondition("s", "v", ComparatorType.LESS_EQUAL,
                                                 pass_if_missing=False))
    ots.get_row("fz_a", key, column_filter=both, max_version=1)
    ots.put_row("fz_a", Row(key, [("s", "v1", ts), ("i", 1, ts), ("d", 1 / 3, ts),
                                  ("b", False, ts), ("x", bytearray(b"\0\xff1"), ts)]),
                Condition("EXPECT_EXIST", SingleColumnCondition("i", 1, ComparatorType.EQUAL)))
    ots.update_row("fz_a", Row(key, {"PUT": [("i", 1, ts)]}), Condition("IGNORE"))
    attempt(ots.update_row, "fz_a", Row([("k", "zz"), ("n", 9)],
                                        {"PUT": [("i", 2, ts)], "DELETE_ALL": ["s"],
                                         "DELETE": [("d", None, ts)], "INCREMENT": [("c", 1)]}),
            Condition("EXPECT_EXIST"))
    attempt(ots.delete_row, "fz_a", Row([("k", "absent"), ("n", 0)]), Condition("EXPECT_EXIST"))
    ots.get_range("fz_a", Direction.FORWARD, [("k", INF_MIN), ("n", INF_MIN)],
                  [("k", INF_MAX), ("n", INF_MAX)], limit=7, max_version=1)
    ots.get_range("fz_a", Direction.BACKWARD, [("k", "k3"), ("n", INF_MAX)], [("k", "k1"), ("n", 3)],
                  columns_to_get=["i"], limit=3, max_version=1,
                  column_filter=SingleColumnCondition("i", 5, ComparatorType.NOT_EQUAL))
    ots.get_range("fz_b", Direction.FORWARD, [("h", 3), ("r", INF_MIN)], [("h", 9), ("r", INF_MAX)],
                  max_version=1)
    req = BatchGetRowRequest()
    req.add(TableInBatchGetRowItem("fz_a", [key, [("k", "k2"), ("n", 2)]], max_version=1))
    req.add(TableInBatchGetRowItem("fz_b", [[("h", 1), ("r", bytearray(b"r1"))]], max_version=1))
    ots.batch_get_row(req)
    req = BatchWriteRowRequest()
    req.add(TableInBatchWriteRowItem("fz_b", [
        PutRowItem(Row([("h", 2), ("r", bytearray(b"r2"))], [("v", 2, ts)]), Condition("IGNORE")),
        UpdateRowItem(Row([("h", 3), ("r", bytearray(b"r3"))], {"PUT": [("v", 3, ts)]}),
                      Condition("EXPECT_EXIST")),
        DeleteRowItem(Row([("h", 99), ("r", bytearray(b"none"))]), Condition("IGNORE")),
    ]))
    ots.batch_write_row(req)
    _search_workload(ots, attempt, ts)
    ots.list_table()
    ots.describe_table("fz_a")
    attempt(ots.describe_table, ABSENT)
    attempt(ots.update_table, ABSENT, TableOptions(max_version=2))
    attempt(ots.delete_table, ABSENT)
    attempt(ots.compute_splits, "fz_a", "idx")
    attempt(ots.delete_secondary_index, ABSENT, "ix")
    tid = ots.start_local_transaction("fz_b", [("h", 5)])
    ots.put_row("fz_b", Row([("h", 5), ("r", bytearray(b"r5"))], [("v", 5, ts)]), transaction_id=tid)
    ots.get_row("fz_b", [("h", 5), ("r", bytearray(b"r5"))], max_version=1, transaction_id=tid)
    ots.commit_transaction(tid)
    tid = ots.start_local_transaction("fz_b", [("h", 6)])
    ots.abort_transaction(tid)
    attempt(ots.list_search_index, "fz_a")


def _search_workload(ots, attempt, ts: int) -> None:
    """Search-index calls of the SDK: create, describe, list, queries, aggregations, scans."""
    import tablestore as ts_sdk
    from tablestore import (
        BoolQuery,
        ColumnReturnType,
        ColumnsToGet,
        FieldSchema,
        FieldSort,
        FieldType,
        MatchAllQuery,
        MatchQuery,
        PrefixQuery,
        RangeQuery,
        Row,
        ScanQuery,
        SearchIndexMeta,
        SearchQuery,
        Sort,
        SortOrder,
        TermQuery,
        TermsQuery,
        WildcardQuery,
    )
    from tablestore.aggregation import Count, Max, Sum
    from tablestore.group_by import GroupByField, GroupByRange

    for i in range(12):
        ots.put_row(SEARCHED, Row([("id", i)], [("kw", ["a", "b", "c"][i % 3], ts), ("n", i, ts),
                                                ("d", i / 2, ts), ("t", f"roast duck {i}", ts)]))
    fields = [FieldSchema("kw", FieldType.KEYWORD, index=True, enable_sort_and_agg=True),
              FieldSchema("n", FieldType.LONG, index=True, enable_sort_and_agg=True),
              FieldSchema("d", FieldType.DOUBLE, index=True, enable_sort_and_agg=True),
              FieldSchema("t", FieldType.TEXT, index=True,
                          analyzer=ts_sdk.AnalyzerType.SINGLEWORD)]
    attempt(ots.create_search_index, SEARCHED, SEARCH_INDEX, SearchIndexMeta(fields))
    time.sleep(0.5)  # the index catches up with the rows
    attempt(ots.describe_search_index, SEARCHED, SEARCH_INDEX)
    attempt(ots.list_search_index, SEARCHED)
    columns = ColumnsToGet(["kw", "n"], ColumnReturnType.SPECIFIED)
    for query in (TermQuery("kw", "a"), MatchQuery("t", "duck"), RangeQuery("n", 2, 9),
                  BoolQuery(must_queries=[RangeQuery("n", 1, 10, include_lower=True)],
                            must_not_queries=[TermQuery("kw", "b")]),
                  TermsQuery("kw", ["a", "c"]), PrefixQuery("kw", "a"), WildcardQuery("kw", "*b"),
                  MatchAllQuery()):
        attempt(ots.search, SEARCHED, SEARCH_INDEX,
                SearchQuery(query, sort=Sort([FieldSort("n", SortOrder.DESC)]), limit=5,
                            get_total_count=True), columns)
    attempt(ots.search, SEARCHED, SEARCH_INDEX, SearchQuery(
        MatchAllQuery(), limit=0, get_total_count=True,
        aggs=[Sum("n", name="s"), Max("d", name="m"), Count("kw", name="c")],
        group_bys=[GroupByField("kw", size=3, sub_aggs=[Sum("n", name="cs")], name="g"),
                   GroupByRange("n", [(0, 5), (5, 100)], name="r")]))
    splits = attempt(ots.compute_splits, SEARCHED, SEARCH_INDEX)
    if splits is not None:
        attempt(ots.parallel_scan, SEARCHED, SEARCH_INDEX, ScanQuery(
            MatchAllQuery(), limit=5, next_token=None, current_parallel_id=0,
            max_parallel=splits.splits_size),
            splits.session_id, ColumnsToGet(return_type=ColumnReturnType.NONE))
    attempt(ots.delete_search_index, ABSENT, "ix")


def _stream_workload(endpoint: str, account: wire.Account, protocol: str) -> None:
    """The stream calls over ``protocol``, on the table with a stream."""
    import widetable

    db = widetable.connect(endpoint, access_key_id=account.key_id,
                           access_key_secret=account.secret, instance=account.instance,
                           protocol=protocol)
    try:
        if STREAMED not in db.list_tables():
            db.create_table(STREAMED, [("p", "STRING")], stream=True)
            for i in range(5):
                db.table(STREAMED).put_row((f"p{i}",), {"v": i})
        stream = db.list_stream(STREAMED)[0]
        described = db.describe_stream(stream.stream_id)
        iterator = db.get_shard_iterator(stream.stream_id, described.shards[0].shard_id)
        db.get_stream_record(iterator, limit=3)
    finally:
        db.close()


def _native_workload(endpoint: str, account: wire.Account) -> None:
    import widetable

    _stream_workload(endpoint, account, "native")
    _stream_workload(endpoint, account, "tablestore")
    db = widetable.connect(endpoint, access_key_id=account.key_id,
                           access_key_secret=account.secret, instance=account.instance,
                           protocol="native")
    ts = int(time.time() * 1000) - 3_600_000
    try:
        a, b = db.table("fz_a"), db.table("fz_b")
        a.get_row(("k1", 1))
        a.get_row(("k1", 1), columns=["s"], max_versions=2, time_range=(ts - 1, ts + 1))
        a.get_range(("k0", widetable.INF_MIN), ("k2", widetable.INF_MAX), limit=5)
        a.get_range(("k3", widetable.INF_MAX), ("k1", 0), direction="backward", limit=3,
                    columns=["i"])
        a.put_row(("k2", 2), {"s": ("v2", ts), "i": (2, ts), "d": (2 / 3, ts), "b": (True, ts),
                              "x": (b"\0\xff2", ts)})
        a.update_row(("k2", 2), put={"i": (2, ts)})
        for call in (lambda: a.update_row(("zz", 9), put={"i": (2, ts)}, increment={"c": 1},
                                          condition="EXPECT_EXIST"),
                     lambda: a.delete_row(("absent", 0), condition="EXPECT_EXIST")):
            try:
                call()
            except widetable.WidetableError:
                pass
        b.get_row((1, b"r1"))
        db.batch_get_row([("fz_a", ("k1", 1)), ("fz_b", (2, b"r2"))])
        db.batch_write_row([("fz_b", "put", (4, b"r4"), {"v": (4, ts)}),
                            ("fz_b", "delete", (98, b"none"))])
        db.describe_table("fz_a")
        db.list_stream("fz_a")
    finally:
        db.close()
