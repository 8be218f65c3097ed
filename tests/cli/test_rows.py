"""put, update, get and delete: value typing, conditions and error exits."""

from __future__ import annotations

import json


def typed(columns: dict) -> str:
    """Columns with their types, so 1, 1.0 and True compare unequal."""
    return repr(sorted((k, type(v).__name__, v) for k, v in columns.items()))


def test_put_types_values_by_json(orders):
    orders(
        "put",
        "t",
        "--pk",
        '["c1", 5]',
        "--col",
        "amount=120",
        "--col",
        'name="x"',
        "--col",
        "city=Hangzhou",
        "--col",
        "f=1.0",
        "--col",
        "ok=true",
        "--col",
        "neg=-5",
        "--col",
        'zip="01234"',
        "--col",
        'b={"$binary": "AAE="}',
        "--col",
        "empty=",
        "--col",
        "phrase=two words",
    )
    with orders.open() as db:
        row = db.table("t").get_row(("c1", 5))
    assert typed(row.columns) == typed(
        {
            "amount": 120,
            "name": "x",
            "city": "Hangzhou",
            "f": 1.0,
            "ok": True,
            "neg": -5,
            "zip": "01234",
            "b": b"\x00\x01",
            "empty": "",
            "phrase": "two words",
        }
    )


def test_put_json_and_col_merge(orders):
    orders(
        "put",
        "t",
        "--pk",
        '{"CardID": "c1", "Seq": 1}',
        "--json",
        '{"a": 1, "b": 2.5}',
        "--col",
        "c=x",
    )
    line = orders("get", "t", "--pk", '["c1", 1]', "--format", "jsonl").stdout
    assert json.loads(line) == {"pk": ["c1", 1], "columns": {"a": 1, "b": 2.5, "c": "x"}}
    err = orders(
        "put", "t", "--pk", '["c1", 1]', "--json", '{"a": 1}', "--col", "a=2", code=2
    ).stderr
    assert "given twice" in err


def test_bad_arguments_are_usage_errors(orders):
    err = orders("put", "t", "--pk", '["c1", 6', "--col", "a=1", code=2).stderr
    assert "--pk" in err and "not valid JSON" in err
    assert (
        "not valid JSON" in orders("put", "t", "--pk", '["c1", 6]', "--col", "a=[1", code=2).stderr
    )
    assert "NAME=VALUE" in orders("put", "t", "--pk", '["c1", 6]', "--col", "a", code=2).stderr
    assert "null" in orders("put", "t", "--pk", '["c1", 6]', "--col", "a=null", code=2).stderr
    assert "object" in orders("put", "t", "--pk", '["c1", 6]', "--json", "[1]", code=2).stderr
    assert (
        "base64"
        in orders("put", "t", "--pk", '["c1", 6]', "--col", 'b={"$binary": "@@"}', code=2).stderr
    )
    assert (
        "not-exist" in orders("put", "t", "--pk", '["c1", 6]', "--expect", "maybe", code=2).stderr
    )


def test_library_errors_exit_1(orders):
    err = orders("put", "t", "--pk", '["c1", "x"]', "--col", "a=1", code=1).stderr
    assert err.startswith("Error [OTSInvalidPK]: ")
    err = orders("put", "nope", "--pk", '["c1", 1]', "--col", "a=1", code=1).stderr
    assert err == ("Error [OTSObjectNotExist]: Requested table does not exist. No table or "
                   "index 'nope'\n")
    err = orders("put", "t", "--pk", '["c1", 1]', "--col", "bad-name=1", code=1).stderr
    assert err.startswith("Error [OTSParameterInvalid]: invalid column name 'bad-name'")
    err = orders(
        "put", "t", "--pk", '["c1", 1]', "--col", "a=1", "--condition", "a >", code=1
    ).stderr
    assert err.startswith("Error [OTSParameterInvalid]: cannot parse filter")


def test_put_conditions(orders):
    pk = '["c1", 5]'
    orders("put", "t", "--pk", pk, "--col", "amount=120", "--expect", "not-exist")
    err = orders(
        "put", "t", "--pk", pk, "--col", "amount=1", "--expect", "not-exist", code=1
    ).stderr
    assert err.startswith("Error [OTSConditionCheckFail]: ")
    orders("put", "t", "--pk", pk, "--col", "amount=2", "--condition", "amount > 200", code=1)
    orders("put", "t", "--pk", '["c1", 6]', "--col", "amount=2", "--expect", "exist", code=1)
    with orders.open() as db:
        assert db.table("t").get_row(("c1", 5)).columns == {"amount": 120}
        assert db.table("t").get_row(("c1", 6)) is None
    orders(
        "put",
        "t",
        "--pk",
        pk,
        "--col",
        "amount=150",
        "--expect",
        "exist",
        "--condition",
        "amount >= 120",
    )
    assert json.loads(orders("get", "t", "--pk", pk, "--format", "jsonl").stdout)["columns"] == {
        "amount": 150
    }


def test_get_table_columns_and_versions(orders):
    for amount in (1, 2, 3, 4):
        orders(
            "update", "t", "--pk", '["c1", 1]', "--col", f"amount={amount}", "--col", 'name="[x]"'
        )
    table = orders("get", "t", "--pk", '["c1", 1]').stdout
    assert "amount" in table and "INTEGER" in table and "[x]" in table  # markup is not interpreted
    line = orders(
        "get",
        "t",
        "--pk",
        '["c1", 1]',
        "--columns",
        "amount",
        "--max-versions",
        "3",
        "--format",
        "jsonl",
    ).stdout
    obj = json.loads(line)
    assert obj["columns"] == {"amount": 4}
    assert [v for v, _ in obj["versions"]["amount"]] == [4, 3, 2]
    err = orders("get", "t", "--pk", '["c1", 2]', code=1).stderr
    assert err.startswith("Error: no row with primary key")


def test_update_increment_and_delete_column(orders):
    pk = '["c1", 1]'
    assert (
        "refunded = 150" in orders("update", "t", "--pk", pk, "--increment", "refunded=150").stdout
    )
    assert (
        "refunded = 300" in orders("update", "t", "--pk", pk, "--increment", "refunded=150").stdout
    )
    orders("update", "t", "--pk", pk, "--col", "note=x", "--delete-column", "refunded")
    with orders.open() as db:
        assert db.table("t").get_row(("c1", 1)).columns == {"note": "x"}
    err = orders("update", "t", "--pk", pk, "--increment", "note=1", code=1).stderr
    assert err.startswith("Error [OTSParameterInvalid]: cannot increment column 'note'")
    orders("update", "t", "--pk", pk, "--increment", "n=1.5", code=1)
    orders("update", "t", "--pk", pk, "--col", "note=y", "--expect", "not-exist", code=1)


def test_delete(orders):
    orders("put", "t", "--pk", '["c1", 1]', "--col", "a=1")
    orders("delete", "t", "--pk", '["c1", 1]', "--condition", "a == 2", code=1)
    assert (
        "Deleted row ['c1', 1]"
        in orders("delete", "t", "--pk", '["c1", 1]', "--expect", "exist").stdout
    )
    orders("delete", "t", "--pk", '["c1", 1]')  # a missing row is not an error
    err = orders("delete", "t", "--pk", '["c1", 1]', "--expect", "exist", code=1).stderr
    assert err.startswith("Error [OTSConditionCheckFail]")
