"""SQLQuery on the server: the official SDK's exe_sql_query and widetable.connect(...).sql.

The answer is Tablestore's FlatBuffers payload (version 2): one value slot per row with
a placeholder for nulls, row_count set; DDL answers carry no rows. BINARY values with
bytes >= 0x80 cannot be read by the SDK's decoder (a known SDK bug), so BINARY is
tested through widetable.connect, whose decoder reads them.
"""

from __future__ import annotations

import pytest
from tablestore import OTSServiceError

import widetable
from widetable import WidetableError
from widetable.wire import sqlrows

from . import serving


@pytest.fixture
def served(in_process):
    db, server = in_process
    t = db.create_table("t", [("k", "STRING"), ("n", "INTEGER")])
    for i in range(5):
        cols = {"v": i * 1.5, "flag": i % 2 == 0, "raw": bytes([i, 0x80 + i, 0xFF])}
        if i != 3:
            cols["name"] = f"n{i}"
        t.put_row(("a" if i < 3 else "b", i), cols)
    endpoint = f"http://127.0.0.1:{server.port}"
    client = serving.official_client(endpoint, "v4", "sql-sdk")
    remote = widetable.connect(endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
    yield db, client, remote
    remote.close()


MAPPING = ("CREATE TABLE t (k VARCHAR(8), n BIGINT, v DOUBLE, flag BOOL, name MEDIUMTEXT, "
           "raw MEDIUMBLOB, PRIMARY KEY(k, n))")


def test_exe_sql_query(served) -> None:
    db, client, _ = served
    rows, table_cu, _ = client.exe_sql_query(MAPPING)
    assert rows == [] and table_cu == []  # DDL: no rows at all
    rows, table_cu, _ = client.exe_sql_query(
        "SELECT k, n, v, flag, name FROM t WHERE k = 'b' ORDER BY n")
    assert [r.attribute_columns for r in rows] == [
        [("k", "b"), ("n", 3), ("v", 4.5), ("flag", False), ("name", None)],
        [("k", "b"), ("n", 4), ("v", 6.0), ("flag", True), ("name", "n4")],
    ]
    assert table_cu[0][0] == "t" and table_cu[0][1].read == 2
    rows, _, _ = client.exe_sql_query("SELECT k, COUNT(*) AS c FROM t GROUP BY k ORDER BY k")
    assert [r.attribute_columns for r in rows] == [[("k", "a"), ("c", 3)], [("k", "b"), ("c", 2)]]
    rows, _, _ = client.exe_sql_query("SELECT n FROM t WHERE n > 100")
    assert rows == []
    rows, _, _ = client.exe_sql_query("SHOW TABLES")
    assert [r.attribute_columns for r in rows] == [[("Tables_in_d", "t")]]
    assert db.sql("DESCRIBE t").rows[0][0] == "k"  # the same catalog, embedded


def test_errors_over_the_sdk(served) -> None:
    _, client, _ = served
    client.exe_sql_query(MAPPING)
    for sql, code, text in [("SELECT * FROM nope", "OTSObjectNotExist", "nope"),
                            ("SELECT zz FROM t", "OTSParameterInvalid", "unknown column zz"),
                            ("SELEC 1", "OTSParameterInvalid", "syntax error")]:
        with pytest.raises(OTSServiceError) as info:
            client.exe_sql_query(sql)
        assert info.value.get_error_code() == code
        assert text in info.value.get_error_message()


def test_binary_through_connect(served) -> None:
    _, _, remote = served
    remote.sql(MAPPING)
    r = remote.sql("SELECT n, raw, name FROM t WHERE k = 'a' ORDER BY n")
    assert r.columns == [("n", "BIGINT"), ("raw", "MEDIUMBLOB"), ("name", "MEDIUMTEXT")]
    assert r.rows == [(i, bytes([i, 0x80 + i, 0xFF]), f"n{i}") for i in range(3)]
    assert r.to_arrow().column("raw").to_pylist()[2] == bytes([2, 0x82, 0xFF])
    assert remote.sql("DROP MAPPING TABLE t").rows == []
    with pytest.raises(WidetableError) as info:
        remote.sql("SELECT * FROM t")
    assert info.value.code == "OTSObjectNotExist"
    with pytest.raises(WidetableError, match="no \\? parameters"):
        remote.sql("SELECT 1", [1])


def test_payload_round_trip_and_null_placeholders() -> None:
    columns = [("a", "BIGINT"), ("b", "MEDIUMBLOB"), ("c", "BOOL"), ("d", "DOUBLE")]
    rows = [(1, b"\x00\xff", True, None), (None, None, None, 2.5)]
    assert sqlrows.decode(sqlrows.encode(columns, rows)) == (columns, rows)
    from tablestore.flatbuffer.dataprotocol.SQLResponseColumns import SQLResponseColumns
    root = SQLResponseColumns.GetRootAsSQLResponseColumns(sqlrows.encode(columns, rows), 0)
    assert root.RowCount() == 2
    first = root.Columns(0).ColumnValue()
    assert first.LongValuesLength() == 2 and first.LongValues(1) == 0  # the null's placeholder
    assert [first.IsNullvalues(i) for i in range(2)] == [False, True]


def test_cli_sql_against_a_server(in_process, cli, monkeypatch) -> None:
    db, server = in_process
    db.create_table("t", [("k", "STRING"), ("n", "INTEGER")]).put_row(("a", 1), {"v": 2.5})
    endpoint = f"http://127.0.0.1:{server.port}"
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_ID", serving.ACCESS_KEY_ID)
    monkeypatch.setenv("WIDETABLE_ACCESS_KEY_SECRET", serving.ACCESS_KEY_SECRET)
    cli("sql", "CREATE TABLE t (k VARCHAR(8), n BIGINT, v DOUBLE, PRIMARY KEY(k, n))",
        "--endpoint", endpoint)
    out = cli("sql", "SELECT k, v FROM t", "--format", "csv", "--endpoint", endpoint).stdout
    assert out.splitlines() == ["k,v", "a,2.5"]
    r = cli("sql", "SELECT * FROM t", "--timeout", "1", "--endpoint", endpoint, code=1)
    assert "apply to a store" in r.stderr


def test_copy_is_refused_over_the_wire(served, tmp_path) -> None:
    _, client, _ = served
    client.exe_sql_query(MAPPING)
    target = tmp_path / "leak.parquet"
    with pytest.raises(OTSServiceError) as info:
        client.exe_sql_query(f"COPY (SELECT k FROM t) TO '{target}'")
    assert info.value.get_error_code() == "OTSParameterInvalid"
    assert "a server does not run it" in info.value.get_error_message()
    assert not target.exists()
