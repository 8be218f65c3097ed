"""Bigtable's RowFilters: one frozen value per kind, validated, compiled once per read.

A filter takes a row (its key and its cells in ROW ORDER: family ascending, qualifier
ascending, timestamp descending) and produces an alternate view of it. ``compile_filter``
turns a filter into a function that is called once per row of a read;
``filter_families`` tells the read which families it may skip.

Semantics (Bigtable's v2 ``RowFilter``; where Bigtable leaves a choice open, ours):

- Regexes (row key, family, qualifier, value) are RE2 in raw byte mode (Latin-1), so
  ``\\C`` matches any byte and invalid UTF-8 is just bytes; ``.`` does not match
  ``\\n``. They must match the WHOLE key / name / qualifier / value. A family regex
  may not contain ``:``.
- ``Chain`` runs its filters in sequence; ``Interleave`` runs each on a copy of its
  input and pools the results. Both need at least two filters, and filters nest at
  most 20 deep.
- Duplicates are kept: an Interleave whose branches both pass a cell outputs it twice,
  and limits and offsets count each copy. Output is always in row order; copies of one
  (family, qualifier, timestamp) - the order Bigtable leaves unspecified - are ordered
  by their labels, then their values, so every result is a deterministic function of
  the input.
- ``Condition`` evaluates ``predicate`` on its input; if it outputs any cell,
  ``true_filter`` is applied to the same input, else ``false_filter``; a missing
  branch outputs nothing, a missing predicate is PassAll (an empty proto filter).
  The predicate's own output, labels included, is never returned.
- ``Sink`` sends its input to the read's final output and passes nothing to its
  parent; the final output is the filter's output plus every sunk cell, in row order
  (so a cell can appear twice, with and without a label). Sink may not appear
  anywhere inside a Condition.
- ``ApplyLabel`` adds a label (1..15 chars of ``[a-z0-9-]``) to every cell. A cell
  carries at most one label: a Chain may have only one sub-filter that contains an
  ApplyLabel (a Condition's predicate does not count, its labels are never output);
  Interleave branches may each label their own copies.
- ``CellsPerRowOffset(n)`` skips the first n cells, ``CellsPerRowLimit(n)`` keeps
  the first n, ``CellsPerColumnLimit(n)`` keeps the first n of each (family,
  qualifier) column - in row order, the n newest.
- ``StripValue`` keeps each cell with an empty value. ``ColumnRange`` and
  ``ValueRange`` bounds are bytes compared lexicographically (None = unbounded;
  inclusive start, exclusive end by default). ``TimestampRange`` is ``[start, end)``
  micros with millisecond precision, ``end`` None (or 0, the proto's unset) = no bound.
  ``ValueBitmask(mask)`` keeps cells whose value has the mask's length and
  ``value & mask == mask``.
- ``RowSample(p)``, ``0 < p < 1``, passes all of its input with probability p.
  Every RowSample node draws exactly one number per row, in pre-order of the filter
  tree (node, then its children in order; a Condition's predicate, true, false) and
  whether or not the row reaches it, so a seeded RNG makes reads reproducible.

Errors: :func:`check_filter` (called by :func:`compile_filter`) raises
ParameterInvalid naming the offending value.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from widetable.bigtable.types import Cell
from widetable.errors import ParameterInvalid

MAX_DEPTH = 20
MAX_LABEL = 15
_LABEL = re.compile(r"[a-z0-9\-]{1,15}")
_META = frozenset(b"\\.+*?()|[]{}^$")
_CACHE_LIMIT = 2048   # per compiled matcher: distinct subjects whose answer is remembered


def _tuple_field(obj: Any) -> None:
    if isinstance(obj.filters, list):
        object.__setattr__(obj, "filters", tuple(obj.filters))


@dataclass(frozen=True, slots=True)
class Chain:
    """Apply ``filters`` in sequence, each to the previous one's output."""
    filters: tuple = ()

    def __post_init__(self) -> None:
        _tuple_field(self)


@dataclass(frozen=True, slots=True)
class Interleave:
    """Apply each of ``filters`` to the input and pool the outputs (duplicates kept)."""
    filters: tuple = ()

    def __post_init__(self) -> None:
        _tuple_field(self)


