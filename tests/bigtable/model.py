"""A plain reference model of Bigtable's RowFilter semantics, for differential tests.

Written apart from ``widetable.bigtable.filters`` and as directly as the definitions
read: a row is a list of cells kept SORTED after every step (family, qualifier,
timestamp descending, then labels, then value, the tie order widetable documents);
each filter returns ``(output, sunk)``; no fusion, caches or fast paths. Regexes are
RE2 in Latin-1 mode, fully anchored, called every time.

Entry points:
- ``model_valid(f)``: whether Bigtable accepts the filter (an independent reading of
  the rules), for checking ``check_filter`` against it;
- ``model_filter(f, key, cells, draws)``: the row's final output (normal output plus
  sunk cells, sorted); ``draws`` holds one bool per RowSample node in pre-order;
- ``model_draws(f, rng)``: those bools for one row, drawn as the implementation does;
- ``model_read(f, rows, rng)``: the rows a filtered read returns (rows left with no
  cells are dropped), for comparing the embedded and gRPC read paths.
"""

from __future__ import annotations

import random
import re
from typing import Any

import re2

from widetable.bigtable import filters as F
from widetable.bigtable.types import Cell

_OPTS = re2.Options()
_OPTS.encoding = re2.Options.Encoding.LATIN1
_OPTS.log_errors = False


def sort_key(c: Cell) -> tuple:
    return (c.family, c.qualifier, -c.timestamp, c.labels, c.value)


def _full(pattern: bytes, subject: bytes) -> bool:
    return re2.compile(pattern, _OPTS).fullmatch(subject) is not None


# ---- validity ---------------------------------------------------------------------

def _compiles(pattern: bytes) -> bool:
    try:
        re2.compile(pattern, _OPTS)
        return True
    except re2.error:
        return False


def _labels_out(f: Any) -> bool:
    """Whether a label can reach f's output."""
    if isinstance(f, F.ApplyLabel):
        return True
    if isinstance(f, (F.Chain, F.Interleave)):
        return any(_labels_out(x) for x in f.filters)
    if isinstance(f, F.Condition):
        return _labels_out(f.true_filter) or _labels_out(f.false_filter)
    return False


def model_valid(f: Any, depth: int = 0, in_condition: bool = False) -> bool:
    if depth > 20:
        return False
    if isinstance(f, (F.Chain, F.Interleave)):
        subs = list(f.filters)
        if len(subs) < 2 or not all(model_valid(x, depth + 1, in_condition) for x in subs):
            return False
        return not (isinstance(f, F.Chain) and [_labels_out(x) for x in subs].count(True) > 1)
    if isinstance(f, F.Condition):
        pred = f.predicate if f.predicate is not None else F.PassAll()
        parts = [pred] + [x for x in (f.true_filter, f.false_filter) if x is not None]
        return all(model_valid(x, depth + 1, True) for x in parts)
    if isinstance(f, F.Sink):
        return not in_condition
    if isinstance(f, (F.RowKeyRegex, F.QualifierRegex, F.ValueRegex)):
        return isinstance(f.pattern, bytes) and _compiles(f.pattern)
    if isinstance(f, F.FamilyNameRegex):
        return isinstance(f.pattern, str) and ":" not in f.pattern and _compiles(
            f.pattern.encode())
    if isinstance(f, F.ColumnRange):
        return isinstance(f.family, str) and f.family != ""
    if isinstance(f, F.TimestampRange):
        ok_end = f.end is None or (f.end >= 0 and f.end % 1000 == 0)
        return f.start >= 0 and f.start % 1000 == 0 and ok_end
    if isinstance(f, F.ValueBitmask):
        return len(f.mask) > 0
    if isinstance(f, (F.CellsPerRowOffset, F.CellsPerRowLimit, F.CellsPerColumnLimit)):
        return f.n >= 0
    if isinstance(f, F.ApplyLabel):
        return re.fullmatch(r"[a-z0-9-]{1,15}", f.label) is not None
    if isinstance(f, F.RowSample):
        return 0 < f.probability < 1
    return isinstance(f, (F.ValueRange, F.StripValue, F.PassAll, F.BlockAll))


# ---- evaluation -------------------------------------------------------------------

def _samples(f: Any) -> list[float]:
    """RowSample probabilities in pre-order."""
    if f is None:
        return []
    if isinstance(f, F.RowSample):
        return [f.probability]
    if isinstance(f, (F.Chain, F.Interleave)):
        return [p for x in f.filters for p in _samples(x)]
    if isinstance(f, F.Condition):
        return _samples(f.predicate) + _samples(f.true_filter) + _samples(f.false_filter)
    return []


