"""The design tools on odd input: bucketed ranges' bounds, limits and direction; the
advisor's sequence detection on large, bucketed and zero-padded keys; key files; and
workload files that are not what they should be."""

from __future__ import annotations

import json

import pytest

import widetable
from widetable import WidetableError
from widetable.design.advisor import advise, read_keys_file
from widetable.design.bucketed import BucketedTable
from widetable.design.findings import sequential_density
from widetable.design.workloads import load_workload, workload_from_dict
from widetable.keys import builders


@pytest.fixture
def db(tmp_path):
    d = widetable.open(str(tmp_path / "s"), purge_interval=None, maintenance_interval=None)
    yield d
    d.close()


def _invalid(fn, *args, match: str) -> None:
    with pytest.raises(WidetableError, match=match) as err:
        fn(*args)
    assert err.value.code == "OTSParameterInvalid"


def _invalid_file(fn, path, text: str, match: str) -> None:
    path.write_text(text)
    _invalid(fn, path, match=match)


def test_bucketed_ranges_follow_a_tables_bounds_limits_and_direction(db) -> None:
    bt = BucketedTable.create(db, "b", [("k", "STRING"), ("n", "INTEGER")], buckets=8)
    rows = [(k, n) for k in "abc" for n in range(3)]
    for pk in rows:
        bt.put_row(pk, {"v": 1})
    assert [r.primary_key for r in bt.scan(("a",), ("b",))] == [("a", 0), ("a", 1), ("a", 2)]
    assert [r.primary_key for r in bt.scan(("b",))] == rows[3:]
    assert [r.primary_key for r in bt.scan(direction="backward")] == rows[::-1]
    assert [r.primary_key for r in bt.scan(("b",), ("a",), direction="backward")] == [
        ("b", 2), ("b", 1), ("b", 0)]
    for bad in (0, -1, 1.5):
        _invalid(lambda limit=bad: bt.get_range(("a",), ("c",), limit=limit),
                 match="limit must be a positive integer")


def test_sequence_detection_on_samples_buckets_and_padded_keys(db) -> None:
    db.create_table("orders", [("OrderId", "INTEGER")])
    for start in range(1, 6001, 200):
        db.batch_write_row([("orders", "put", (i,), {"v": 1}) for i in range(start, start + 200)])
    # 6,000 ids, of which the advisor samples 2,000: the table's rows fill the span
    assert "monotonic-first-key" in advise(db, "orders", simulate_fixes=False).rules
    bt = BucketedTable.create(db, "bucketed", [("ts", "INTEGER"), ("ip", "STRING")], buckets=64)
    for i in range(3000):
        bt.put_row((1718000000 + i, f"10.0.0.{i % 50}"), {"v": 1})
    assert "monotonic-first-key" not in advise(db, "bucketed", simulate_fixes=False).rules
    padded = db.create_table("padded", [("Seq", "STRING")])
    for i in range(500):
        padded.put_row((builders.concat(i),), {"v": 1})  # the default width, 20 digits
    assert "monotonic-first-key" in advise(db, "padded", simulate_fixes=False).rules
    assert sequential_density(list(range(0, 4000, 2)), population=4000) == 1.0
    assert sequential_density(list(range(0, 4000, 2))) == pytest.approx(0.5, abs=0.001)
    assert sequential_density([i % 64 for i in range(2000)]) == 0.0  # bucket numbers


def test_key_files_in_either_layout_and_their_errors(db, tmp_path) -> None:
    db.create_table("t", [("ts", "INTEGER"), ("ip", "STRING")])
    keys = [[1718000000 + i, f"10.0.0.{i}"] for i in range(3)]
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(keys, indent=2))
    lines = tmp_path / "keys.jsonl"
    lines.write_text("\n".join(json.dumps(k) for k in keys) + "\n")
    assert read_keys_file(pretty) == read_keys_file(lines) == [tuple(k) for k in keys]
    _invalid_file(read_keys_file, tmp_path / "bad.jsonl", '[1, "a"]\n{oops\n', "line 2: not JSON")
    _invalid_file(read_keys_file, tmp_path / "objects.jsonl", '{"a": 1}\n',
                  "key values are strings or integers")
    _invalid(read_keys_file, tmp_path / "missing.json", match="cannot read keys file")
    _invalid(lambda: advise(db, "t", keys=[("s0", "ip0")], simulate_fixes=False),
             match=r"does not fit the table's key \(ts INTEGER, ip STRING\)")


BASE = {"name": "w", "fields": {"k": {"kind": "uniform", "count": 3}},
        "designs": {"d": [{"name": "K", "from": "k"}]}}


@pytest.mark.parametrize("change, message", [
    ({"fields": ["a", "b"]}, "fields are a mapping"),
    ({"fields": {"k": {"kind": "int", "lo": 10, "hi": 5}}}, "lo 10 is above hi 5"),
    ({"fields": {"k": {"kind": "uniform", "count": "3"}}}, "count must be an integer"),
    ({"fields": {"k": {"kind": "of", "of": "nope", "count": 2}}}, "of names unknown field 'nope'"),
    ({"operations": [{"op": "write", "wieght": 3}]}, r"unknown settings \['wieght'\]"),
    ({"operations": {"op": "write"}}, "operations are a list"),
    ({"rate": 0}, "rate must be a number > 0"),
    ({"duration": "long"}, "duration must be a number > 0"),
])
def test_bad_workloads_are_parameter_errors(change, message) -> None:
    _invalid(workload_from_dict, {**BASE, **change}, match=message)


