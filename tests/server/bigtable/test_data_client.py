"""Every data RPC through the official data client (``google.cloud.bigtable.data``, sync),
against ``widetable serve --bigtable-port``, written as a user's code would be."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import (
    DeleteAllFromFamily,
    DeleteAllFromRow,
    DeleteRangeFromColumn,
    ReadRowsQuery,
    RowMutationEntry,
    RowRange,
    SetCell,
)
from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup
from google.cloud.bigtable.data.read_modify_write_rules import AppendValueRule, IncrementRule
from google.cloud.bigtable.data.row_filters import (
    ColumnQualifierRegexFilter,
    FamilyNameRegexFilter,
)

from .conftest import INSTANCE


def cells_of(row):
    return [(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


def test_mutate_row_and_read_row(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table({"cf": None, "other": None}))
    t.mutate_row(b"r1", [SetCell("cf", b"a", b"1", 3000), SetCell("cf", b"a", b"0", 2000),
                         SetCell("cf", b"b", b"2", 1000), SetCell("other", b"x", b"o", 1000)])
    assert cells_of(t.read_row(b"r1")) == [("cf", b"a", 3000, b"1"), ("cf", b"a", 2000, b"0"),
                                          ("cf", b"b", 1000, b"2"), ("other", b"x", 1000, b"o")]
    assert t.read_row(b"missing") is None
    assert t.row_exists(b"r1") and not t.row_exists(b"missing")
    t.mutate_row(b"r1", DeleteRangeFromColumn("cf", b"a", start_timestamp_micros=2000,
                                              end_timestamp_micros=3000))
    assert [c[2] for c in cells_of(t.read_row(b"r1")) if c[1] == b"a"] == [3000]
    t.mutate_row(b"r1", DeleteAllFromFamily("other"))
    assert {c[0] for c in cells_of(t.read_row(b"r1"))} == {"cf"}
    t.mutate_row(b"r1", DeleteAllFromRow())
    assert t.read_row(b"r1") is None


def test_server_time_cells_have_millisecond_granularity(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    t.mutate_row(b"k", SetCell("cf", b"q", b"v"))  # the client sends -1: the server's time
    (cell,) = t.read_row(b"k").cells
    assert cell.timestamp_micros > 1_600_000_000_000_000 and cell.timestamp_micros % 1000 == 0


def test_read_rows_with_keys_ranges_limits(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    t.bulk_mutate_rows([RowMutationEntry(f"k{i:03}".encode(), [SetCell("cf", b"q", b"%d" % i, 1000)])
                        for i in range(50)])
    keys = [r.row_key for r in t.read_rows(ReadRowsQuery())]
    assert keys == [f"k{i:03}".encode() for i in range(50)]
    q = ReadRowsQuery(row_keys=[b"k007", b"k003"], row_ranges=[RowRange(b"k040", b"k043")])
    assert [r.row_key for r in t.read_rows(q)] == [b"k003", b"k007", b"k040", b"k041", b"k042"]
    q = ReadRowsQuery(row_ranges=[RowRange(b"k010", b"k020", start_is_inclusive=False,
                                           end_is_inclusive=True)], limit=3)
    assert [r.row_key for r in t.read_rows(q)] == [b"k011", b"k012", b"k013"]
    assert len(list(t.read_rows_stream(ReadRowsQuery(limit=7)))) == 7
    assert t.read_rows_sharded([ReadRowsQuery(row_keys=[b"k001"]),
                                ReadRowsQuery(row_keys=[b"k002"])])[1].row_key == b"k002"


def test_a_10000_row_scan_streams_every_row(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    for start in range(0, 10_000, 1000):
        t.bulk_mutate_rows([RowMutationEntry(b"row%05d" % i, [SetCell("cf", b"q", b"x" * 100, 1000)])
                            for i in range(start, start + 1000)])
    rows = t.read_rows(ReadRowsQuery())
    assert [r.row_key for r in rows] == [b"row%05d" % i for i in range(10_000)]


def test_large_cells_over_4_mib_round_trip(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    big = bytes(range(256)) * (6 * 2**20 // 256)  # 6 MiB, over the client's 4 MiB message cap
    t.mutate_row(b"big", [SetCell("cf", b"blob", big, 1000), SetCell("cf", b"tail", b"t", 1000)])
    t.mutate_row(b"big2", SetCell("cf", b"blob", big[::-1], 1000))
    row = t.read_row(b"big")
    assert [len(c.value) for c in row.cells] == [len(big), 1] and row.cells[0].value == big
    rows = t.read_rows(ReadRowsQuery())
    assert [r.row_key for r in rows] == [b"big", b"big2"] and rows[1].cells[0].value == big[::-1]


def test_bulk_mutate_rows_reports_the_failing_entry_and_applies_the_rest(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    entries = [RowMutationEntry(b"ok1", [SetCell("cf", b"q", b"1", 1000)]),
               RowMutationEntry(b"bad", [SetCell("nosuchfamily", b"q", b"x", 1000)]),
               RowMutationEntry(b"ok2", [SetCell("cf", b"q", b"2", 1000)])]
    with pytest.raises(MutationsExceptionGroup) as info:
        t.bulk_mutate_rows(entries)
    (failed,) = info.value.exceptions
    assert failed.index == 1
    assert isinstance(failed.__cause__, (gexc.NotFound, gexc.InvalidArgument)), failed.__cause__
    assert "nosuchfamily" in str(failed.__cause__)
    assert [r.row_key for r in t.read_rows(ReadRowsQuery())] == [b"ok1", b"ok2"]


def test_bulk_mutate_rows_statuses_per_entry_and_a_row_twice_in_order(data_client, make_table):
    """Good and bad entries mixed, one row three times: each bad entry fails alone with
    its own status (the client reports it at its index), and the entries of a row apply
    in their order (the second deletes what the first set and sets it anew)."""
    t = data_client.get_table(INSTANCE, make_table({"cf": None, "cf2": None}))
    t.mutate_row(b"r", [SetCell("cf", b"old", b"o", 1000)])
    entries = [RowMutationEntry(b"r", [SetCell("cf", b"a", b"1", 1000), SetCell("cf2", b"x", b"1", 1000)]),
               RowMutationEntry(b"bad1", [SetCell("nosuchfamily", b"q", b"x", 1000)]),
               RowMutationEntry(b"r", [DeleteAllFromFamily("cf"), SetCell("cf", b"a", b"2", 2000)]),
               RowMutationEntry(b"bad2", [SetCell("cf", b"q", b"x", 1001)]),  # not a millisecond
               RowMutationEntry(b"s", [SetCell("cf", b"q", b"s", 1000)]),
               RowMutationEntry(b"r", [SetCell("nosuchfamily", b"a", b"3", 3000)]),
               RowMutationEntry(b"r", [DeleteRangeFromColumn("cf2", b"x", 0, 2000)])]
    with pytest.raises(MutationsExceptionGroup) as info:
        t.bulk_mutate_rows(entries)
    failed = {e.index: e.__cause__ for e in info.value.exceptions}
    assert sorted(failed) == [1, 3, 5]
    assert "nosuchfamily" in str(failed[1]) and "nosuchfamily" in str(failed[5])
    assert isinstance(failed[3], gexc.InvalidArgument) and "1001" in str(failed[3])
    assert cells_of(t.read_row(b"r")) == [("cf", b"a", 2000, b"2")]
    assert cells_of(t.read_row(b"s")) == [("cf", b"q", 1000, b"s")]
    assert [r.row_key for r in t.read_rows(ReadRowsQuery())] == [b"r", b"s"]


def test_mutations_batcher_writes_everything(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    with t.mutations_batcher(flush_limit_mutation_count=30) as batcher:
        for i in range(250):
            batcher.append(RowMutationEntry(b"b%04d" % i, [SetCell("cf", b"q", b"v", 1000)]))
    assert len(t.read_rows(ReadRowsQuery())) == 250


def test_check_and_mutate_row(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table({"cf": None, "flags": None}))
    t.mutate_row(b"u1", [SetCell("flags", b"active", b"1", 1000)])
    matched = t.check_and_mutate_row(b"u1", FamilyNameRegexFilter("flags"),
                                     true_case_mutations=[SetCell("cf", b"state", b"on", 1000)],
                                     false_case_mutations=[SetCell("cf", b"state", b"off", 1000)])
    assert matched is True
    matched = t.check_and_mutate_row(b"u2", ColumnQualifierRegexFilter(b"active"),
                                     true_case_mutations=[SetCell("cf", b"state", b"on", 1000)],
                                     false_case_mutations=[SetCell("cf", b"state", b"off", 1000)])
    assert matched is False
    assert t.read_row(b"u1").cells[0].value == b"on"
    assert t.read_row(b"u2").cells[0].value == b"off"
    # no predicate: the row matches if it has any cell
    assert t.check_and_mutate_row(b"u2", None, true_case_mutations=[DeleteAllFromRow()])
    assert t.read_row(b"u2") is None


def test_read_modify_write_append_and_increment_with_int64_wrap_around(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table())
    row = t.read_modify_write_row(b"c", [AppendValueRule("cf", b"log", b"ab"),
                                         IncrementRule("cf", b"n", 5)])
    got = {c.qualifier: c.value for c in row.cells}
    assert got == {b"log": b"ab", b"n": (5).to_bytes(8, "big", signed=True)}
    row = t.read_modify_write_row(b"c", AppendValueRule("cf", b"log", b"cd"))
    assert row.cells[0].value == b"abcd"
    t.mutate_row(b"w", SetCell("cf", b"n", (2**63 - 1).to_bytes(8, "big", signed=True), 1000))
    row = t.read_modify_write_row(b"w", IncrementRule("cf", b"n", 1))
    assert row.cells[0].value == (-2**63).to_bytes(8, "big", signed=True)
    row = t.read_modify_write_row(b"w", IncrementRule("cf", b"n", -1))
    assert row.cells[0].value == (2**63 - 1).to_bytes(8, "big", signed=True)
    t.mutate_row(b"s", SetCell("cf", b"n", b"not8", 1000))
    with pytest.raises((gexc.InvalidArgument, gexc.FailedPrecondition), match="n"):
        t.read_modify_write_row(b"s", IncrementRule("cf", b"n", 1))


def test_sample_row_keys_shows_the_initial_splits(data_client, make_table):
    t = data_client.get_table(INSTANCE, make_table(splits=[b"f", b"m", b"t"]))
    keys = [k for k, _ in t.sample_row_keys()]
    assert [k for k in keys if k in (b"f", b"m", b"t")] == [b"f", b"m", b"t"]
    assert keys[-1] == b""
    offsets = [o for _, o in t.sample_row_keys()]
    assert offsets == sorted(offsets)


def test_unknown_table_is_not_found_and_bad_input_is_invalid_argument(data_client, make_table):
    with pytest.raises(gexc.NotFound):
        data_client.get_table(INSTANCE, "no-such-table").read_row(b"k")
    t = data_client.get_table(INSTANCE, make_table())
    with pytest.raises(gexc.InvalidArgument, match="1234"):
        t.mutate_row(b"k", SetCell("cf", b"q", b"v", 1234))  # not millisecond-granular
    with pytest.raises(gexc.InvalidArgument, match="4096"):
        t.mutate_row(b"k" * 5000, SetCell("cf", b"q", b"v", 1000))
    assert t.read_row(b"k") is None  # a refused write changed nothing


def test_every_rpc_through_the_async_data_client(emulator_env, make_table):
    import asyncio

    from google.cloud.bigtable.data import BigtableDataClientAsync

    from .conftest import PROJECT

    name = make_table(splits=[b"m"])

    async def run():
        client = BigtableDataClientAsync(project=PROJECT)
        try:
            t = client.get_table(INSTANCE, name)
            await t.mutate_row(b"a", SetCell("cf", b"q", b"1", 1000))
            await t.bulk_mutate_rows([RowMutationEntry(b"b", [SetCell("cf", b"q", b"2", 1000)]),
                                      RowMutationEntry(b"z", [SetCell("cf", b"q", b"3", 1000)])])
            assert (await t.read_row(b"a")).cells[0].value == b"1"
            assert [r.row_key for r in await t.read_rows(ReadRowsQuery())] == [b"a", b"b", b"z"]
            streamed = [r.row_key async for r in await t.read_rows_stream(ReadRowsQuery(limit=2))]
            assert streamed == [b"a", b"b"]
            assert await t.check_and_mutate_row(b"a", None, true_case_mutations=[
                SetCell("cf", b"seen", b"y", 1000)])
            row = await t.read_modify_write_row(b"a", IncrementRule("cf", b"n", 41))
            assert row.cells[0].value == (41).to_bytes(8, "big", signed=True)
            keys = [k for k, _ in await t.sample_row_keys()]
            assert b"m" in keys and keys[-1] == b""
            assert await t.row_exists(b"z")
        finally:
            await client.close()

    asyncio.run(run())


def test_execute_query_serves_googlesql(data_client, make_table):
    # the whole of PrepareQuery / ExecuteQuery: test_execute_query.py
    name = make_table()
    data_client.get_table(INSTANCE, name).mutate_row(b"k", SetCell("cf", b"q", b"v", 1000))
    rows = list(data_client.execute_query(f"SELECT _key, cf['q'] AS q FROM `{name}`", INSTANCE))
    assert [(r["_key"], r["q"]) for r in rows] == [(b"k", b"v")]
