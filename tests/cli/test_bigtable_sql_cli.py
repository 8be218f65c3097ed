"""widetable bt sql: GoogleSQL over the Bigtable tables from the command line, on a store
(the --endpoint path is in tests/server/bigtable/test_execute_query.py)."""

from __future__ import annotations

import json


def test_bt_sql_prints_a_table_json_lines_and_errors(cli):
    cli("bt", "createtable", "ev", "families=cf")
    cli("bt", "set", "ev", "u1", "cf:name=ann", "cf:city=x@1000")
    cli("bt", "set", "ev", "u2", "cf:name=[bold]bob")
    out = cli("bt", "sql", "SELECT _key, cf['name'] AS name, cf FROM ev WHERE _key >= @k", "k=u1").stdout
    assert "MAP<BYTES, BYTES>" in out and '{"city": "x", "name": "ann"}' in out
    assert '"[bold]bob"' in out  # values print as they are, never as console markup
    lines = cli("bt", "sql", "SELECT CAST(_key AS STRING) AS k, @n + 1 AS n FROM ev ORDER BY k",
                "n:int64=41", "--json").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [{"k": "u1", "n": 42}, {"k": "u2", "n": 42}]
    res = cli("bt", "sql", "SELECT nope FROM ev", code=1)
    assert "Unrecognized name: nope" in res.output
    res = cli("bt", "sql", "SELECT _key FROM ev", "n:int77=1", code=1)
    assert "int77" in res.output