@dataclass(frozen=True, slots=True)
class Condition:
    """``true_filter`` if ``predicate`` outputs any cell, else ``false_filter``."""
    predicate: Any = None
    true_filter: Any = None
    false_filter: Any = None


@dataclass(frozen=True, slots=True)
class RowKeyRegex:
    """The whole row when its key fully matches ``pattern``, else nothing."""
    pattern: bytes


@dataclass(frozen=True, slots=True)
class FamilyNameRegex:
    """Cells whose family name fully matches ``pattern`` (no ``:`` allowed)."""
    pattern: str


@dataclass(frozen=True, slots=True)
class QualifierRegex:
    """Cells whose qualifier fully matches ``pattern``."""
    pattern: bytes


@dataclass(frozen=True, slots=True)
class ValueRegex:
    """Cells whose value fully matches ``pattern``."""
    pattern: bytes


@dataclass(frozen=True, slots=True)
class ColumnRange:
    """Cells of ``family`` whose qualifier is within the bounds (None = unbounded)."""
    family: str
    start: bytes | None = None
    end: bytes | None = None
    start_inclusive: bool = True
    end_inclusive: bool = False


@dataclass(frozen=True, slots=True)
class ValueRange:
    """Cells whose value is within the bounds (None = unbounded)."""
    start: bytes | None = None
    end: bytes | None = None
    start_inclusive: bool = True
    end_inclusive: bool = False


@dataclass(frozen=True, slots=True)
class TimestampRange:
    """Cells with ``start <= timestamp < end`` micros (end None or 0 = unbounded)."""
    start: int = 0
    end: int | None = None


@dataclass(frozen=True, slots=True)
class ValueBitmask:
    """Cells whose value is as long as ``mask`` and has every bit of it set."""
    mask: bytes


@dataclass(frozen=True, slots=True)
class CellsPerRowOffset:
    """Skip the first ``n`` cells of the row."""
    n: int


@dataclass(frozen=True, slots=True)
class CellsPerRowLimit:
    """Keep only the first ``n`` cells of the row."""
    n: int


@dataclass(frozen=True, slots=True)
class CellsPerColumnLimit:
    """Keep only the first (newest) ``n`` cells of each column."""
    n: int


@dataclass(frozen=True, slots=True)
class StripValue:
    """Keep every cell, with an empty value."""


@dataclass(frozen=True, slots=True)
class ApplyLabel:
    """Add ``label`` to every cell."""
    label: str


@dataclass(frozen=True, slots=True)
class Sink:
    """Send the input to the final output; pass nothing on."""


@dataclass(frozen=True, slots=True)
class PassAll:
    """Every cell."""


@dataclass(frozen=True, slots=True)
class BlockAll:
    """No cell."""


@dataclass(frozen=True, slots=True)
class RowSample:
    """All of the input with probability ``probability``, else nothing."""
    probability: float


RowFilter = Any  # one of the classes above
_LEAVES = (RowKeyRegex, FamilyNameRegex, QualifierRegex, ValueRegex, ColumnRange, ValueRange,
           TimestampRange, ValueBitmask, CellsPerRowOffset, CellsPerRowLimit,
           CellsPerColumnLimit, StripValue, ApplyLabel, Sink, PassAll, BlockAll, RowSample)


# ---- validation -------------------------------------------------------------------


def check_filter(f: RowFilter) -> None:
    """Validate ``f``; raise ParameterInvalid naming the offending value."""
    _check(f, 0, False)


def _check(f: RowFilter, depth: int, in_condition: bool) -> None:
    if depth > MAX_DEPTH:
        raise ParameterInvalid(f"filter nested deeper than {MAX_DEPTH} levels")
    if isinstance(f, (Chain, Interleave)):
        kind = type(f).__name__
        if not isinstance(f.filters, tuple) or len(f.filters) < 2:
            raise ParameterInvalid(
                f"{kind} must contain at least two filters, got {f.filters!r:.200}")
        for sub in f.filters:
            _check(sub, depth + 1, in_condition)
        if isinstance(f, Chain) and sum(_outputs_label(sub) for sub in f.filters) > 1:
            raise ParameterInvalid(
                f"a Chain may have only one sub-filter with ApplyLabel (a cell carries at most "
                f"one label), got {f!r:.300}")
    elif isinstance(f, Condition):
        _check(PassAll() if f.predicate is None else f.predicate, depth + 1, True)
        for sub in (f.true_filter, f.false_filter):
            if sub is not None:
                _check(sub, depth + 1, True)
    elif isinstance(f, Sink):
        if in_condition:
            raise ParameterInvalid("Sink cannot be used within a Condition filter")
    elif isinstance(f, _LEAVES):
        _check_leaf(f)
    else:
        raise ParameterInvalid(f"not a row filter: {f!r:.200}")


