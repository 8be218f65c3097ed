"""Attribute values and write inputs: types, sizes, timestamps and the forms callers pass.

Attribute values map onto Python types one to one::

    STRING -> str    INTEGER -> int (int64)    DOUBLE -> float
    BOOLEAN -> bool  BINARY -> bytes
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from ..errors import OutOfColumnCountLimit, ParameterInvalid, describe
from .schema import check_name

MAX_VALUE_BYTES = 2 * 1024 * 1024
MAX_COLUMNS_PER_WRITE = 1024
MAX_REQUEST_BYTES = 4 * 1024 * 1024
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TIMESTAMP = 2**63 - 1

ATTRIBUTE_TYPES = {str: "STRING", int: "INTEGER", float: "DOUBLE", bool: "BOOLEAN", bytes: "BINARY"}

_valid_names: set[str] = set()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_column_name(name: object) -> str:
    if type(name) is str and name in _valid_names:  # a list would fail the set lookup itself
        return name
    check_name(name, "column name")
    if len(_valid_names) < 100_000:
        _valid_names.add(name)  # type: ignore[arg-type]
    return name  # type: ignore[return-value]


def check_value(name: str, value: object) -> object:
    """Return ``value`` (bytes-like made ``bytes``) if it is a valid attribute value."""
    t = type(value)
    if t is str:
        if value.isascii():  # type: ignore[union-attr]
            size = len(value)  # type: ignore[arg-type]
        else:
            try:
                size = len(value.encode())  # type: ignore[union-attr]
            except UnicodeEncodeError:
                raise ParameterInvalid(
                    f"column {name!r}: value {describe(value)} is not valid Unicode text"
                ) from None
        if size > MAX_VALUE_BYTES:
            raise ParameterInvalid(
                f"column {name!r}: value of {size} bytes is over the 2 MB limit"
            )
        return value
    if t is bytes:
        if len(value) > MAX_VALUE_BYTES:  # type: ignore[arg-type]
            raise ParameterInvalid(
                f"column {name!r}: value of {len(value)} bytes is over the 2 MB limit"  # type: ignore[arg-type]
            )
        return value
    if t is int:
        if not INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]
            raise ParameterInvalid(f"column {name!r}: integer {value} does not fit in int64")
        return value
    if t is float or t is bool:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return check_value(name, bytes(value))
    raise ParameterInvalid(
        f"column {name!r}: value {describe(value)} of type {t.__name__} is not STRING, INTEGER, "
        "DOUBLE, BOOLEAN or BINARY"
    )


def value_size(value: object) -> int:
    """Bytes a value counts for in request-size limits (Tablestore's rules). Never raises:
    a str that is not Unicode text (a lone surrogate) is sized as its code points would
    be, and refused (OTSParameterInvalid, its row alone) where its row is encoded."""
    t = type(value)
    if t is str:
        return len(value.encode("utf-8", "surrogatepass"))  # type: ignore[union-attr]
    if t is bytes:
        return len(value)  # type: ignore[arg-type]
    if t is bool:
        return 1
    return 8


def check_ms(ts: object, what: str) -> int:
    """``ts``, a version's timestamp: milliseconds in [0, 2**63); ``what`` names it."""
    if type(ts) is not int or not 0 <= ts <= MAX_TIMESTAMP:
        raise ParameterInvalid(f"{what}: timestamp {describe(ts)} must be milliseconds in [0, 2**63)")
    return ts


def check_timestamp(ts: object, now: int, max_deviation_s: int, name: str) -> int:
    check_ms(ts, f"column {name!r}")
    if abs(ts - now) > max_deviation_s * 1000:
        raise ParameterInvalid(
            f"column {name!r}: timestamp {ts} is more than max_time_deviation "
            f"({max_deviation_s} s) from now ({now})"
        )
    return ts


_PLAIN_TYPES = frozenset({bytes, str, int, float, bool})


def plain_cells(columns: dict) -> dict | None:
    """``{name: value}`` ready to pack, or None if some value carries a timestamp.

    The common put has plain values only, so this checks names and types with
    a few C-level set operations instead of a Python loop over the cells. It
    does not check value sizes or text encodability: the caller packs the row
    at once and calls :func:`check_packed` on the result, which is cheaper.
    """
    if len(columns) > MAX_COLUMNS_PER_WRITE:
        raise OutOfColumnCountLimit(
            f"{len(columns)} columns in one write; the limit is {MAX_COLUMNS_PER_WRITE}"
        )
    if not _valid_names.issuperset(columns):
        for name in columns:
            check_column_name(name)
    types = set(map(type, columns.values()))
    if types <= _PLAIN_TYPES:
        if int in types:
            for name, value in columns.items():
                if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
                    check_value(name, value)
        return columns
    if tuple in types:
        return None
    return {name: check_value(name, value) for name, value in columns.items()}


def check_packed(columns: dict, packed_size: int) -> None:
    """Finish checking :func:`plain_cells` output once packed into ``packed_size`` bytes.

    No value can be larger than the packed row, so only a row over 2 MB needs
    its values measured one by one.
    """
    if packed_size > MAX_VALUE_BYTES:
        for name, value in columns.items():
            check_value(name, value)


def normalize_cells(
    columns: object, now: int, max_deviation_s: int, what: str = "columns"
) -> list[tuple[str, object, int]]:
    """Turn the forms callers pass into ``[(name, value, timestamp)]``.

    Accepted: a mapping ``{name: value}`` or ``{name: (value, timestamp)}``, or an
    iterable of ``(name, value)`` / ``(name, value, timestamp)``. Cells without a
    timestamp get ``now``.
    """
    if columns is None:
        return []
    out: list[tuple[str, object, int]] = []
    # type() first: isinstance against the Mapping ABC costs a Python-level check
    mapping = type(columns) is dict or isinstance(columns, Mapping)
    if mapping:
        items: Iterable = columns.items()  # type: ignore[attr-defined]
    elif isinstance(columns, (list, tuple)):
        items = columns
    else:
        raise ParameterInvalid(f"{what} must be a dict or a list of tuples, got {describe(columns)}")
    for item in items:
        if mapping:
            name, value = item
            ts = None
            if type(value) is tuple:
                if len(value) != 2:
                    raise ParameterInvalid(
                        f"column {name!r}: expected value or (value, timestamp), got "
                        f"{describe(value)}"
                    )
                value, ts = value
        else:
            if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
                raise ParameterInvalid(
                    f"{what}: expected (name, value) or (name, value, timestamp), got "
                    f"{describe(item)}"
                )
            name, value = item[0], item[1]
            ts = item[2] if len(item) == 3 else None
        check_column_name(name)
        value = check_value(name, value)
        ts = now if ts is None else check_timestamp(ts, now, max_deviation_s, name)
        out.append((name, value, ts))
    if len(out) > MAX_COLUMNS_PER_WRITE:
        raise OutOfColumnCountLimit(
            f"{len(out)} columns in one write; the limit is {MAX_COLUMNS_PER_WRITE}"
        )
    return out