def model_draws(f: Any, rng: random.Random) -> list[bool]:
    return [rng.random() < p for p in _samples(f)]


def _in_range(x: bytes, start, end, start_incl: bool, end_incl: bool) -> bool:
    if start is not None and (x < start or (x == start and not start_incl)):
        return False
    return not (end is not None and (x > end or (x == end and not end_incl)))


def _keep(f: Any, key: bytes, c: Cell) -> bool | None:
    """Per-cell true filters: keep c? None when f is not one."""
    if isinstance(f, F.FamilyNameRegex):
        return _full(f.pattern.encode(), c.family.encode())
    if isinstance(f, F.QualifierRegex):
        return _full(f.pattern, c.qualifier)
    if isinstance(f, F.ValueRegex):
        return _full(f.pattern, c.value)
    if isinstance(f, F.ColumnRange):
        return c.family == f.family and _in_range(
            c.qualifier, f.start, f.end, f.start_inclusive, f.end_inclusive)
    if isinstance(f, F.ValueRange):
        return _in_range(c.value, f.start, f.end, f.start_inclusive, f.end_inclusive)
    if isinstance(f, F.TimestampRange):
        end = f.end if f.end else None
        return c.timestamp >= f.start and (end is None or c.timestamp < end)
    if isinstance(f, F.ValueBitmask):
        return len(c.value) == len(f.mask) and all(
            v & m == m for v, m in zip(c.value, f.mask))
    return None


def _eval(f: Any, key: bytes, row: list[Cell], draws: list[bool]) -> tuple[list, list]:
    """(output, sunk) of f on row; consumes draws from the front in pre-order."""
    if isinstance(f, F.RowSample):
        keep = draws.pop(0)
        return (list(row) if keep else []), []
    if isinstance(f, F.Chain):
        sunk: list[Cell] = []
        for x in f.filters:
            row, s = _eval(x, key, row, draws)
            sunk += s
        return row, sunk
    if isinstance(f, F.Interleave):
        out, sunk = [], []
        for x in f.filters:
            o, s = _eval(x, key, row, draws)
            out += o
            sunk += s
        return sorted(out, key=sort_key), sunk
    if isinstance(f, F.Condition):
        pred = f.predicate if f.predicate is not None else F.PassAll()
        matched, _ = _eval(pred, key, row, draws)
        # both branches' draws are made, whichever runs
        yes = _eval(f.true_filter, key, row, draws) if f.true_filter is not None else ([], [])
        no = _eval(f.false_filter, key, row, draws) if f.false_filter is not None else ([], [])
        return (yes if matched else no)[0], []
    if isinstance(f, F.Sink):
        return [], list(row)
    if isinstance(f, F.PassAll):
        return list(row), []
    if isinstance(f, F.BlockAll):
        return [], []
    if isinstance(f, F.RowKeyRegex):
        return (list(row) if _full(f.pattern, key) else []), []
    if isinstance(f, F.CellsPerRowOffset):
        return row[f.n:], []
    if isinstance(f, F.CellsPerRowLimit):
        return row[:f.n], []
    if isinstance(f, F.CellsPerColumnLimit):
        counts: dict[tuple, int] = {}
        out = []
        for c in row:
            counts[(c.family, c.qualifier)] = counts.get((c.family, c.qualifier), 0) + 1
            if counts[(c.family, c.qualifier)] <= f.n:
                out.append(c)
        return out, []
    if isinstance(f, F.StripValue):
        return [Cell(c.family, c.qualifier, c.timestamp, b"", c.labels) for c in row], []
    if isinstance(f, F.ApplyLabel):
        return [Cell(c.family, c.qualifier, c.timestamp, c.value, c.labels + (f.label,))
                for c in row], []
    return [c for c in row if _keep(f, key, c)], []


def model_filter(f: Any, key: bytes, cells: list[Cell], draws: list[bool]) -> list[Cell]:
    """The final output of f on one row (cells in row order)."""
    row = sorted(cells, key=sort_key)
    if f is None:
        return row
    draws = list(draws)
    out, sunk = _eval(f, key, row, draws)
    assert not draws, "every RowSample node draws once"
    return sorted(out + sunk, key=sort_key)


def model_read(f: Any, rows: list[tuple[bytes, list[Cell]]],
               rng: random.Random) -> list[tuple[bytes, list[Cell]]]:
    """A filtered read of ``rows`` (in key order): rows with no cells left are dropped."""
    out = []
    for key, cells in rows:
        got = model_filter(f, key, cells, model_draws(f, rng))
        if got:
            out.append((key, got))
    return out