def _check_leaf(f: RowFilter) -> None:
    if isinstance(f, (RowKeyRegex, QualifierRegex, ValueRegex)):
        if not isinstance(f.pattern, bytes):
            raise ParameterInvalid(
                f"{type(f).__name__} pattern must be bytes, got {f.pattern!r:.200}")
        _regex(f.pattern, type(f).__name__)
    elif isinstance(f, FamilyNameRegex):
        if not isinstance(f.pattern, str):
            raise ParameterInvalid(f"FamilyNameRegex pattern must be str, got {f.pattern!r:.200}")
        if ":" in f.pattern:
            raise ParameterInvalid(
                f"FamilyNameRegex pattern {f.pattern!r:.200} must not contain ':'")
        _regex(f.pattern.encode("utf-8"), "FamilyNameRegex")
    elif isinstance(f, ColumnRange):
        if not isinstance(f.family, str) or not f.family:
            raise ParameterInvalid(f"ColumnRange needs a family name, got {f.family!r:.100}")
        _check_bounds(f, "ColumnRange qualifier")
    elif isinstance(f, ValueRange):
        _check_bounds(f, "ValueRange value")
    elif isinstance(f, TimestampRange):
        for name, ts in (("start", f.start), ("end", f.end)):
            if name == "end" and ts is None:
                continue
            if not _is_int(ts) or ts < 0 or ts % 1000:
                raise ParameterInvalid(
                    f"TimestampRange {name} {ts!r} must be a non-negative whole number of "
                    "milliseconds in micros (the filter's maximum precision is a millisecond)")
    elif isinstance(f, ValueBitmask):
        if not isinstance(f.mask, bytes) or not f.mask:
            raise ParameterInvalid(
                f"ValueBitmask needs a non-empty bytes mask, got {f.mask!r:.100}")
    elif isinstance(f, (CellsPerRowOffset, CellsPerRowLimit, CellsPerColumnLimit)):
        if not _is_int(f.n) or f.n < 0:
            raise ParameterInvalid(
                f"{type(f).__name__} must be a non-negative integer, got {f.n!r}")
    elif isinstance(f, ApplyLabel):
        if not isinstance(f.label, str) or not _LABEL.fullmatch(f.label):
            raise ParameterInvalid(
                f"ApplyLabel label {f.label!r:.100} must be 1..{MAX_LABEL} characters of [a-z0-9-]")
    elif isinstance(f, RowSample):
        p = f.probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p < 1.0:
            raise ParameterInvalid(f"RowSample probability {p!r} must be between 0.0 and 1.0 "
                                   "(exclusive)")


def _check_bounds(f: ColumnRange | ValueRange, what: str) -> None:
    for name, b in (("start", f.start), ("end", f.end)):
        if b is not None and not isinstance(b, bytes):
            raise ParameterInvalid(f"{what} {name} must be bytes or None, got {b!r:.100}")
    if not isinstance(f.start_inclusive, bool) or not isinstance(f.end_inclusive, bool):
        raise ParameterInvalid(f"{what} start_inclusive/end_inclusive must be bools")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _outputs_label(f: RowFilter) -> bool:
    """Whether ``f`` can label the cells it outputs (a Condition's predicate cannot)."""
    if isinstance(f, ApplyLabel):
        return True
    if isinstance(f, (Chain, Interleave)):
        return any(_outputs_label(sub) for sub in f.filters)
    if isinstance(f, Condition):
        return any(_outputs_label(sub) for sub in (f.true_filter, f.false_filter)
                   if sub is not None)
    return False


