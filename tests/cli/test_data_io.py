"""import and export: lossless round trips, per-row errors, batching and file handling."""

from __future__ import annotations

import json
import math
import random

import pytest

TRICKY_STRINGS = [
    "",
    " ",
    "120",
    "-5",
    "1.0",
    "1e3",
    "true",
    "false",
    "null",
    "NaN",
    "Infinity",
    "[x",
    "{",
    '"quoted"',
    "comma, here",
    "line\nbreak",
    "tab\there",
    "ünïcødé 学生卡",
    " lead",
    "trail ",
    '{"$binary": "AAE="}',
    "INF_MIN",
    "0x10",
    "=",
]
TRICKY_VALUES = [
    0,
    -1,
    2**63 - 1,
    -(2**63),
    1.0,
    -0.0,
    0.1,
    1e300,
    -1e-300,
    math.inf,
    -math.inf,
    True,
    False,
    b"",
    b"\x00\xff",
    bytes(range(256)),
    *TRICKY_STRINGS,
]


def make_rows(n: int, seed: int = 7) -> list[tuple[tuple, dict]]:
    """``n`` rows of (CardID STRING, Seq INTEGER) with every value type and awkward strings."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        card = rng.choice(["c1", "123", "card 7", "x,y", '"q"', "ü"]) + f"-{i % 37}"
        columns = {f"v{j}": rng.choice(TRICKY_VALUES) for j in range(rng.randint(0, 5))}
        columns["n"] = i
        rows.append(((card, i), columns))
    return rows


def typed(columns: dict) -> list:
    """Columns with types, so 1, 1.0 and True differ and -0.0 keeps its sign."""
    return sorted((k, type(v).__name__, repr(v)) for k, v in columns.items())


def load(cli, table: str, rows) -> None:
    with cli.open() as db:
        for i in range(0, len(rows), 200):
            results = db.batch_write_row([(table, "put", pk, c) for pk, c in rows[i : i + 200]])
            assert all(r.ok for r in results)


def dump(cli, table: str) -> list:
    with cli.open() as db:
        return [(r.primary_key, typed(r.columns)) for r in db.table(table).scan()]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_round_trip_is_lossless(orders, tmp_path, fmt):
    rows = make_rows(2500)
    load(orders, "t", rows)
    first = tmp_path / f"first.{fmt}"
    assert "Exported 2500 rows" in orders("export", "t", str(first)).stderr
    orders("create-table", "u", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER")
    assert "Imported 2500 rows into u" in orders("import", "u", str(first)).stdout
    assert dump(orders, "u") == dump(orders, "t")
    assert dump(orders, "t") == sorted((pk, typed(c)) for pk, c in rows)
    second = tmp_path / f"second.{fmt}"
    orders("export", "u", str(second), "--format", fmt)
    assert second.read_bytes() == first.read_bytes()


def test_jsonl_keeps_nan_and_binary_keys(cli, tmp_path):
    cli("create-table", "b", "--pk", "k:BINARY")
    cli("put", "b", "--pk", '[{"$binary": "AAE="}]', "--col", "x=NaN", "--col", 'y={"$binary": ""}')
    path = tmp_path / "b.jsonl"
    cli("export", "b", str(path))
    assert (
        path.read_text()
        == '{"pk": [{"$binary": "AAE="}], "columns": {"x": NaN, "y": {"$binary": ""}}}\n'
    )
    cli("drop-table", "b", "--yes")
    cli("create-table", "b", "--pk", "k:BINARY")
    cli("import", "b", str(path))
    with cli.open() as db:
        row = db.table("b").get_row((b"\x00\x01",))
    assert math.isnan(row["x"]) and row["y"] == b""


def test_import_reports_bad_rows_and_writes_the_rest(orders, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"pk": ["a", 1], "columns": {"x": 1}}\n'
        "not json\n"
        "\n"
        '{"pk": ["a", "two"], "columns": {"x": 2}}\n'
        '{"pk": ["a", 3], "columns": {"bad-name": 3}}\n'
        '{"pk": ["a", 4], "columns": {"x": null}}\n'
        '{"pk": ["a", 5], "extra": 1}\n'
        '{"pk": ["a", 6]}\n'
    )
    result = orders("import", "t", str(path), code=1)
    assert "Imported 2 rows into t" in result.stdout
    err = result.stderr
    assert "Error: 5 row(s) failed" in err
    assert "line 2: [ParseError] not valid JSON" in err
    assert "line 4: [OTSInvalidPK]" in err
    assert "line 5: [OTSParameterInvalid] invalid column name 'bad-name'" in err
    assert "line 6: [ParseError] column 'x': null" in err
    assert "... and" not in err
    with orders.open() as db:
        assert [r.primary_key for r in db.table("t").scan()] == [("a", 1), ("a", 6)]


def test_import_repeated_keys_last_line_wins(orders, tmp_path):
    path = tmp_path / "dupes.jsonl"
    lines = [json.dumps({"pk": ["k", i % 3], "columns": {"v": i}}) for i in range(450)]
    path.write_text("\n".join(lines) + "\n")
    assert "Imported 450 rows" in orders("import", "t", str(path)).stdout
    with orders.open() as db:
        assert {r.primary_key[1]: r["v"] for r in db.table("t").scan()} == {0: 447, 1: 448, 2: 449}


def test_import_splits_a_batch_over_the_request_limit(orders, tmp_path):
    big = "x" * (1900 * 1024)  # three of these exceed the 4 MB request limit
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(json.dumps({"pk": ["big", i], "columns": {"s": big}}) + "\n" for i in range(3))
    )
    assert "Imported 3 rows" in orders("import", "t", str(path)).stdout
    with orders.open() as db:
        assert [len(r["s"]) for r in db.table("t").scan()] == [len(big)] * 3


def test_csv_typing_rules(orders, tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(
        "Seq,CardID,amount,name,flag,ratio,note\n"
        '1,123,120,Hangzhou,true,1.0,"""120"""\n'
        '2,c2,,x y,false,2,""""""\n'
        "3,c3,{bad,x,x,x,x\n"
        "4,c4\n"
        ",c5,1,,,,\n"
    )
    result = orders("import", "t", str(path), code=1)
    assert "Imported 2 rows" in result.stdout
    assert "line 4: [ParseError] column 'amount'" in result.stderr
    assert "line 5: [ParseError] has 2 cells; the header has 7" in result.stderr
    assert "line 6: [ParseError] primary key column 'Seq' is empty" in result.stderr
    with orders.open() as db:
        t = db.table("t")
        assert typed(t.get_row(("123", 1)).columns) == typed(
            {"amount": 120, "name": "Hangzhou", "flag": True, "ratio": 1.0, "note": "120"}
        )
        assert typed(t.get_row(("c2", 2)).columns) == typed(
            {"name": "x y", "flag": False, "ratio": 2, "note": ""}
        )


def test_csv_header_errors(orders, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("CardID,amount\nc1,1\n")
    err = orders("import", "t", str(path), code=1).stderr
    assert err.startswith("Error: CSV header lacks primary key column(s) ['Seq']")
    path.write_text("CardID,Seq,a,a\nc1,1,2,3\n")
    assert "names column 'a' twice" in orders("import", "t", str(path), code=1).stderr
    path.write_text("")
    assert "Imported 0 rows" in orders("import", "t", str(path)).stdout


def test_attribute_named_like_key_is_refused(orders):
    err = orders("put", "t", "--pk", '["c1", 1]', "--col", "Seq=5", code=1).stderr
    assert "Error [OTSParameterInvalid]" in err and "'Seq'" in err


def test_stdin_and_stdout(orders):
    rows = "".join(
        json.dumps({"pk": ["s", i], "columns": {"v": i * 1.5}}) + "\n" for i in range(300)
    )
    assert "Imported 300 rows" in orders("import", "t", "-", input=rows).stdout
    out = orders("export", "t", "-", "--format", "jsonl").stdout
    assert sorted(out.splitlines(), key=lambda s: json.loads(s)["pk"][1]) == rows.splitlines()
    csv_out = orders("export", "t", "-", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "CardID,Seq,v" and csv_out[1] == "s,0,0.0" and len(csv_out) == 301


def test_file_and_table_errors(orders, tmp_path):
    err = orders("import", "t", str(tmp_path / "missing.jsonl"), code=1).stderr
    assert err.startswith("Error: [Errno 2] No such file or directory")
    path = tmp_path / "ok.jsonl"
    path.write_text('{"pk": ["a", 1]}\n')
    err = orders("import", "nope", str(path), code=1).stderr
    assert err.startswith("Error [OTSObjectNotExist]: Requested table does not exist.")
    assert "'nope'" in err
    assert orders("export", "nope", str(tmp_path / "o.jsonl"), code=1).stderr.startswith(
        "Error [OTSObjectNotExist]"
    )
    orders("import", "t", str(path), "--format", "xml", code=2)


def test_many_failures_are_summarised(orders, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("oops\n" * 30)
    err = orders("import", "t", str(path), code=1).stderr
    assert "30 row(s) failed" in err and "... and 25 more" in err


def test_bytes_that_are_not_utf8_fail_only_their_row(orders, tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        b'{"pk": ["a", 1], "columns": {"s": "caf\xe9"}}\n{"pk": ["a", 2], "columns": {"s": "ok"}}\n'
    )
    result = orders("import", "t", str(path), code=1)
    assert "Imported 1 rows" in result.stdout
    assert "line 1: [OTSParameterInvalid]" in result.stderr and "not valid Unicode" in result.stderr


def test_csv_with_byte_order_mark(orders, tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffCardID,Seq,v\r\nc1,1,x\r\n".encode())
    assert "Imported 1 rows" in orders("import", "t", str(path)).stdout
    with orders.open() as db:
        assert db.table("t").get_row(("c1", 1)).columns == {"v": "x"}


def test_csv_round_trips_large_cells_and_bare_carriage_returns(orders, tmp_path):
    rows = [(("big", 1), {"v": "x" * 200_000, "n": 1}), (("cr", 2), {"v": "a\rb", "n": 2}),
            (("crlf", 3), {"v": "a\r\nb", "n": 3}), (("bin", 4), {"v": b"\r" * 70_000, "n": 4})]
    load(orders, "t", rows)
    path = tmp_path / "out.csv"
    orders("export", "t", str(path))
    orders("create-table", "u", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER")
    assert "Imported 4 rows into u" in orders("import", "u", str(path)).stdout
    assert dump(orders, "u") == dump(orders, "t")


def test_csv_that_breaks_off_keeps_the_rows_before(orders, tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b"Seq,CardID,v\n1,c1,1\n2,c2,a\rb,1\n")
    result = orders("import", "t", str(path), code=1)
    assert "Imported 1 rows" in result.stdout
    assert "cannot be read as CSV" in result.stderr
    with orders.open() as db:
        assert [r.primary_key for r in db.table("t").scan()] == [("c1", 1)]
