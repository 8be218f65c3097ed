"""Garbage-collection rules of a column family, as Bigtable's ``GcRule`` defines them.

A rule is one of four frozen values, nested freely; ``None`` means keep everything.

- ``MaxVersions(n)``: in each column, delete every cell after the ``n`` newest.
- ``MaxAge(micros)``: delete every cell whose timestamp is older than ``now - micros``.
- ``Union(rules)``: delete a cell if ANY sub-rule deletes it.
- ``Intersection(rules)``: delete a cell only if ALL sub-rules delete it.

Rules are evaluated per cell against ONE column (family + qualifier) at a time: a
``MaxVersions`` inside an ``Intersection`` counts the cell's position among all the
column's versions, not among the cells the sibling rules selected. Reads hide what
:func:`gc_expired` marks; the background purge deletes it, so both agree by construction.

The catalog stores a rule as JSON through :func:`gc_to_dict` / :func:`gc_from_dict`::

    {"max_versions": 3} | {"max_age_micros": 86400000000}
    | {"union": [rule, ...]} | {"intersection": [rule, ...]}

DO NOT CHANGE the dict keys: they are embedded in on-disk catalog data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from widetable.errors import ParameterInvalid

MAX_DEPTH = 20  # nesting of unions/intersections; deeper rules are refused


@dataclass(frozen=True, slots=True)
class MaxVersions:
    """Keep at most the ``n`` newest cells of each column (``n >= 1``)."""

    n: int


@dataclass(frozen=True, slots=True)
class MaxAge:
    """Delete cells older than ``micros`` microseconds (>= 1 ms, a whole number of ms)."""

    micros: int


@dataclass(frozen=True, slots=True)
class Union:
    """Delete a cell if any of ``rules`` deletes it (at least one rule)."""

    rules: tuple

    def __post_init__(self) -> None:
        if isinstance(self.rules, list):
            object.__setattr__(self, "rules", tuple(self.rules))


@dataclass(frozen=True, slots=True)
class Intersection:
    """Delete a cell only if every one of ``rules`` deletes it (at least one rule)."""

    rules: tuple

    def __post_init__(self) -> None:
        if isinstance(self.rules, list):
            object.__setattr__(self, "rules", tuple(self.rules))


GcRule = MaxVersions | MaxAge | Union | Intersection


def check_gc(rule: GcRule | None, _depth: int = 0) -> None:
    """Validate ``rule`` (``None`` is valid: keep everything).

    Raises ParameterInvalid naming the bad value: ``MaxVersions.n`` below 1, a
    ``MaxAge`` under one millisecond or not a whole number of milliseconds (Bigtable's
    minimum age is 1 ms and our timestamps are ms-granular), an empty union or
    intersection, nesting deeper than 20, or something that is not a rule.
    """
    if rule is None:
        return
    if _depth > MAX_DEPTH:
        raise ParameterInvalid(f"GC rule nested deeper than {MAX_DEPTH}")
    if isinstance(rule, MaxVersions):
        if not _is_int(rule.n) or rule.n < 1:
            raise ParameterInvalid(f"GC rule max_versions must be an integer >= 1, got {rule.n!r}")
    elif isinstance(rule, MaxAge):
        if not _is_int(rule.micros) or rule.micros < 1000 or rule.micros % 1000:
            raise ParameterInvalid(
                "GC rule max_age must be a whole number of milliseconds >= 1 ms, "
                f"got {rule.micros!r} micros")
    elif isinstance(rule, (Union, Intersection)):
        kind = "union" if isinstance(rule, Union) else "intersection"
        if not isinstance(rule.rules, tuple) or not rule.rules:
            raise ParameterInvalid(
                f"GC rule {kind} must hold at least one rule, got {rule.rules!r}")
        for sub in rule.rules:
            if sub is None:
                raise ParameterInvalid(f"GC rule {kind} holds an empty rule (None)")
            check_gc(sub, _depth + 1)
    else:
        raise ParameterInvalid(f"not a GC rule: {rule!r}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def gc_expired(rule: GcRule | None, versions: list[int], now_micros: int) -> list[bool]:
    """Which cells of ONE column ``rule`` deletes.

    ``versions`` are the column's cell timestamps (micros), newest first; the answer
    has one flag per version, True = expired (hidden by reads, purged in the
    background). ``None`` deletes nothing. The rule is assumed valid (:func:`check_gc`).
    """
    if rule is None or not versions:
        return [False] * len(versions)
    return _expired(rule, versions, now_micros)


def _expired(rule: GcRule, versions: list[int], now: int) -> list[bool]:
    if isinstance(rule, MaxVersions):
        n = rule.n
        return [i >= n for i in range(len(versions))]
    if isinstance(rule, MaxAge):
        cutoff = now - rule.micros
        return [ts < cutoff for ts in versions]
    parts = [_expired(sub, versions, now) for sub in rule.rules]
    combine = any if isinstance(rule, Union) else all
    return [combine(flags) for flags in zip(*parts)]


def gc_to_dict(rule: GcRule | None) -> dict[str, Any] | None:
    """The catalog's JSON form of ``rule`` (``None`` stays ``None``)."""
    if rule is None:
        return None
    if isinstance(rule, MaxVersions):
        return {"max_versions": rule.n}
    if isinstance(rule, MaxAge):
        return {"max_age_micros": rule.micros}
    if isinstance(rule, Union):
        return {"union": [gc_to_dict(r) for r in rule.rules]}
    if isinstance(rule, Intersection):
        return {"intersection": [gc_to_dict(r) for r in rule.rules]}
    raise ParameterInvalid(f"not a GC rule: {rule!r}")


def gc_from_dict(d: dict[str, Any] | None) -> GcRule | None:
    """Parse :func:`gc_to_dict`'s form back into a rule and validate it.

    Raises ParameterInvalid naming the value when ``d`` is not one of the four forms
    or the rule it describes is invalid.
    """
    rule = _from_dict(d, 0)
    check_gc(rule)
    return rule


def _from_dict(d: Any, depth: int) -> GcRule | None:
    if d is None:
        return None
    if depth > MAX_DEPTH:
        raise ParameterInvalid(f"GC rule nested deeper than {MAX_DEPTH}")
    if not isinstance(d, dict) or len(d) != 1:
        raise ParameterInvalid(f"not a GC rule: {d!r}")
    (key, value), = d.items()
    if key == "max_versions":
        return MaxVersions(value)
    if key == "max_age_micros":
        return MaxAge(value)
    if key in ("union", "intersection") and isinstance(value, list):
        subs = tuple(_from_dict(v, depth + 1) for v in value)
        return Union(subs) if key == "union" else Intersection(subs)
    raise ParameterInvalid(f"not a GC rule: {d!r}")


def describe_gc(rule: GcRule | None) -> str:
    """A one-line human form, as ``cbt`` prints policies: ``maxversions=2 || maxage=1d``."""
    if rule is None:
        return "(keep all)"
    if isinstance(rule, MaxVersions):
        return f"maxversions={rule.n}"
    if isinstance(rule, MaxAge):
        return f"maxage={_age_text(rule.micros)}"
    op = " || " if isinstance(rule, Union) else " && "
    inner = [describe_gc(r) for r in rule.rules]
    return "(" + op.join(inner) + ")" if len(inner) > 1 else inner[0]


def _age_text(micros: int) -> str:
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000),
                       ("s", 1_000_000), ("ms", 1000)):
        if micros % size == 0:
            return f"{micros // size}{unit}"
    return f"{micros}us"
