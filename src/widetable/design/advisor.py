"""The key-design advisor: evidence in, findings out, fixes simulated.

``advise(db, "table")`` samples the table's keys and rows, reads its recorded
statistics (``db.table_stats``) and partition estimates, runs every rule of
:mod:`.rules` and returns an :class:`Advice`. ``advise_evidence(ev)`` does the
same for evidence gathered elsewhere (a key file, a crafted design in a test).

With ``simulate=True`` each finding whose fix is a different key (monotonic
first column, skewed partition key) is checked by the simulator: a workload
recorded from the evidence (:mod:`.record`) is replayed under the current key
and under the fix, and both results are attached to the finding.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ParameterInvalid, describe
from ..table.values import ATTRIBUTE_TYPES, now_ms
from .findings import SEVERITY_ORDER, Comparison, Evidence, Finding, RowShape
from .record import record_workload, with_design
from .rules import run_rules
from .simulate import SimConfig, simulate
from .workloads import KeyDesign

SAMPLE = 2000
MAX_SCAN = 200_000
SIMULATED_OPS = 16_000


@dataclass(frozen=True, slots=True)
class Advice:
    """The advisor's report on one table: findings, worst first."""

    table: str
    primary_key: tuple[tuple[str, str], ...]
    sampled_keys: int
    findings: tuple[Finding, ...]

    @property
    def rules(self) -> set[str]:
        return {f.rule for f in self.findings}

    def to_dict(self) -> dict:
        return {
            "table": self.table, "primary_key": [list(c) for c in self.primary_key],
            "sampled_keys": self.sampled_keys, "findings": [f.to_dict() for f in self.findings],
        }


def _size(v: object) -> int:
    if isinstance(v, (bytes, str)):
        return len(v.encode() if isinstance(v, str) else v)
    return 8


def sample_table(db, name: str, size: int = SAMPLE, seed: int = 0) -> tuple[list[tuple], list[RowShape]]:
    """A reservoir sample of ``size`` rows (keys and shapes) from the first ``MAX_SCAN`` rows."""
    rng = random.Random(seed)
    keys: list[tuple] = []
    shapes: list[RowShape] = []
    table = db.table(name)
    # A Bigtable table (widetable.bigtable) refuses the row API: it gives its rows itself.
    rows = table.sample_rows(MAX_SCAN) if hasattr(table, "sample_rows") else table.scan()
    for n, row in enumerate(rows):
        if n >= MAX_SCAN:
            break
        cells = [_size(v) for v in row.columns.values()]
        stamps = row.timestamps.values()
        shape = RowShape(len(cells), max(cells, default=0), sum(cells), max(stamps, default=0))
        if n < size:
            keys.append(tuple(row.primary_key))
            shapes.append(shape)
        else:
            j = rng.randrange(n + 1)
            if j < size:
                keys[j] = tuple(row.primary_key)
                shapes[j] = shape
    return keys, shapes


BINARY_TAG = "$binary"  # the command line's JSON form of bytes: {"$binary": "<base64>"}


def _key_value(v: object, path: str | Path) -> object:
    """A key value of a keys file: bytes come as ``{"$binary": base64}``, as everywhere on the CLI."""
    if isinstance(v, dict) and set(v) == {BINARY_TAG} and isinstance(v[BINARY_TAG], str):
        try:
            return base64.b64decode(v[BINARY_TAG], validate=True)
        except (binascii.Error, ValueError):
            raise ParameterInvalid(
                f"keys file {str(path)!r}: {describe(v)} is not valid base64") from None
    return v