_OPTIONS = re2.Options()
_OPTIONS.encoding = re2.Options.Encoding.LATIN1
_OPTIONS.log_errors = False


def _regex(pattern: bytes, kind: str) -> Any:
    try:
        return _re2_compile(pattern)
    except re2.error as e:
        raise ParameterInvalid(f"{kind} pattern {pattern!r:.200} is not a valid RE2 regex: "
                               f"{e}") from None


@functools.lru_cache(maxsize=256)
def _re2_compile(pattern: bytes) -> Any:
    return re2.compile(pattern, _OPTIONS)


# ---- compilation ------------------------------------------------------------------

Run = Callable[[bytes, list, "_Ctx | None"], list]


class _Ctx:
    __slots__ = ("sample", "sunk")

    def __init__(self, sample: list[bool]) -> None:
        self.sunk: list[Cell] = []
        self.sample = sample


def _canon(c: Cell) -> tuple:
    return (c.family, c.qualifier, -c.timestamp, c.labels, c.value)


def compile_filter(f: RowFilter | None,
                   rng: random.Random | None = None) -> Callable[[bytes, list[Cell]], list[Cell]]:
    """Validate ``f`` and compile it into ``fn(row_key, cells) -> cells``.

    ``cells`` are the row's cells in row order (a list or tuple); the answer is the
    output cells in row order as a list (possibly the input list itself, never
    mutated). ``None`` compiles to pass-all. RowSample draws from ``rng`` (default: the
    ``random`` module). The compiled function is safe to share between threads.

    Without ``rng`` the result is remembered (up to 128 filters, keyed by ``repr``,
    which tells ``True`` from ``1`` where equality does not), so a point read that
    passes the same filter every time compiles it once, regex answers included.
    """
    if f is None:
        return _pass_all
    if rng is not None:
        return _build(f, rng)
    key = repr(f)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _build(f, None)
        if len(_COMPILED) >= _COMPILED_LIMIT:
            _COMPILED.clear()
        _COMPILED[key] = fn
    return fn


_COMPILED: dict[str, Callable[[bytes, list[Cell]], list[Cell]]] = {}
_COMPILED_LIMIT = 128


def _pass_all(key: bytes, cells: list[Cell]) -> list[Cell]:
    return cells if isinstance(cells, list) else list(cells)


def _build(f: RowFilter, rng: random.Random | None) -> Callable[[bytes, list[Cell]], list[Cell]]:
    check_filter(f)
    samples: list[float] = []
    root = _compile(f, samples)
    has_sink = _has_sink(f)
    draw = (rng or random).random
    if not samples and not has_sink:
        run = root.run

        def apply(key: bytes, cells: list[Cell]) -> list[Cell]:
            return run(key, cells if isinstance(cells, list) else list(cells), None)
        return apply
    probabilities = tuple(samples)

    def apply_ctx(key: bytes, cells: list[Cell]) -> list[Cell]:
        ctx = _Ctx([draw() < p for p in probabilities])
        out = root.run(key, cells if isinstance(cells, list) else list(cells), ctx)
        if ctx.sunk:
            out = sorted(out + ctx.sunk, key=_canon)
        return out
    return apply_ctx


def apply_filter(f: RowFilter | None, key: bytes, cells: list[Cell],
                 rng: random.Random | None = None) -> list[Cell]:
    """``compile_filter(f, rng)(key, cells)``: for one-off use; reads compile once."""
    return compile_filter(f, rng)(key, cells)


def _has_sink(f: RowFilter) -> bool:
    if isinstance(f, Sink):
        return True
    if isinstance(f, (Chain, Interleave)):
        return any(_has_sink(sub) for sub in f.filters)
    return False  # never inside a Condition


class _Node:
    """A compiled filter: ``run`` always; ``pred`` when it is a per-cell true filter
    (so a Chain fuses consecutive ones into one pass)."""
    __slots__ = ("pred", "run")

    def __init__(self, run: Run, pred: Callable[[Cell], bool] | None = None) -> None:
        self.run = run
        self.pred = pred


def _pred_node(pred: Callable[[Cell], bool]) -> _Node:
    return _Node(lambda key, cells, ctx: [c for c in cells if pred(c)], pred)


