"""Turning stored rows into results: TTL visibility, time ranges, versions, projection, filters."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ParameterInvalid, describe
from .filters import ColumnPagination, Filter
from .row import Row
from .rowcodec import decode_versions
from .schema import check_name
from .values import MAX_TIMESTAMP

Reader = Callable[[list], "Row | None"]


def plain_row(row: list) -> Row:
    """The newest version of every column, with no options to apply."""
    return Row(row[1], row[2], row[3])


def check_time_range(time_range: object) -> tuple[int, int] | None:
    """``(start_ms, end_ms)`` half-open, or one timestamp (>= 0) meaning exactly that version."""
    if time_range is None:
        return None
    if type(time_range) is int and 0 <= time_range < MAX_TIMESTAMP:
        return (time_range, time_range + 1)
    if (
        isinstance(time_range, (tuple, list))
        and len(time_range) == 2
        and all(type(t) is int and t >= 0 for t in time_range)
        and time_range[0] < time_range[1]
    ):
        return (time_range[0], time_range[1])
    raise ParameterInvalid(
        f"time_range must be (start_ms, end_ms) with 0 <= start < end, or one timestamp; got "
        f"{describe(time_range)}"
    )


def check_columns(columns: object) -> frozenset[str] | None:
    if columns is None:
        return None
    if isinstance(columns, (list, tuple, set, frozenset)) and not columns:
        return None  # as in Tablestore, no columns to get means every column
    if isinstance(columns, str) or not isinstance(columns, (list, tuple, set, frozenset)):
        raise ParameterInvalid(f"columns must be a list of column names, got {describe(columns)}")
    return frozenset(check_name(c, "column name") for c in columns)


def check_max_versions(max_versions: object) -> int:
    if max_versions is None:
        return 1
    if type(max_versions) is not int or max_versions < 1:
        raise ParameterInvalid(f"max_versions must be an integer >= 1, got {describe(max_versions)}")
    return max_versions


def visible_versions(
    row: list, cutoff_ms: int | None, max_versions: int | None = None
) -> dict[str, list]:
    """The versions a reader may see, newest first.

    Versions expired by TTL, and those past the table's ``max_versions`` (which
    linger after the option is lowered, until purged), are left out.
    """
    versions = decode_versions(row)
    for name in list(versions):
        alive = versions[name]
        if cutoff_ms is not None:
            alive = [tv for tv in alive if tv[0] > cutoff_ms]
        if max_versions is not None:
            alive = alive[:max_versions]
        if alive:
            versions[name] = alive
        else:
            del versions[name]
    return versions


def make_reader(
    columns: Sequence[str] | None,
    max_versions: int | None,
    time_range: object,
    filter: object,
    cutoff_ms: int | None,
    table_max_versions: int | None = None,
    key_names: frozenset[str] | set[str] = frozenset(),
) -> Reader:
    """Build the function that turns one decoded row into a result row, or None.

    A row whose every cell has expired is absent. The filter sees the visible
    cells before projection. A row that exists but has none of the requested
    columns reads as absent, as in Tablestore, unless they name a primary-key
    column (``key_names``): the row is there, and reads as its key alone.
    """
    wanted = check_columns(columns)
    wants_key = wanted is not None and not wanted.isdisjoint(key_names)
    mv = check_max_versions(max_versions)
    tr = check_time_range(time_range)
    pagination = filter if isinstance(filter, ColumnPagination) else None
    cond = filter if isinstance(filter, Filter) else None
    if filter is not None and pagination is None and cond is None:
        raise ParameterInvalid(f"filter must be a Filter or ColumnPagination, got {describe(filter)}")
    if wanted is None and mv == 1 and tr is None and filter is None and cutoff_ms is None:
        return plain_row
    multi = mv > 1 or tr is not None or cutoff_ms is not None or (cond is not None and cond.needs_versions)

    def read(row: list) -> Row | None:
        latest, stamps = row[2], row[3]
        had_cells = bool(latest)
        versions = None
        if multi:
            versions = visible_versions(row, cutoff_ms, table_max_versions)
            if had_cells and not versions:
                return None
            latest = {n: vs[0][1] for n, vs in versions.items()}
        if cond is not None and not cond.matches(latest, versions):
            return None
        if versions is not None:
            out_versions = {}
            for name, vs in versions.items():
                if wanted is not None and name not in wanted:
                    continue
                if tr is not None:
                    vs = [tv for tv in vs if tr[0] <= tv[0] < tr[1]]
                if vs:
                    out_versions[name] = vs[:mv]
            names = sorted(out_versions)
        else:
            names = sorted(latest) if wanted is None else sorted(n for n in latest if n in wanted)
            out_versions = None
        if pagination is not None:
            names = names[pagination.offset : pagination.offset + pagination.limit]
        if wanted is not None and not names:
            return Row(row[1], {}, {}) if wants_key else None
        if out_versions is not None:
            kept = {n: out_versions[n] for n in names}
            if had_cells and not kept and tr is not None:
                return Row(row[1], {}, {}) if wants_key else None
            return Row(
                row[1],
                {n: vs[0][1] for n, vs in kept.items()},
                {n: vs[0][0] for n, vs in kept.items()},
                kept if mv > 1 else None,
            )
        if type(stamps) is not int:
            stamps = {n: stamps[n] for n in names}
        return Row(row[1], {n: latest[n] for n in names}, stamps)

    return read
