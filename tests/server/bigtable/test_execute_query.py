"""PrepareQuery / ExecuteQuery: the official data client's ``execute_query`` (sync and
async) against ``widetable serve --bigtable-port``, as a user's code would call it, and
the stream itself through raw gRPC (batches, checksums, resume tokens, errors)."""

from __future__ import annotations

import asyncio
import datetime as dt

import google_crc32c
import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import AddToCell, RowMutationEntry, SetCell
from google.cloud.bigtable.data.execute_query.metadata import SqlType

from widetable.wire.bigtable import DATA, methods, v2

from .conftest import INSTANCE, PROJECT

PARENT = f"projects/{PROJECT}/instances/{INSTANCE}"


@pytest.fixture
def events(data_client, classic, table_id):
    """A table with a bytes family ``cf`` and an int64 sum family ``n``."""
    from google.cloud.bigtable_admin_v2 import types

    int64 = types.Type(int64_type=types.Type.Int64())
    agg = types.Type.Aggregate(input_type=int64, sum=types.Type.Aggregate.Sum())
    classic._client.table_admin_client.create_table(
        parent=PARENT, table_id=table_id, table=types.Table(column_families={
            "cf": types.ColumnFamily(), "n": types.ColumnFamily(value_type=types.Type(aggregate_type=agg))}))
    t = data_client.get_table(INSTANCE, table_id)
    t.bulk_mutate_rows([RowMutationEntry(b"user#%02d" % i, [
        SetCell("cf", b"name", b"name-%d" % i, 1000), SetCell("cf", b"city", b"c%d" % (i % 3), 1000),
        AddToCell("n", b"visits", i, 1000)]) for i in range(20)])
    return table_id


def test_execute_query_with_params_map_indexing_and_types(data_client, events):
    rows = list(data_client.execute_query(
        f"SELECT _key, cf['name'] AS name, CAST(cf['city'] AS STRING) AS city, n['visits'] AS v, cf "
        f"FROM `{events}` WHERE _key >= @lo AND _key < @hi ORDER BY _key DESC", INSTANCE,
        parameters={"lo": b"user#05", "hi": b"user#08"}))
    assert [r["_key"] for r in rows] == [b"user#07", b"user#06", b"user#05"]
    first = rows[0]
    assert (first["name"], first["city"], first["v"]) == (b"name-7", "c1", 7)
    assert first["cf"] == {b"city": b"c1", b"name": b"name-7"}
    it = data_client.execute_query(f"SELECT n, @when AS w, @day AS d, @f AS f FROM `{events}` "
                                   "WHERE _key = @k", INSTANCE,
                                   parameters={"k": b"user#03", "when": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
                                               "day": dt.date(2024, 2, 29), "f": 2.5},
                                   parameter_types={"f": SqlType.Float64()})
    (row,) = list(it)
    assert row["n"] == {b"visits": 3} and row["f"] == 2.5
    assert (row["d"].year, row["d"].month, row["d"].day) == (2024, 2, 29)  # a google.type.Date
    assert row["w"] == dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)
    types = {c.column_name: c.column_type for c in it.metadata.columns}
    assert types == {"n": SqlType.Map(SqlType.Bytes(), SqlType.Int64()), "w": SqlType.Timestamp(),
                     "d": SqlType.Date(), "f": SqlType.Float64()}


def test_aggregates_group_by_and_history(data_client, events):
    rows = list(data_client.execute_query(
        f"SELECT CAST(cf['city'] AS STRING) AS city, COUNT(*) AS c, SUM(n['visits']) AS s "
        f"FROM `{events}` GROUP BY city ORDER BY city", INSTANCE))
    assert [(r["city"], r["c"], r["s"]) for r in rows] == [
        ("c0", 7, sum(range(0, 20, 3))), ("c1", 7, sum(range(1, 20, 3))), ("c2", 6, sum(range(2, 20, 3)))]
    data_client.get_table(INSTANCE, events).mutate_row(b"user#01", SetCell("cf", b"name", b"new", 5000))
    (row,) = list(data_client.execute_query(
        f"SELECT cf['name'] AS h FROM `{events}`(with_history => TRUE) WHERE _key = 'user#01'", INSTANCE))
    assert [(v["timestamp"].timestamp(), v["value"]) for v in row["h"]] == [(0.005, b"new"), (0.001, b"name-1")]