def _compile(f: RowFilter, samples: list[float]) -> _Node:
    """Compile ``f``; RowSample nodes append their probability to ``samples`` in pre-order."""
    if isinstance(f, Chain):
        return _compile_chain([_compile(sub, samples) for sub in f.filters])
    if isinstance(f, Interleave):
        return _compile_interleave([_compile(sub, samples) for sub in f.filters])
    if isinstance(f, Condition):
        pred = _compile(PassAll() if f.predicate is None else f.predicate, samples)
        yes = _compile(f.true_filter, samples) if f.true_filter is not None else None
        no = _compile(f.false_filter, samples) if f.false_filter is not None else None
        return _compile_condition(pred, yes, no)
    if isinstance(f, RowSample):
        index = len(samples)
        samples.append(float(f.probability))
        return _Node(lambda key, cells, ctx: cells if ctx.sample[index] else [])
    return _compile_leaf(f)


def _compile_chain(steps: list[_Node]) -> _Node:
    fused: list[_Node] = []
    for step in steps:      # consecutive per-cell filters become one pass over the cells
        if step.pred is not None and fused and fused[-1].pred is not None:
            fused[-1] = _pred_node(_both(fused[-1].pred, step.pred))
        else:
            fused.append(step)
    if len(fused) == 1:
        return fused[0]
    runs = tuple(s.run for s in fused)

    def run(key: bytes, cells: list, ctx: _Ctx | None) -> list:
        for step in runs:
            if not cells:     # every filter maps an empty row to an empty row
                return cells
            cells = step(key, cells, ctx)
        return cells
    return _Node(run)


def _both(p: Callable[[Cell], bool], q: Callable[[Cell], bool]) -> Callable[[Cell], bool]:
    return lambda c: p(c) and q(c)


def _compile_interleave(branches: list[_Node]) -> _Node:
    runs = tuple(b.run for b in branches)

    def run(key: bytes, cells: list, ctx: _Ctx | None) -> list:
        outs = [out for out in (r(key, cells, ctx) for r in runs) if out]
        if len(outs) <= 1:
            return outs[0] if outs else []
        merged = [c for out in outs for c in out]
        merged.sort(key=_canon)   # each branch is in row order: a merge of sorted runs
        return merged
    return _Node(run)


def _compile_condition(pred: _Node, yes: _Node | None, no: _Node | None) -> _Node:
    test = pred.pred
    pred_run = pred.run
    yes_run = yes.run if yes is not None else None
    no_run = no.run if no is not None else None

    def run(key: bytes, cells: list, ctx: _Ctx | None) -> list:
        if test is not None:
            matched = any(test(c) for c in cells)
        else:
            matched = bool(pred_run(key, cells, ctx))
        branch = yes_run if matched else no_run
        return branch(key, cells, ctx) if branch is not None else []
    return _Node(run)


def _compile_leaf(f: RowFilter) -> _Node:
    if isinstance(f, PassAll):
        return _Node(lambda key, cells, ctx: cells, lambda c: True)
    if isinstance(f, BlockAll):
        return _Node(lambda key, cells, ctx: [], lambda c: False)
    if isinstance(f, Sink):
        def sink(key: bytes, cells: list, ctx: _Ctx | None) -> list:
            ctx.sunk.extend(cells)  # type: ignore[union-attr]
            return []
        return _Node(sink)
    if isinstance(f, RowKeyRegex):
        match = _matcher(f.pattern, cache=0)
        return _Node(lambda key, cells, ctx: cells if match(key) else [])
    if isinstance(f, FamilyNameRegex):
        fmatch = _matcher(f.pattern.encode("utf-8"), cache=0)
        known: dict[str, bool] = {}

        def family_ok(c: Cell) -> bool:
            ok = known.get(c.family)
            if ok is None:
                ok = fmatch(c.family.encode("utf-8"))
                if len(known) < _CACHE_LIMIT:
                    known[c.family] = ok
            return ok
        return _pred_node(family_ok)
    if isinstance(f, QualifierRegex):
        qmatch = _matcher(f.pattern, cache=256)
        return _pred_node(lambda c: qmatch(c.qualifier))
    if isinstance(f, ValueRegex):
        vmatch = _matcher(f.pattern, cache=64)
        return _pred_node(lambda c: vmatch(c.value))
    if isinstance(f, ColumnRange):
        family = f.family
        within = _bounds(f.start, f.end, f.start_inclusive, f.end_inclusive)
        return _pred_node(lambda c: c.family == family and within(c.qualifier))
    if isinstance(f, ValueRange):
        vwithin = _bounds(f.start, f.end, f.start_inclusive, f.end_inclusive)
        return _pred_node(lambda c: vwithin(c.value))
    if isinstance(f, TimestampRange):
        start, end = f.start, f.end
        if not end:
            return _pred_node(lambda c: c.timestamp >= start)
        return _pred_node(lambda c: start <= c.timestamp < end)
    if isinstance(f, ValueBitmask):
        mask, size = int.from_bytes(f.mask, "big"), len(f.mask)
        return _pred_node(lambda c: len(c.value) == size
                          and int.from_bytes(c.value, "big") & mask == mask)
    return _compile_counting(f)