def read_keys_file(path: str | Path) -> list[tuple]:
    """Primary keys from a file: one JSON array per line (JSON Lines), or a JSON list of arrays.

    Values are strings, integers, or bytes as ``{"$binary": "<base64>"}``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterInvalid(f"cannot read keys file {str(path)!r}: {exc}") from None
    try:
        whole = json.loads(text)  # a JSON list of arrays, on one line or pretty-printed
    except ValueError:
        whole = None
    if isinstance(whole, list) and all(isinstance(item, list) for item in whole):
        items = whole
    else:
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise ParameterInvalid(
                    f"keys file {str(path)!r}, line {n}: not JSON ({exc.msg}); expected one JSON "
                    "array per line or a JSON list of arrays") from None
    out = []
    for item in items:
        key = tuple(_key_value(v, path) for v in (item if isinstance(item, list) else [item]))
        bad = next((v for v in key if type(v) not in (str, int, bytes)), None)
        if bad is not None:
            raise ParameterInvalid(
                f"keys file {str(path)!r}: key {describe(key)} holds {describe(bad)}; key values "
                f'are strings or integers, or bytes as {{"{BINARY_TAG}": "<base64>"}}')
        out.append(key)
    return out


def _check_keys(keys: list[tuple], primary_key) -> None:
    """Given keys must have the table's key columns and their types."""
    want = [c[1] for c in primary_key]
    for key in keys:
        if len(key) != len(want) or any(
                ATTRIBUTE_TYPES.get(type(v)) != t for v, t in zip(key, want)):
            cols = ", ".join(f"{c[0]} {c[1]}" for c in primary_key)
            raise ParameterInvalid(f"key {describe(key)} does not fit the table's key ({cols})")


def gather(
    db, name: str, keys: list[tuple] | None = None, range_scans: bool | None = None,
    expected_bytes: int | None = None, sample: int = SAMPLE,
) -> Evidence:
    """Evidence about table ``name``: its schema, a key sample (or ``keys``), stats, estimates."""
    d = db.describe_table(name)
    if keys is not None:
        _check_keys(keys, d.primary_key)
    sampled, shapes = sample_table(db, name, sample)
    try:
        stats = db.table_stats(name)
    except Exception:  # noqa: BLE001 - a table without partition statistics
        stats = None
    return Evidence(
        table=name, primary_key=tuple(tuple(c) for c in d.primary_key),  # type: ignore[misc]
        keys=tuple(keys if keys is not None else sampled), rows=tuple(shapes), stats=stats,
        total_rows=sum(p.rows for p in d.partitions), total_bytes=sum(p.bytes for p in d.partitions),
        partition_bytes=tuple(p.bytes for p in d.partitions),
        partition_ids=tuple(p.id for p in d.partitions),
        range_scans=range_scans, expected_bytes=expected_bytes, now_ms=now_ms(),
    )


def advise(
    db, name: str, keys: list[tuple] | None = None, range_scans: bool | None = None,
    expected_bytes: int | None = None, simulate_fixes: bool = True, seed: int = 0,
) -> Advice:
    """Advise on table ``name`` of ``db``; see the module docstring."""
    ev = gather(db, name, keys, range_scans, expected_bytes)
    return advise_evidence(ev, simulate_fixes, seed)


def advise_evidence(ev: Evidence, simulate_fixes: bool = False, seed: int = 0) -> Advice:
    """Run every rule on ``ev``; optionally simulate the fixes that change the key."""
    if not ev.primary_key:
        raise ParameterInvalid("the evidence has no primary key")
    findings = run_rules(ev)
    if simulate_fixes:
        findings = [_simulated(ev, f, seed) for f in findings]
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return Advice(ev.table, ev.primary_key, len(ev.keys), tuple(findings))


def _simulated(ev: Evidence, f: Finding, seed: int) -> Finding:
    if not f.fix_design or not ev.keys:
        return f
    fix = KeyDesign("fix", tuple(f.fix_design), note=f.fix)
    if [c.name for c in fix.columns] == [n for n, _ in ev.primary_key] and not fix.columns[0].transform:
        return f
    workload = with_design(record_workload(ev), fix)
    report = simulate(workload, None, SimConfig(seed=seed, ops=SIMULATED_OPS))
    before, after = report.result("current"), report.result("fix")
    cmp = Comparison(workload.name, before.primary_key, after.primary_key,
                     before.metrics(), after.metrics())
    return replace(f, simulation=cmp)