def test_async_client_execute_query(emulator_env, events):
    from google.cloud.bigtable.data import BigtableDataClientAsync

    async def run():
        client = BigtableDataClientAsync(project=PROJECT)
        try:
            it = await client.execute_query(
                f"SELECT _key, n['visits'] AS v FROM `{events}` WHERE STARTS_WITH(_key, @p)",
                INSTANCE, parameters={"p": b"user#1"})
            return [(r["_key"], r["v"]) async for r in it]
        finally:
            await client.close()
    assert asyncio.run(run()) == [(b"user#%02d" % i, i) for i in range(10, 20)]


def test_a_large_answer_spans_several_batches(data_client, make_table):
    name = make_table()
    t = data_client.get_table(INSTANCE, name)
    value = b"x" * 300
    for start in range(0, 24_000, 4000):
        t.bulk_mutate_rows([RowMutationEntry(b"k%06d" % i, [SetCell("cf", b"v", value, 1000)])
                            for i in range(start, start + 4000)])
    rows = list(data_client.execute_query(f"SELECT _key, cf['v'] AS v FROM `{name}`", INSTANCE))
    assert len(rows) == 24_000
    assert rows[0]["_key"] == b"k000000" and rows[-1]["_key"] == b"k023999"
    assert all(r["v"] == value for r in rows[::997])
    big = bytes(range(256)) * (6 * 4096)  # 6 MiB: one batch over several messages
    t.mutate_row(b"k000005", SetCell("cf", b"v", big, 2000))
    (row,) = list(data_client.execute_query(
        f"SELECT cf['v'] AS v FROM `{name}` WHERE _key = 'k000005'", INSTANCE))
    assert row["v"] == big


def _prepare(channel, query: str, **param_types):
    call = channel.unary_unary(methods(DATA)["PrepareQuery"].path,
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=v2.PrepareQueryResponse.FromString)
    req = v2.PrepareQueryRequest(instance_name=PARENT, query=query)
    req.proto_format.SetInParent()
    for name, kind in param_types.items():
        getattr(req.param_types[name], kind).SetInParent()
    return call(req, timeout=30)


def _execute(channel, prepared: bytes, resume: bytes = b"", **params):
    call = channel.unary_stream(methods(DATA)["ExecuteQuery"].path,
                                request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=v2.ExecuteQueryResponse.FromString)
    req = v2.ExecuteQueryRequest(instance_name=PARENT, prepared_query=prepared, resume_token=resume)
    for name, value in params.items():
        req.params[name].CopyFrom(value)
    return call(req, timeout=60)


def _rows(messages) -> list[bytes]:
    """The first column of every row of complete batches (checksums verified)."""
    out, buffer = [], b""
    for m in messages:
        r = m.results
        buffer += r.proto_rows_batch.batch_data
        if r.HasField("batch_checksum"):
            assert google_crc32c.value(buffer) == r.batch_checksum
            values = v2.ProtoRows.FromString(buffer).values
            out += [v.bytes_value for v in values]
            buffer = b""
    assert not buffer
    return out


def test_the_stream_resumes_after_its_last_complete_batch(bt_server, make_table, data_client):
    name = make_table()
    t = data_client.get_table(INSTANCE, name)
    for start in range(0, 25_000, 5000):
        t.bulk_mutate_rows([RowMutationEntry(b"k%06d" % i, [SetCell("cf", b"v", b"1", 1000)])
                            for i in range(start, start + 5000)])
    with grpc.insecure_channel(bt_server.host) as channel:
        prep = _prepare(channel, f"SELECT _key FROM `{name}`")
        assert [c.name for c in prep.metadata.proto_schema.columns] == ["_key"]
        assert prep.valid_until.seconds > dt.datetime.now().timestamp()
        messages = list(_execute(channel, prep.prepared_query))
        tokens = [m.results.resume_token for m in messages if m.results.resume_token]
        assert len(tokens) >= 3  # several batches, each closed by a checksum and a token
        everything = _rows(messages)
        assert everything == [b"k%06d" % i for i in range(25_000)]
        first_batch = _rows(messages[:next(i for i, m in enumerate(messages)
                                           if m.results.resume_token) + 1])
        resumed = list(_execute(channel, prep.prepared_query, resume=tokens[0]))
        assert resumed[0].results.reset
        assert first_batch + _rows(resumed) == everything
        assert list(_execute(channel, prep.prepared_query, resume=tokens[-1])) == []