def _compile_counting(f: RowFilter) -> _Node:
    if isinstance(f, CellsPerRowOffset):
        n = f.n
        return _Node(lambda key, cells, ctx: cells[n:] if n else cells)
    if isinstance(f, CellsPerRowLimit):
        m = f.n
        return _Node(lambda key, cells, ctx: cells[:m] if len(cells) > m else cells)
    if isinstance(f, CellsPerColumnLimit):
        return _Node(_per_column(f.n))
    if isinstance(f, StripValue):
        return _Node(lambda key, cells, ctx: [
            c if not c.value else Cell(c.family, c.qualifier, c.timestamp, b"", c.labels)
            for c in cells])
    if isinstance(f, ApplyLabel):
        label = (f.label,)
        return _Node(lambda key, cells, ctx: [
            Cell(c.family, c.qualifier, c.timestamp, c.value, c.labels + label) for c in cells])
    raise ParameterInvalid(f"not a row filter: {f!r:.200}")


def _per_column(n: int) -> Run:
    def run(key: bytes, cells: list, ctx: _Ctx | None) -> list:
        out = []
        family: str | None = None
        qualifier: bytes | None = None
        seen = 0
        for c in cells:     # row order keeps each column's cells together
            if c.qualifier != qualifier or c.family != family:
                family, qualifier, seen = c.family, c.qualifier, 0
            if seen < n:
                out.append(c)
            seen += 1
        return out
    return run


def _bounds(start: bytes | None, end: bytes | None, start_incl: bool,
            end_incl: bool) -> Callable[[bytes], bool]:
    """``x`` within the bounds, as a comparison chain specialised once."""
    if start is None or (start == b"" and start_incl):
        if end is None:
            return lambda x: True
        return (lambda x: x <= end) if end_incl else (lambda x: x < end)
    if end is None:
        return (lambda x: x >= start) if start_incl else (lambda x: x > start)
    if start_incl:
        return (lambda x: start <= x <= end) if end_incl else (lambda x: start <= x < end)
    return (lambda x: start < x <= end) if end_incl else (lambda x: start < x < end)


def _matcher(pattern: bytes, cache: int) -> Callable[[bytes], bool]:
    """A full-match test for ``pattern``: plain comparisons for a literal, ``lit\\C*`` and
    ``lit.*``; otherwise RE2, remembering up to 2048 answers for subjects of at most
    ``cache`` bytes (qualifiers and family names repeat from row to row, short values
    often do, keys never)."""
    literal, tail = _literal_prefix(pattern)
    if tail == b"":
        return lambda s: s == literal
    if tail == b"\\C*":
        return lambda s: s.startswith(literal)
    if tail == b".*":
        size = len(literal)
        return lambda s: s.startswith(literal) and s.find(b"\n", size) < 0
    full = _full_match(_regex(pattern, "regex"))
    if not cache:
        return full
    known: dict[bytes, bool] = {}

    def match(s: bytes) -> bool:
        ok = known.get(s)
        if ok is None:
            ok = full(s)
            if len(known) < _CACHE_LIMIT and len(s) <= cache:
                known[s] = ok
        return ok
    return match


