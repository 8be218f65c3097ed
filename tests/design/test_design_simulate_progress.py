"""The simulator's progress callback, its size limit, and both on the command line."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import typer

from widetable.cli import app
from widetable.design import SimConfig, get_workload, simulate, workload_from_dict
from widetable.errors import PARAMETER_INVALID, ParameterInvalid

# the module (widetable.design.simulate is the function of that name)
sim = importlib.import_module("widetable.design.simulate")

pytestmark = pytest.mark.timeout(300)

SMALL = {  # a tiny workload; a file of it runs in well under a second per design
    "name": "small",
    "rate": 100, "duration": 10,
    "fields": {"u": {"kind": "uniform", "count": 50, "format": "u{i:03d}"}},
    "operations": [{"op": "write", "weight": 3}, {"op": "read", "weight": 1}],
    "designs": {"plain": [{"name": "U", "from": "u"}],
                "hashed": [{"name": "U", "from": "u", "transform": "hash_prefix"}]},
}


def _file(tmp_path, **changes) -> str:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**SMALL, **changes}))
    return str(path)


# -- the library ------------------------------------------------------------------


@pytest.mark.parametrize("ops", [1234, 2 * sim.PROGRESS_EVERY, 7])
def test_progress_counts_increase_and_end_at_the_total(ops) -> None:
    calls: list[tuple[str, int, int]] = []
    w = get_workload("monitoring")
    report = simulate(w, ["ip-first", "md5-prefix"], SimConfig(ops=ops, engine="memory"),
                      progress=lambda *a: calls.append(a))
    assert [r.operations for r in report.results] == [ops, ops]
    for design in ("ip-first", "md5-prefix"):
        mine = [(done, total) for d, done, total in calls if d == design]
        counts = [done for done, _ in mine]
        assert counts[0] == 0 and counts[-1] == ops
        assert all(a < b for a, b in itertools.pairwise(counts)), counts  # strictly increasing
        assert {total for _, total in mine} == {ops}
        assert len(mine) <= ops // sim.PROGRESS_EVERY + 2  # a call per PROGRESS_EVERY ops, no more
    # the designs run one after the other
    assert [d for d, *_ in calls] == sorted((d for d, *_ in calls), key=["ip-first", "md5-prefix"].index)


def test_progress_changes_nothing_in_the_report() -> None:
    w = workload_from_dict(SMALL)
    cfg = SimConfig(seed=4, engine="memory")
    plain = simulate(w, config=cfg).to_dict(keyviz=True)
    seen: list[tuple] = []
    watched = simulate(w, config=cfg, progress=lambda *a: seen.append(a)).to_dict(keyviz=True)
    assert plain == watched and seen[-1] == ("hashed", 1000, 1000)


def test_the_limit_names_the_numbers_and_stops_before_any_work(monkeypatch) -> None:
    def no_work(*args, **kwargs):
        raise AssertionError("the simulator started a design")

    monkeypatch.setattr(sim, "run_design", no_work)
    monkeypatch.setattr(sim, "_Run", no_work)
    calls: list[tuple] = []
    with pytest.raises(ParameterInvalid) as err:
        simulate(get_workload("monitoring"), config=SimConfig(ops=1000), max_ops=3999,
                 progress=lambda *a: calls.append(a))
    message = err.value.message
    assert err.value.code == PARAMETER_INVALID == "OTSParameterInvalid"
    for part in ("'monitoring'", "1,000 operations per design", "4 design(s)", "4,000 operations",
                 "limit of 3,999", "--max-ops 4000"):
        assert part in message, (part, message)
    assert calls == []

    # rate x duration of the workload itself, against the default limit
    huge = workload_from_dict({**SMALL, "rate": 100_000, "duration": 100_000})
    with pytest.raises(ParameterInvalid) as err:
        simulate(huge)
    for part in ("rate 100000/s x duration 100000 s", "10,000,000,000 operations per design",
                 "2 design(s)", "20,000,000,000", f"{sim.MAX_OPS:,}"):
        assert part in err.value.message, (part, err.value.message)
    with pytest.raises(ParameterInvalid, match="max_ops must be an integer >= 1"):
        simulate(huge, max_ops=0)


def test_a_limit_at_the_total_runs_and_none_means_no_limit() -> None:
    w = workload_from_dict(SMALL)
    assert sim.plan(w, None, SimConfig(ops=300), max_ops=600).total == 600
    assert sim.plan(w, ["plain"], SimConfig(ops=300), max_ops=300).designs == (w.design("plain"),)
    big = workload_from_dict({**SMALL, "rate": 100_000, "duration": 100_000})
    assert sim.plan(big, None, None, max_ops=None).total == 2 * 10**10
    assert simulate(w, ["plain"], SimConfig(ops=300, engine="memory"), max_ops=300).results[0].operations == 300


@pytest.mark.parametrize("rate, duration", [(1e200, 1e200), (10**200, 10**200)])
def test_a_rate_times_duration_beyond_float_is_refused_as_the_file_is_read(rate, duration) -> None:
    """rate x duration used to raise OverflowError out of the simulator."""
    with pytest.raises(ParameterInvalid, match=r"rate .* x duration .* must be a finite number"):
        workload_from_dict({**SMALL, "rate": rate, "duration": duration})
    with pytest.raises(ParameterInvalid, match="rate must be a number > 0 and finite"):
        workload_from_dict({**SMALL, "rate": 10**400})  # too large for a float: no OverflowError


# -- the command line ---------------------------------------------------------------


def test_cli_default_limit_is_the_library_one() -> None:
    for name in ("simulate", "keyviz"):
        command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
        (param,) = [p for p in command.params if p.name == "max_ops"]
        assert param.default == sim.MAX_OPS


def test_cli_states_the_planned_operations_and_keeps_stdout_clean(cli) -> None:
    out = cli("simulate", "monitoring", "--design", "ip-first", "--design", "md5-prefix",
              "--ops", "700", "--json", "--no-progress")
    assert json.loads(out.stdout)["results"][1]["operations"] == 700
    assert ("simulate monitoring: 700 operations per design (--ops 700) x 2 design(s) "
            "(ip-first, md5-prefix) = 1,400 operations") in out.stderr
    assert "700/700" not in out.stderr  # --no-progress: no bars


def test_cli_draws_a_bar_per_design_on_stderr(cli, tmp_path) -> None:
    out = cli("simulate", _file(tmp_path), "--progress")
    assert "1,000 operations per design (rate 100/s x duration 10 s) x 2 design(s)" in out.stderr
    bars = [line for line in out.stderr.splitlines() if "1000/1000" in line]
    assert [b.split()[0] for b in bars] == ["plain", "hashed"]
    assert "1000/1000" not in out.stdout and "plain" in out.stdout


def test_cli_max_ops_refuses_and_raises_the_limit(cli, tmp_path) -> None:
    path = _file(tmp_path, rate=100_000, duration=100_000)  # 10^10 operations per design
    out = cli("simulate", path, code=1)
    assert "Error [OTSParameterInvalid]" in out.stderr
    assert "10,000,000,000 operations per design" in out.stderr and f"{sim.MAX_OPS:,}" in out.stderr
    assert "--max-ops" in out.stderr and out.stdout == ""
    out = cli("simulate", path, "--ops", "400", "--max-ops", "799", code=1)
    assert "800 operations, over the limit of 799" in out.stderr
    out = cli("simulate", path, "--ops", "400", "--max-ops", "800", "--json")
    assert [r["operations"] for r in json.loads(out.stdout)["results"]] == [400, 400]
    out = cli("keyviz", "--workload", path, "--out", str(tmp_path / "k.html"), code=1)
    assert "over the limit of" in out.stderr


def test_cli_ctrl_c_stops_with_130_and_one_line(cli, tmp_path, monkeypatch) -> None:
    executed = 0
    real = sim._Run.execute

    def execute(self, op) -> None:
        nonlocal executed
        executed += 1
        if executed == 1700:
            raise KeyboardInterrupt
        real(self, op)

    monkeypatch.setattr(sim._Run, "execute", execute)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = cli("simulate", _file(tmp_path), "--progress", code=130)
    last = out.stderr.strip().splitlines()[-1]
    assert last == "Interrupted: simulation of 'small' stopped in design 'hashed' after 500 of 1,000 operations; no report."
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert list(scratch.iterdir()) == []  # each design's temporary store is gone


def test_sigint_to_a_running_simulation(tmp_path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # A shell's background job starts with SIGINT ignored, and a child inherits an ignored
    # signal (a handled one is reset to the default by exec): handle it while starting the
    # child, which then takes SIGINT as a terminal's Ctrl-C delivers it, whatever ran us.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "widetable", "--data", str(tmp_path / "d"), "simulate",
             "monitoring", "--no-progress"],
            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        first = proc.stderr.readline()  # the plan: the simulation starts right after it
        assert "48,000 operations per design" in first
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert stdout == ""
    assert stderr.strip().startswith("Interrupted: simulation of 'monitoring' stopped in design ")
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
