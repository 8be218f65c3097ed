"""Arrow and Parquet interchange: Table.to_arrow, files both ways, type mapping, values
that do not fit (the rows before them kept), and the CLI's export / import."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from widetable import WidetableError
from widetable.sql import interchange


@pytest.fixture
def typed(db):
    t = db.create_table("t", [("k", "STRING"), ("n", "INTEGER")],
                        defined_columns=[("d", "DOUBLE"), ("b", "BOOLEAN")])
    for i in range(6):
        t.put_row((f"k{i}", i), {"d": i / 2, "b": i % 2 == 0, "s": f"s{i}", "raw": bytes([i, 200])})
    return db


def test_to_arrow_types_and_ranges(typed) -> None:
    t = typed.table("t").to_arrow()
    assert t.schema == pa.schema([pa.field("k", pa.string(), nullable=False),
                                  pa.field("n", pa.int64(), nullable=False),
                                  ("b", pa.bool_()), ("d", pa.float64()), ("raw", pa.binary()),
                                  ("s", pa.string())])
    assert t.num_rows == 6
    assert t.column("raw").to_pylist()[5] == bytes([5, 200])
    part = typed.table("t").to_arrow(("k2",), ("k4",), columns=["d"])
    assert part.column_names == ["k", "n", "d"]
    assert part.to_pylist() == [{"k": "k2", "n": 2, "d": 1.0}, {"k": "k3", "n": 3, "d": 1.5}]


def test_a_value_that_does_not_fit_keeps_the_rows_before(typed, tmp_path) -> None:
    typed.table("t").put_row(("k9", 9), {"s": 42})  # s held strings so far
    out = tmp_path / "t.parquet"
    with pytest.raises(WidetableError) as info:
        interchange.write_file(interchange.table_batches(typed.table("t"), batch_rows=2),
                               str(out), "parquet")
    assert info.value.code == "OTSParameterInvalid"
    assert "row 7 (('k9', 9)) holds int 42 in column 's'" in info.value.message
    assert pq.read_table(out).num_rows == 6  # three full batches written before it


def test_parquet_and_arrow_round_trip_through_the_cli(cli, tmp_path) -> None:
    cli("create-table", "t", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER")
    for seq in range(3):
        cli("put", "t", "--pk", json.dumps(["c1", seq]), "--col", f"amount={seq + 0.5}",
            "--col", f"flag={'true' if seq else 'false'}")
    for ext in ("parquet", "arrow"):
        path = tmp_path / f"t.{ext}"
        cli("export", "t", str(path))
        cli("create-table", f"copy_{ext}", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER")
        r = cli("import", f"copy_{ext}", str(path))
        assert "Imported 3 rows" in r.stdout
    db = cli.open()
    try:
        want = db.table("t").to_arrow().to_pylist()
        assert want[2] == {"CardID": "c1", "Seq": 2, "amount": 2.5, "flag": True}
        for ext in ("parquet", "arrow"):
            assert db.table(f"copy_{ext}").to_arrow().to_pylist() == want
    finally:
        db.close()


def test_import_reports_rows_that_do_not_fit(cli, tmp_path) -> None:
    cli("create-table", "t", "--pk", "k:INTEGER")
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"k": pa.array([1, 2**63, 3], pa.uint64()), "v": ["a", "b", "c"]}),
                   path)
    r = cli("import", "t", str(path), code=1)
    assert "Imported 2 rows" in r.stdout
    assert "line 2" in r.stderr
    pq.write_table(pa.table({"k": [1], "when": pa.array([0], pa.timestamp("s"))}), path)
    r = cli("import", "t", str(path), code=1)
    assert "has no widetable type" in r.stderr
