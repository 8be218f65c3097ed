"""Every RowFilter through the official data client, reverse scans through the official
low-level client (the data client has no reverse read), aggregates, and the classic
client's data calls; against ``widetable serve --bigtable-port``."""

from __future__ import annotations

import datetime

import pytest
from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, SetCell
from google.cloud.bigtable.data import row_filters as rf

from .conftest import INSTANCE, PROJECT, table_path

# r1: cf1:a@3 "x1", cf1:a@2 "x0", cf1:b@1 "yy", cf2:c@1 "zzz";  r2: cf1:a@1 "v";  s3: cf2:d@5 "w"
DATA = {
    b"r1": [("cf1", b"a", 3000, b"x1"), ("cf1", b"a", 2000, b"x0"), ("cf1", b"b", 1000, b"yy"),
            ("cf2", b"c", 1000, b"zzz")],
    b"r2": [("cf1", b"a", 1000, b"v")],
    b"s3": [("cf2", b"d", 5000, b"w")],
}


def _ms(n: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(n / 1000, datetime.timezone.utc)


def everything(f=lambda c: True, strip=False, labels=()):
    out = {}
    for key, cells in DATA.items():
        kept = [(fa, q, ts, b"" if strip else v, list(labels)) for fa, q, ts, v in cells if f((fa, q, ts, v))]
        if kept:
            out[key] = kept
    return out


CASES = {
    "pass_all": (rf.PassAllFilter(True), everything()),
    "block_all": (rf.BlockAllFilter(True), {}),
    "sink": (rf.SinkFilter(True), everything()),
    "row_key_regex": (rf.RowKeyRegexFilter(b"r.*"), {k: v for k, v in everything().items() if k != b"s3"}),
    "family_regex": (rf.FamilyNameRegexFilter("cf2"), everything(lambda c: c[0] == "cf2")),
    "qualifier_regex": (rf.ColumnQualifierRegexFilter(b"a"), everything(lambda c: c[1] == b"a")),
    "timestamp_range": (rf.TimestampRangeFilter(_ms(2), _ms(4)), everything(lambda c: 2000 <= c[2] < 4000)),
    "column_range": (rf.ColumnRangeFilter("cf1", b"b", None), everything(lambda c: c[:2] == ("cf1", b"b"))),
    "value_regex": (rf.ValueRegexFilter(b"x.*"), everything(lambda c: c[3].startswith(b"x"))),
    "literal_value": (rf.LiteralValueFilter(b"v"), everything(lambda c: c[3] == b"v")),
    "value_range": (rf.ValueRangeFilter(b"w", b"y"), everything(lambda c: b"w" <= c[3] <= b"y")),
    "cells_row_offset": (rf.CellsRowOffsetFilter(1), {b"r1": everything()[b"r1"][1:]}),
    "cells_row_limit": (rf.CellsRowLimitFilter(1), {k: v[:1] for k, v in everything().items()}),
    "cells_column_limit": (rf.CellsColumnLimitFilter(1), everything(lambda c: c[2] != 2000)),
    "strip_value": (rf.StripValueTransformerFilter(True), everything(strip=True)),
    "apply_label": (rf.ApplyLabelFilter("lbl"), everything(labels=["lbl"])),
    "chain": (rf.RowFilterChain([rf.FamilyNameRegexFilter("cf1"), rf.CellsColumnLimitFilter(1)]),
              everything(lambda c: c[0] == "cf1" and c[2] != 2000)),
    "interleave": (rf.RowFilterUnion([rf.FamilyNameRegexFilter("cf2"), rf.ColumnQualifierRegexFilter(b"b")]),
                   everything(lambda c: c[0] == "cf2" or c[1] == b"b")),
    "condition": (rf.ConditionalRowFilter(rf.ColumnQualifierRegexFilter(b"b"),
                                          true_filter=rf.StripValueTransformerFilter(True),
                                          false_filter=rf.BlockAllFilter(True)),
                  {b"r1": everything(strip=True)[b"r1"]}),
    "condition_no_false": (rf.ConditionalRowFilter(rf.ValueRegexFilter(b"w"),
                                                   true_filter=rf.PassAllFilter(True)),
                           {b"s3": everything()[b"s3"]}),
    "sink_in_chain_and_interleave": (
        rf.RowFilterUnion([rf.RowFilterChain([rf.ValueRegexFilter(b"zzz"), rf.ApplyLabelFilter("hit"),
                                              rf.SinkFilter(True)]),
                           rf.ColumnQualifierRegexFilter(b"d")]),
        {b"r1": [("cf2", b"c", 1000, b"zzz", ["hit"])], b"s3": [("cf2", b"d", 5000, b"w", [])]}),
}


@pytest.fixture
def loaded(data_client, make_table):
    name = make_table({"cf1": None, "cf2": None})
    t = data_client.get_table(INSTANCE, name)
    t.bulk_mutate_rows([RowMutationEntry(k, [SetCell(fa, q, v, ts) for fa, q, ts, v in cells])
                        for k, cells in DATA.items()])
    return t


def test_every_filter(loaded):
    for name, (flt, expected) in CASES.items():
        got = {r.row_key: [(c.family, c.qualifier, c.timestamp_micros, c.value, list(c.labels))
                           for c in r.cells] for r in loaded.read_rows(ReadRowsQuery(row_filter=flt))}
        assert got == expected, name


def test_row_sample_keeps_whole_rows_some_of_the_time(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    t.bulk_mutate_rows([RowMutationEntry(b"k%03d" % i, [SetCell("cf", b"a", b"1", 1000),
                                                         SetCell("cf", b"b", b"2", 1000)])
                        for i in range(300)])
    rows = t.read_rows(ReadRowsQuery(row_filter=rf.RowSampleFilter(0.5)))
    assert 60 < len(rows) < 240  # p(outside) is astronomically small
    assert all(len(r.cells) == 2 for r in rows)


def test_a_bad_regex_is_invalid_argument_naming_it(loaded):
    from google.api_core import exceptions as gexc

    with pytest.raises(gexc.InvalidArgument, match="abc"):
        loaded.read_rows(ReadRowsQuery(row_filter=rf.RowKeyRegexFilter(b"(abc")))


def test_reverse_scans_through_the_official_low_level_client(emulator_env, data_client, make_table):
    from google.cloud.bigtable_v2 import BigtableClient, ReadRowsRequest, RowRange, RowSet
    from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
    import grpc

    name = make_table()
    t = data_client.get_table(INSTANCE, name)
    big = b"B" * (5 * 2**20)
    t.bulk_mutate_rows([RowMutationEntry(b"k%d" % i, [SetCell("cf", b"q", b"%d" % i, 1000)])
                        for i in range(10)])
    t.mutate_row(b"k5", SetCell("cf", b"z", big, 1000))
    client = BigtableClient(transport=BigtableGrpcTransport(
        channel=grpc.insecure_channel(emulator_env.host)))
    req = ReadRowsRequest(table_name=table_path(name), reversed=True,
                          rows=RowSet(row_ranges=[RowRange(start_key_closed=b"k2", end_key_open=b"k8")]),
                          rows_limit=4)
    committed, values, key = [], {}, None
    for resp in client.read_rows(req):
        for chunk in resp.chunks:
            key = chunk.row_key or key
            values[key] = values.get(key, b"") + chunk.value
            if chunk.commit_row:
                committed.append(key)
    assert committed == [b"k7", b"k6", b"k5", b"k4"]  # descending, limit 4
    assert values[b"k5"] == b"5" + big  # its 5 MiB cell, split over chunks, arrives whole


def test_aggregates_read_back_as_8_byte_big_endian_ints(data_client, classic, table_id):
    from google.cloud.bigtable.data import AddToCell
    from google.cloud.bigtable_admin_v2 import types

    int64 = types.Type(int64_type=types.Type.Int64())
    Agg = types.Type.Aggregate
    fams = {"total": types.ColumnFamily(value_type=types.Type(aggregate_type=Agg(input_type=int64, sum=Agg.Sum()))),
            "low": types.ColumnFamily(value_type=types.Type(aggregate_type=Agg(input_type=int64, min_=Agg.Min()))),
            "high": types.ColumnFamily(value_type=types.Type(aggregate_type=Agg(input_type=int64, max_=Agg.Max()))),
            "uniq": types.ColumnFamily(value_type=types.Type(aggregate_type=Agg(
                input_type=int64, hllpp_unique_count=Agg.HyperLogLogPlusPlusUniqueCount())))}
    classic._client.table_admin_client.create_table(
        parent=f"projects/{PROJECT}/instances/{INSTANCE}", table_id=table_id,
        table=types.Table(column_families=fams))
    t = data_client.get_table(INSTANCE, table_id)
    for v in (5, -3, 40, 7):
        t.mutate_row(b"m", [AddToCell("total", b"x", v, 1000), AddToCell("low", b"x", v, 1000),
                            AddToCell("high", b"x", v, 1000)])
    for v in range(200):
        t.mutate_row(b"m", AddToCell("uniq", b"x", v % 50, 1000))
    got = {c.family: c.value for c in t.read_row(b"m").cells}
    assert got["total"] == (49).to_bytes(8, "big", signed=True)
    assert got["low"] == (-3).to_bytes(8, "big", signed=True)
    assert got["high"] == (40).to_bytes(8, "big", signed=True)
    from widetable.bigtable.hll import hll_count

    assert 45 <= hll_count(got["uniq"]) <= 55
    with pytest.raises(Exception, match="total|aggregate"):
        t.mutate_row(b"m", SetCell("total", b"x", b"notanint", 1000))


def test_classic_client_data_calls(classic, table_id):
    from google.cloud.bigtable import row_filters as crf

    table = classic.table(table_id)
    table.create(column_families={"cf": None})
    row = table.direct_row(b"r1")
    row.set_cell("cf", b"a", b"1")
    row.set_cell("cf", b"b", b"2")
    row.commit()
    got = table.read_row(b"r1")
    assert got.cells["cf"][b"a"][0].value == b"1"
    cond = table.conditional_row(b"r1", filter_=crf.ColumnQualifierRegexFilter(b"a"))
    cond.set_cell("cf", b"c", b"3", state=True)
    assert cond.commit() is True
    app = table.append_row(b"r1")
    app.increment_cell_value("cf", b"n", 2)
    app.append_cell_value("cf", b"c", b"!")
    result = app.commit()
    assert result["cf"][b"n"][0][0] == (2).to_bytes(8, "big", signed=True)
    assert result["cf"][b"c"][0][0] == b"3!"
    statuses = table.mutate_rows([_row(table, b"r2")])
    assert [s.code for s in statuses] == [0]
    data = table.read_rows()
    assert [r.row_key for r in data] == [b"r1", b"r2"]
    assert [r.row_key for r in table.read_rows(start_key=b"r2")] == [b"r2"]
    assert [r.row_key for r in table.yield_rows(limit=1)] == [b"r1"]
    gone = table.direct_row(b"r1")
    gone.delete()
    gone.commit()
    assert table.read_row(b"r1") is None


def _row(table, key):
    row = table.direct_row(key)
    row.set_cell("cf", b"q", b"v")
    return row


def test_ping_and_warm_and_sample_row_keys_in_a_range_through_the_low_level_client(
        emulator_env, data_client, make_table):
    import grpc
    from google.api_core import exceptions as gexc
    from google.cloud.bigtable_v2 import BigtableClient, RowRange, SampleRowKeysRequest
    from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport

    name = make_table(splits=[b"c", b"f", b"p"])
    client = BigtableClient(transport=BigtableGrpcTransport(
        channel=grpc.insecure_channel(emulator_env.host)))
    client.ping_and_warm(name=f"projects/{PROJECT}/instances/{INSTANCE}")
    with pytest.raises(gexc.InvalidArgument, match="not-a-name"):
        client.ping_and_warm(name="not-a-name")
    keys = [r.row_key for r in client.sample_row_keys(SampleRowKeysRequest(
        table_name=table_path(name), row_range=RowRange(start_key_closed=b"d", end_key_open=b"g")))]
    assert keys == [b"f", b"p"]  # the samples inside, then the one that ends the range