def _full_match(rx: Any) -> Callable[[bytes], bool]:
    """``rx`` fully matches ``s``? google-re2's ``fullmatch`` builds a match object through
    a generator (about 3 us a call); its native ``RE2.Match`` with ANCHOR_BOTH answers the
    same question in a fifth of the time. That object is not public API, so it is probed
    once and ``fullmatch`` is the fallback."""
    try:
        native, anchor = rx._regexp, re2._Anchor.ANCHOR_BOTH
        probe = native.Match(anchor, b"", 0, 0)[0]
        if probe != (-1, -1) and probe != (0, 0):
            raise TypeError(probe)
    except Exception:  # noqa: BLE001 - any change in the private API: use the public one
        fullmatch = rx.fullmatch
        return lambda s: fullmatch(s) is not None
    no_match = (-1, -1)
    return lambda s: native.Match(anchor, s, 0, len(s))[0] != no_match


def _literal_prefix(pattern: bytes) -> tuple[bytes, bytes]:
    """(the longest prefix free of RE2 metacharacters, the rest)."""
    for i, b in enumerate(pattern):
        if b in _META:
            return pattern[:i], pattern[i:]
    return pattern, b""


# ---- families a read needs --------------------------------------------------------

_Fams = frozenset | None   # None = every family
_LITERAL_FAMILIES = re.compile(r"[-_a-zA-Z0-9]+(\|[-_a-zA-Z0-9]+)*")


def filter_families(f: RowFilter | None) -> set[str] | None:
    """The families whose cells can affect ``f``'s output, or None for any.

    A read may skip every other family's storage: for every row,
    ``apply_filter(f, key, cells)`` equals ``apply_filter(f, key, [c for c in cells
    if c.family in filter_families(f)])``. It contains every family ``f`` can output,
    and also those that only steer it (a Condition's predicate); a per-row count
    (CellsPerRowLimit/Offset) before the families are narrowed needs every family.
    """
    if f is None:
        return None
    need = _analyze(f)[3]
    return None if need is None else set(need)


def _inter(a: _Fams, b: _Fams) -> _Fams:
    if a is None:
        return b
    return a if b is None else a & b


def _union(a: _Fams, b: _Fams) -> _Fams:
    return None if a is None or b is None else a | b


_NONE: frozenset = frozenset()


def _analyze(f: RowFilter) -> tuple[_Fams, _Fams, bool, _Fams]:
    """(families of the normal output, families it may sink, whether it commutes with
    restricting the input to a set of families, the families it needs)."""
    if isinstance(f, Chain):
        normal, sunk, comm, need = _analyze(f.filters[0])
        for sub in f.filters[1:]:
            n2, s2, c2, need2 = _analyze(sub)
            need = _union(_inter(need2, normal), sunk) if comm else need
            sunk = _union(sunk, _inter(s2, normal))
            normal = _inter(normal, n2)
            comm = comm and c2
        return normal, sunk, comm, need
    if isinstance(f, Interleave):
        parts = [_analyze(sub) for sub in f.filters]
        normal, sunk, need = _NONE, _NONE, _NONE
        for n2, s2, _c, need2 in parts:
            normal, sunk, need = _union(normal, n2), _union(sunk, s2), _union(need, need2)
        return normal, sunk, all(p[2] for p in parts), need
    if isinstance(f, Condition):
        pred = _analyze(PassAll() if f.predicate is None else f.predicate)
        normal, need = _NONE, pred[3]
        for sub in (f.true_filter, f.false_filter):
            if sub is not None:
                part = _analyze(sub)
                normal, need = _union(normal, part[0]), _union(need, part[3])
        return normal, _NONE, False, need
    if isinstance(f, BlockAll):
        return _NONE, _NONE, True, _NONE
    if isinstance(f, Sink):
        return _NONE, None, True, None
    if isinstance(f, (CellsPerRowLimit, CellsPerRowOffset)):
        return None, _NONE, False, None
    if isinstance(f, ColumnRange):
        only = frozenset((f.family,))
        return only, _NONE, True, only
    if isinstance(f, FamilyNameRegex) and _LITERAL_FAMILIES.fullmatch(f.pattern):
        names = frozenset(f.pattern.split("|"))
        return names, _NONE, True, names
    return None, _NONE, True, None