CLOCK = {"kind": "clock"}


def _col(**col) -> dict:
    return {"designs": {"d": [{"name": "K", "from": "k", **col}]}}


def _fields(**fields) -> dict:
    return {"fields": {"k": {"kind": "uniform", "count": 3}, **fields}}


@pytest.mark.parametrize("change, message", [
    # each once raised a raw KeyError, AttributeError, TypeError, OverflowError, IndexError or ValueError
    ({"fields": {"k": {"kind": "uniform", "count": 3, "format": "u{x}"}}}, r"format 'u\{x\}' does not render"),
    ({"fields": {"k": {"kind": "uniform", "count": 3, "format": 5}}}, "format must be a string, got 5"),
    ({"fields": {"k": {"kind": "zipf", "count": 3, "s": "x"}}}, "zipf s must be a number"),
    ({"fields": {"k": {"kind": "zipf", "count": 3, "s": 1000}}}, "zipf s must be a number.*got 1000"),
    ({"fields": {"k": {"kind": "zipf", "count": 10**6, "s": 99}}}, "too large for count"),
    ({"operations": [{"op": "write", "weight": -1}]}, "weight must be a number >= 0, got -1"),
    ({"operations": [{"op": "write", "weight": "x"}]}, "weight must be a number >= 0, got 'x'"),
    ({"operations": [{"op": "write", "weight": 0}]}, "weights .* are all zero"),
    ({"value_bytes": "x"}, "value_bytes must be an integer >= 0, got 'x'"),
    ({"fields": {"k": {"kind": "int", "lo": 5, "hi": 5}}}, "empty for lo = hi = 5"),
    ({**_fields(c=CLOCK, g={"kind": "of", "of": "c", "count": 2})}, "of names 'c', which must be an earlier"),
    ({"rate": float("inf")}, "rate must be a number > 0 and finite, got inf"),
    ({"duration": float("inf")}, "duration must be a number > 0 and finite"),
    ({"designs": ["d"]}, r"designs are a mapping .* got \['d'\]"),
    ({"designs": {"d": None}}, "design 'd' needs a list of key columns, got None"),
    ({**_fields(c=CLOCK), **_col(**{"from": ["k", "c"]})}, r"from \['k', 'c'\] must be a list .* with transform concat"),
    ({**_col(transform="concat")}, "from 'k' must be a list"),
    ({"fields": {"k": {"kind": "uniform", "count": 3, "format": "u{i}"}}, **_col(transform="pad")},
     "transform pad needs an integer, but field 'k' makes strings"),
    ({"fields": {"k": {"kind": "uniform", "count": 3, "format": "u{i}"}}, **_col(transform="reverse_timestamp")},
     "transform reverse_timestamp needs an integer"),
    ({**_fields(c=CLOCK), "operations": [{"op": "range", "range": "c", "span": "x"}]}, "span must be an integer >= 0, got 'x'"),
    ({**_col(transform="hash_prefix", param=0)}, r"hash_prefix param must be an integer in \[1, 32\], got 0"),
    ({**_col(transform="salted", param=0)}, "salted param must be an integer >= 1, got 0"),
    ({**_col(transform="mod", param=-3)}, "mod param must be an integer >= 1, got -3"),
    ({**_col(transform="reverse_digits", param=3)}, "takes no param, got 3"),
    ({**_col(type="string")}, "type must be one of STRING, INTEGER, BINARY, got 'string'"),
    ({"fields": {"k": {"kind": "clock", "unit": "minutes"}}}, "unit must be one of s, ms, got 'minutes'"),
    ({"fields": {"k": {"kind": "choice", "values": ["a", "b"], "weights": [0, 0]}}}, r"weights \[0, 0\] are all zero"),
    ({"fields": {"k": {"kind": "choice", "values": ["a", None]}}}, "choice value None is not a key value"),
    ({"fields": {"k": {"kind": "choice", "values": "abc"}}}, "choice needs a list of values, got 'abc'"),
    ({"operations": [{"op": "range", "eq": "k"}]}, "eq must be a list of fields, got 'k'"),
    ({"operations": [{"op": "range", "range": "k", "limit": 0}]}, "limit must be an integer >= 1, got 0"),
    ({"description": 5}, "description must be a string, got 5"),
])
def test_bad_workload_settings_name_the_setting_and_value(change, message) -> None:
    _invalid(workload_from_dict, {**BASE, **change}, match=message)


def test_workload_files_that_do_not_parse_or_make_the_wrong_type(tmp_path) -> None:
    _invalid_file(load_workload, tmp_path / "w.yaml", "name: x\nrate: [1\n", "cannot read workload")
    _invalid_file(load_workload, tmp_path / "w.json", "{name: 1}", "cannot read workload")
    from widetable.design.generate import Generator, primary_key

    w = workload_from_dict({**BASE, "fields": {"k": {"kind": "uniform", "count": 3, "format": "x{i}"}},
                            "designs": {"d": [{"name": "K", "from": "k", "type": "INTEGER"}]}})
    op = next(o for o in Generator(w, 0).ops(10) if o.kind == "write")
    _invalid(primary_key, w.designs[0], op.record, match="key column 'K' is INTEGER")
