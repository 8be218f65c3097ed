"""main(), python -m widetable, the bench forwarder, and the end-to-end demo."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from widetable.cli import main


def widetable_command() -> list[str]:
    script = Path(sys.executable).with_name("widetable")
    return [str(script)] if script.exists() else [sys.executable, "-m", "widetable"]


def test_main_runs_commands(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(tmp_path), "create-table", "t", "--pk", "k:STRING"])
    assert exit_.value.code == 0
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(tmp_path), "get", "t", "--pk", '["nope"]'])
    assert exit_.value.code == 1
    assert "Error: no row" in capsys.readouterr().err


def test_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "widetable", "--data", str(tmp_path / "none"), "describe", "nope"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: no store at")
    assert "Traceback" not in proc.stderr


def test_bench_forwards_arguments(cli, monkeypatch):
    seen = []
    fake = types.ModuleType("bench")
    fake.main = lambda argv: seen.append(argv) or 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench", fake)
    cli("bench", "--records", "10", "--help", "-x", code=3)
    assert seen == [["--records", "10", "--help", "-x"]]


def test_bench_without_main(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "bench", types.ModuleType("bench"))
    assert "has no main(argv)" in cli("bench", code=1).stderr


def test_bench_not_importable(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "bench", None)
    assert "the bench package is not importable" in cli("bench", code=1).stderr


def test_demo_in_process(cli):
    out = cli("demo", "--rows", "600").stdout
    for text in (
        "partition key",
        "get_row",
        "get_range",
        "backward",
        "amount",
        "OTSConditionCheckFail",
        "refunded': 300",
        "next_start_primary_key = None",
    ):
        assert text in out
    with cli.open() as db:
        t = db.table("consumption")
        assert [n for n, _ in t.schema.primary_key] == [
            "CardID",
            "DeviceID",
            "SellerID",
            "OrderNumber",
        ]
        rows = list(t.scan())
    assert len(rows) == 600
    assert {type(r["amount"]) for r in rows} == {int} and {type(r["paid"]) for r in rows} == {bool}
    per_device: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: r["time"]):
        per_device.setdefault(r.primary_key[1], []).append(r.primary_key[3])
    assert all(orders == list(range(1, len(orders) + 1)) for orders in per_device.values())
    # The search index part (seed 000 多元索引): each figure it prints is the brute-force answer.
    assert "多元索引" in out
    flat = " ".join(out.split())  # titles wrap at the terminal's width
    times = sorted(r["time"] for r in rows if r.primary_key[2] == "S03")
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    assert f"5 of {sum(lo <= t < hi for t in times)}" in flat
    s01 = sum(r["amount"] for r in rows if r.primary_key[2] == "S01")
    assert f"S01 {sum(r.primary_key[2] == 'S01' for r in rows)} {s01 / 100:.2f}" in flat
    assert f"3 of {sum('牛肉' in r['note'] for r in rows)}" in flat


def test_demo_end_to_end_twice(tmp_path):
    """What ``make run`` does, twice in one directory; it must stay quick."""
    env = {**os.environ, "COLUMNS": "100"}
    outputs = []
    for _ in range(2):
        started = time.monotonic()
        proc = subprocess.run(
            [*widetable_command(), "demo", "--data", str(tmp_path / "data")],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - started < 30
        outputs.append(proc.stdout)
    assert "dropping and rebuilding" not in outputs[0]
    assert (
        "Table 'consumption' exists from a previous run; dropping and rebuilding it." in outputs[1]
    )
    assert (
        outputs[0].count("OTSConditionCheckFail") == outputs[1].count("OTSConditionCheckFail") >= 2
    )
