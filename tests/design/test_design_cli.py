"""advise, simulate and keyviz on the command line."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(600)


def test_simulate_compares_designs_and_writes_files(cli, tmp_path) -> None:
    chart = tmp_path / "c.png"
    kv = tmp_path / "kv"
    wl = tmp_path / "w.yaml"
    out = cli("simulate", "monitoring", "--design", "timestamp-first", "--design", "ip-first",
              "--ops", "3000", "--chart", str(chart), "--keyviz", str(kv), "--save-workload", str(wl))
    assert "timestamp-first" in out.stdout and "ip-first" in out.stdout
    assert chart.stat().st_size > 10_000
    assert (kv / "monitoring-ip-first.html").exists() and (kv / "monitoring-ip-first.png").exists()
    again = cli("simulate", str(wl), "--design", "ip-first", "--ops", "2000", "--json")
    assert json.loads(again.stdout)["results"][0]["design"] == "ip-first"


def test_advise_and_keyviz_on_a_table(cli, tmp_path) -> None:
    cli("create-table", "m", "--pk", "Timestamp:INTEGER", "--pk", "MachineIp:STRING")
    db = cli.open()
    t = db.table("m")
    for i in range(400):
        t.put_row((1718000000 + i, f"10.0.0.{i % 50}"), {"cpu": i % 100})
    db.close()
    out = cli("advise", "m", "--no-simulate")
    assert "monotonic-first-key" in out.stdout and "CRITICAL" in out.stdout
    data = json.loads(cli("advise", "m", "--no-simulate", "--json").stdout)
    assert data["findings"][0]["rule"] == "monotonic-first-key"
    html = tmp_path / "kv.html"
    cli("keyviz", "m", "--out", str(html), "--metric", "writes")
    assert "<canvas" in html.read_text()
    png = tmp_path / "sim.png"
    cli("keyviz", "--workload", "ycsb-zipfian", "--design", "hashed", "--out", str(png), "--metric", "reads")
    assert png.stat().st_size > 10_000


def test_simulate_a_bad_workload_file_is_one_clear_error(cli, tmp_path) -> None:
    """It used to print a KeyError traceback."""
    wl = tmp_path / "w.yaml"
    wl.write_text('fields: {u: {kind: uniform, count: 10, format: "u{x}"}}\ndesigns: {d: [{name: U, from: u}]}\n')
    out = cli("simulate", str(wl), code=1)
    assert "OTSParameterInvalid" in out.output and "'u{x}'" in out.output


@pytest.mark.parametrize("size", ["nan", "inf", "-5"])
def test_advise_refuses_an_expected_size_that_is_no_size(cli, size) -> None:
    cli("create-table", "m", "--pk", "k:STRING")
    out = cli("advise", "m", "--no-simulate", "--expected-gb", size, code=1)
    assert "OTSParameterInvalid" in out.output and "--expected-gb" in out.output
    cli("advise", "m", "--no-simulate", "--expected-gb", "0.5")


def test_advise_reads_binary_keys_from_a_keys_file(cli, tmp_path) -> None:
    cli("create-table", "b", "--pk", "k:BINARY")
    keys = tmp_path / "keys.jsonl"
    keys.write_text("".join(f'[{{"$binary": "{i:012d}"}}]\n' for i in range(0, 4000, 4)))
    out = cli("advise", "b", "--keys", str(keys), "--no-simulate", "--json")
    assert json.loads(out.stdout)["sampled_keys"] == 1000
