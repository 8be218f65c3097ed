"""widetable sql: one statement in each format, the prompt, and errors."""

from __future__ import annotations

import json

import pyarrow.parquet as pq


def _store(cli) -> None:
    cli("create-table", "t", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER")
    for card, seq, amount in [("c1", 1, 2.5), ("c1", 2, 4.0), ("c2", 1, 1.0)]:
        cli("put", "t", "--pk", json.dumps([card, seq]), "--col", f"amount={amount}")
    cli("sql", "CREATE TABLE t (CardID VARCHAR(64), Seq BIGINT, amount DOUBLE, "
               "PRIMARY KEY(CardID, Seq))")


def test_sql_formats(cli, tmp_path) -> None:
    _store(cli)
    out = cli("sql", "SELECT CardID, SUM(amount) AS total FROM t GROUP BY CardID ORDER BY CardID",
              "--format", "csv").stdout
    assert out.splitlines() == ["CardID,total", "c1,6.5", "c2,1.0"]
    out = cli("sql", "SELECT CardID, Seq FROM t WHERE CardID = 'c1'", "--format", "json").stdout
    assert [json.loads(line) for line in out.splitlines()] == [
        {"CardID": "c1", "Seq": 1}, {"CardID": "c1", "Seq": 2}]
    table = cli("sql", "SELECT * FROM t ORDER BY CardID, Seq").stdout
    assert "MEDIUMTEXT" in table and "c2" in table and "4.0" in table
    target = tmp_path / "o.parquet"
    cli("sql", "SELECT * FROM t", "--format", "parquet", "--output", str(target))
    assert pq.read_table(target).num_rows == 3


def test_sql_errors_and_limits(cli) -> None:
    _store(cli)
    r = cli("sql", "SELECT nope FROM t", code=1)
    assert "Error [OTSParameterInvalid]: SQL: unknown column nope" in r.stderr
    r = cli("sql", "SELECT * FROM t", "--max-scan-rows", "2", code=1)
    assert "read more than 2 rows" in r.stderr
    r = cli("sql", "SELECT * FROM t", "--format", "parquet", code=1)
    assert "--output FILE" in r.stderr


def test_sql_prompt(cli) -> None:
    _store(cli)
    r = cli("sql", "--format", "csv", input="SELECT COUNT(*)\nFROM t;\nSELECT x FROM t;\n"
                                            "SHOW TABLES;\nexit\n")
    assert r.stdout.splitlines() == ["COUNT(*)", "3", "Tables_in_data", "t"]
    assert "unknown column x" in r.stderr
