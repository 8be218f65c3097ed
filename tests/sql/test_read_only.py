"""Read-only access keys over SQLQuery: SELECT, EXPLAIN, DESCRIBE and SHOW run; mapping DDL
and COPY are refused with 403 OTSNoPermissionAccess, and nothing changes. Through the
official SDK's exe_sql_query, against a real server on a loopback port."""

from __future__ import annotations

import logging
import threading

import pytest
from tablestore import OTSClient, OTSServiceError

import widetable
from tests.server import serving
from widetable.server import WidetableServer, load_keys

READER_ID, READER_SECRET = "sql-reader", "sql-reader-secret"
MAPPING = "CREATE TABLE t (k VARCHAR(8), n BIGINT, v BIGINT, PRIMARY KEY(k, n))"


@pytest.fixture
def served(tmp_path):
    db = widetable.open(str(tmp_path / "d"), purge_interval=None, maintenance_interval=None)
    t = db.create_table("t", [("k", "STRING"), ("n", "INTEGER")])
    for i in range(4):
        t.put_row(("a", i), {"v": i * 10})
    db.sql(MAPPING)
    config = tmp_path / "keys.toml"
    config.write_text(f'[access_keys]\n{serving.ACCESS_KEY_ID} = "{serving.ACCESS_KEY_SECRET}"\n'
                      f'{READER_ID} = {{ secret = "{READER_SECRET}", read_only = true }}\n')
    keys, _ = load_keys(config, environ={})
    server = WidetableServer(db, keys, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    logging.getLogger("sql-reader").setLevel(logging.CRITICAL)
    endpoint = f"http://127.0.0.1:{server.port}"
    reader = OTSClient(endpoint, READER_ID, READER_SECRET, serving.INSTANCE,
                       logger_name="sql-reader")
    writer = serving.official_client(endpoint, "v2", "sql-writer")
    yield db, reader, writer
    server.drain(5)
    db.close()


def test_a_read_only_key_runs_select_explain_describe_and_show(served) -> None:
    _, reader, _ = served
    rows, _, _ = reader.exe_sql_query("SELECT n, v FROM t WHERE k = 'a' AND n >= 2 ORDER BY n")
    assert [r.attribute_columns for r in rows] == [[("n", 2), ("v", 20)], [("n", 3), ("v", 30)]]
    rows, _, _ = reader.exe_sql_query("SELECT COUNT(*) AS c, SUM(v) AS s FROM t")
    assert [r.attribute_columns for r in rows] == [[("c", 4), ("s", 60)]]
    rows, _, _ = reader.exe_sql_query("EXPLAIN SELECT v FROM t WHERE k = 'a'")
    assert "primary-key range" in rows[0].attribute_columns[1][1]
    rows, _, _ = reader.exe_sql_query("DESCRIBE t")
    assert [r.attribute_columns[0][1] for r in rows] == ["k", "n", "v"]
    rows, _, _ = reader.exe_sql_query("SHOW TABLES")
    assert [r.attribute_columns[0][1] for r in rows] == ["t"]
    rows, _, _ = reader.exe_sql_query("SHOW INDEX IN t")
    assert rows[0].attribute_columns[2] == ("Key_name", "PRIMARY")


@pytest.mark.parametrize("statement, word", [
    ("CREATE TABLE u (k VARCHAR(8), n BIGINT, PRIMARY KEY(k, n))", "CREATE TABLE"),
    ("ALTER TABLE t ADD COLUMN w BIGINT", "ADD COLUMN"),
    ("ALTER TABLE t DROP COLUMN v", "DROP COLUMN"),
    ("DROP MAPPING TABLE t", "DROP MAPPING TABLE"),
    ("COPY (SELECT * FROM t) TO '/tmp/widetable-read-only.parquet'", "COPY"),
])
def test_a_read_only_key_may_not_run_ddl_or_copy(served, statement, word) -> None:
    db, reader, writer = served
    with pytest.raises(OTSServiceError) as err:
        reader.exe_sql_query(statement)
    assert err.value.get_http_status() == 403
    assert err.value.get_error_code() == "OTSNoPermissionAccess"
    message = err.value.get_error_message()
    assert READER_ID in message and word in message and "read-only" in message
    assert db.sql("SHOW TABLES").rows == [("t",)]  # nothing changed
    assert [r[0] for r in db.sql("DESCRIBE t").rows] == ["k", "n", "v"]
    rows, _, _ = writer.exe_sql_query("SELECT COUNT(*) AS c FROM t")  # the writer still may
    assert rows[0].attribute_columns == [("c", 4)]


def test_the_writer_key_still_runs_ddl(served) -> None:
    db, _, writer = served
    rows, _, _ = writer.exe_sql_query("ALTER TABLE t ADD COLUMN w BIGINT")
    assert rows == []
    assert [r[0] for r in db.sql("DESCRIBE t").rows] == ["k", "n", "v", "w"]


def test_embedded_read_only_refuses_ddl(served) -> None:
    db, _, _ = served
    with pytest.raises(widetable.WidetableError) as err:
        db.sql("DROP MAPPING TABLE t", read_only="local")
    assert err.value.code == "OTSNoPermissionAccess"
    assert db.sql("SELECT COUNT(*) FROM t", read_only="local").rows == [(4,)]
    assert db.sql("SHOW TABLES").rows == [("t",)]