def test_errors_are_bigtables_status_codes(bt_server, data_client, events, classic):
    with pytest.raises(gexc.InvalidArgument, match="Syntax error"):
        list(data_client.execute_query(f"SELECT _key FROM `{events}` WHERE", INSTANCE))
    with pytest.raises(gexc.InvalidArgument, match="Unrecognized name: nope"):
        list(data_client.execute_query(f"SELECT nope FROM `{events}`", INSTANCE))
    with pytest.raises(gexc.NotFound, match="no-such-table"):
        list(data_client.execute_query("SELECT _key FROM `no-such-table`", INSTANCE))
    with pytest.raises(gexc.InvalidArgument, match="No matching signature.*@k"):
        list(data_client.execute_query(f"SELECT _key FROM `{events}` WHERE _key = @k", INSTANCE,
                                       parameters={"k": "user#01"}))
    with grpc.insecure_channel(bt_server.host) as channel:
        prep = _prepare(channel, f"SELECT _key FROM `{events}` WHERE _key = @k", k="bytes_type")
        wrong = v2.Value(string_value="user#01")
        wrong.type.string_type.SetInParent()
        with pytest.raises(grpc.RpcError) as info:
            list(_execute(channel, prep.prepared_query, k=wrong))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "@k is of type STRING" in info.value.details()
        with pytest.raises(grpc.RpcError) as info:
            list(_execute(channel, b"garbage"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # the table's families change: the prepared query has expired
        from google.cloud.bigtable.column_family import MaxVersionsGCRule
        classic.table(events).column_family("extra", MaxVersionsGCRule(1)).create()
        good = v2.Value(bytes_value=b"user#01")
        good.type.bytes_type.SetInParent()
        with pytest.raises(grpc.RpcError) as info:
            list(_execute(channel, prep.prepared_query, k=good))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "prepared query expired" in info.value.details()
        again = _prepare(channel, f"SELECT _key FROM `{events}` WHERE _key = @k", k="bytes_type")
        assert _rows(_execute(channel, again.prepared_query, k=good)) == [b"user#01"]
    with pytest.raises(gexc.FailedPrecondition):  # the client surfaces it (2.39.0 has no refresh)
        it = data_client.execute_query(f"SELECT * FROM `{events}`", INSTANCE)
        classic.table(events).column_family("extra2", MaxVersionsGCRule(1)).create()
        list(it)


def test_bt_sql_and_the_thin_client_through_the_endpoint(bt_server, events):
    from typer.testing import CliRunner

    from widetable.cli import app
    from widetable.client.bigtable import connect_bigtable
    from widetable.errors import ObjectNotExist

    query = f"SELECT _key, n['visits'] AS v FROM `{events}` WHERE _key = @k"
    res = CliRunner().invoke(app, ["bt", "sql", query, "k=user#04", "--json",
                                   "--endpoint", bt_server.host, "--instance", INSTANCE])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == '{"_key": "user#04", "v": 4}'
    with connect_bigtable(bt_server.host, project=PROJECT, instance=INSTANCE) as bt:
        answer = bt.execute_query(f"SELECT _key, cf FROM `{events}` WHERE STARTS_WITH(_key, @p)",
                                  {"p": b"user#1"})
        assert answer.columns == [("_key", "BYTES"), ("cf", "MAP<BYTES, BYTES>")]
        assert len(answer) == 10 and answer.rows[0] == (
            b"user#10", [(b"city", b"c1"), (b"name", b"name-10")])
        with pytest.raises(ObjectNotExist):
            bt.execute_query("SELECT _key FROM nope")
