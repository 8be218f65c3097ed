"""Workload files (YAML and JSON), built-ins, and key ranges per design."""

from __future__ import annotations

import json

import pytest

from widetable import WidetableError
from widetable.design.generate import Generator, key_ranges, primary_key
from widetable.design.workloads import BUILTINS, get_workload, load_workload, workload_from_dict
from widetable.keys.codec import INF_MAX, INF_MIN

YAML = """
name: clicks
rate: 100
duration: 10
fields:
  ts: {kind: clock}
  user: {kind: zipf, count: 50, format: "u{i:03d}"}
operations:
  - {op: write, weight: 3}
  - {op: range, weight: 1, eq: [user], range: ts, span: 60}
designs:
  user-first: [{name: User, from: user}, {name: Ts, type: INTEGER, from: ts}]
  salted: [{name: S, from: user, transform: salted, param: 8}, {name: Ts, type: INTEGER, from: ts}]
"""


def test_yaml_and_json_files_load_the_same(tmp_path) -> None:
    y = tmp_path / "w.yaml"
    y.write_text(YAML)
    w = load_workload(y)
    j = tmp_path / "w.json"
    j.write_text(json.dumps(w.to_dict()))
    assert load_workload(j) == w
    assert [d.name for d in w.designs] == ["user-first", "salted"]
    assert get_workload(str(y)) == w


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtins_round_trip(name) -> None:
    w = get_workload(name)
    assert workload_from_dict(w.to_dict()) == w


def test_bad_workloads_are_rejected() -> None:
    with pytest.raises(WidetableError, match="kind"):
        workload_from_dict({"fields": {"a": {"kind": "nope"}}, "designs": {"d": []}})
    with pytest.raises(WidetableError, match="unknown field"):
        workload_from_dict({"fields": {"a": {"kind": "clock"}}, "designs": {"d": [{"name": "x", "from": "b"}]}})
    with pytest.raises(WidetableError, match="no workload"):
        get_workload("no-such-workload")


def test_generator_is_deterministic() -> None:
    w = get_workload("student-card")
    assert list(Generator(w, 5).ops(500)) == list(Generator(w, 5).ops(500))
    assert list(Generator(w, 5).ops(500)) != list(Generator(w, 6).ops(500))


def test_key_ranges_follow_the_design() -> None:
    w = get_workload("monitoring")
    ops = [o for o in Generator(w, 1).ops(400) if o.kind == "range"]
    op = ops[0]
    ip_first = key_ranges(w.design("ip-first"), op)
    assert len(ip_first) == 1 and ip_first[0][0][0] == op.record["ip"]
    assert len(key_ranges(w.design("bucketed-16"), op)) == 16
    ts_first = key_ranges(w.design("timestamp-first"), op)
    assert ts_first == [((op.lo, INF_MIN), (op.hi, INF_MIN))]
    write = next(o for o in Generator(w, 1).ops(10) if o.kind == "write")
    assert primary_key(w.design("md5-prefix"), write.record)[0].endswith("," + write.record["ip"])
    assert INF_MAX  # imported for symmetry
