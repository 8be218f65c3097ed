"""GoogleSQL's types over Bigtable: plain values, so the wire needs nothing of this layer.

A type is a name, or a tuple for the composite ones::

    "BYTES" | "STRING" | "INT64" | "FLOAT32" | "FLOAT64" | "BOOL" | "TIMESTAMP" | "DATE"
    ("ARRAY", element) | ("MAP", key, value) | ("STRUCT", ((name, type), ...))

``type_name`` spells one as GoogleSQL does (``MAP<BYTES, INT64>``). This module maps them
to and from Arrow types (the scans' and DuckDB's), to DuckDB type names (a parameter's
typed literal), and checks a parameter's value against its declared type.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from ...errors import ParameterInvalid

KEY = "_key"  # the row key's column
INT_AGGREGATES = ("sum", "min", "max")  # aggregate families whose values are INT64
SCALARS = ("BYTES", "STRING", "INT64", "FLOAT32", "FLOAT64", "BOOL", "TIMESTAMP", "DATE")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UTC = dt.UTC


def type_name(t: object) -> str:
    """``MAP<BYTES, ARRAY<STRUCT<timestamp TIMESTAMP, value BYTES>>>``."""
    if isinstance(t, str):
        return t
    kind = t[0]  # type: ignore[index]
    if kind == "ARRAY":
        return f"ARRAY<{type_name(t[1])}>"  # type: ignore[index]
    if kind == "MAP":
        return f"MAP<{type_name(t[1])}, {type_name(t[2])}>"  # type: ignore[index]
    return "STRUCT<" + ", ".join(f"{n} {type_name(ft)}" if n else type_name(ft)
                                 for n, ft in t[1]) + ">"  # type: ignore[index]


def check_type(t: object, what: str) -> object:
    """``t`` if it is a well-formed type (tuples for lists), else ParameterInvalid."""
    if isinstance(t, str) and t in SCALARS:
        return t
    if isinstance(t, (tuple, list)) and t:
        if t[0] == "ARRAY" and len(t) == 2:
            return ("ARRAY", check_type(t[1], what))
        if t[0] == "MAP" and len(t) == 3:
            return ("MAP", check_type(t[1], what), check_type(t[2], what))
        if t[0] == "STRUCT" and len(t) == 2:
            return ("STRUCT", tuple((str(n), check_type(ft, what)) for n, ft in t[1]))
    raise ParameterInvalid(f"{what}: unsupported type {t!r:.100}")


def from_json(j: object) -> object:
    """A type read back from JSON (which made its tuples lists)."""
    if isinstance(j, str):
        return j
    kind = j[0]  # type: ignore[index]
    if kind == "STRUCT":
        return ("STRUCT", tuple((n, from_json(ft)) for n, ft in j[1]))  # type: ignore[index]
    return (kind, *(from_json(x) for x in j[1:]))  # type: ignore[index]


def family_type(aggregate: str | None, history: bool) -> object:
    """The GoogleSQL type of a family's column."""
    value = "INT64" if aggregate in INT_AGGREGATES else "BYTES"
    if history:
        return ("MAP", "BYTES", ("ARRAY", ("STRUCT", (("timestamp", "TIMESTAMP"), ("value", value)))))
    return ("MAP", "BYTES", value)


def answer_schema(columns) -> pa.Schema:
    """The Arrow schema an answer of ``(name, type)`` columns is delivered in."""
    return pa.schema([pa.field(n, to_arrow(t)) for n, t in columns])


# -- Arrow ----------------------------------------------------------------------------------

_TO_ARROW = {"BYTES": pa.binary(), "STRING": pa.string(), "INT64": pa.int64(),
             "FLOAT32": pa.float32(), "FLOAT64": pa.float64(), "BOOL": pa.bool_(),
             "TIMESTAMP": pa.timestamp("us", tz="UTC"), "DATE": pa.date32()}


def to_arrow(t: object) -> pa.DataType:
    if isinstance(t, str):
        return _TO_ARROW[t]
    if t[0] == "ARRAY":  # type: ignore[index]
        return pa.list_(to_arrow(t[1]))  # type: ignore[index]
    if t[0] == "MAP":  # type: ignore[index]
        return pa.map_(to_arrow(t[1]), to_arrow(t[2]))  # type: ignore[index]
    return pa.struct([pa.field(n, to_arrow(ft)) for n, ft in t[1]])  # type: ignore[index]


def of_arrow(t: pa.DataType, column: str) -> object:
    """The GoogleSQL type of an answer column DuckDB typed ``t`` (ParameterInvalid naming
    the column for a type Bigtable's SQL cannot return)."""
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or str(t) == "binary_view":
        return "BYTES"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        return "STRING"
    if pa.types.is_integer(t) or pa.types.is_null(t) or (pa.types.is_decimal(t) and t.scale == 0):
        return "INT64"  # DuckDB's SUM of BIGINT is a HUGEINT (decimal); NULL is INT64 in GoogleSQL
    if pa.types.is_float32(t):
        return "FLOAT32"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "FLOAT64"
    if pa.types.is_boolean(t):
        return "BOOL"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_map(t):
        return ("MAP", of_arrow(t.key_type, column), of_arrow(t.item_type, column))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = of_arrow(t.value_type, column)
        if isinstance(element, tuple) and element[0] in ("ARRAY", "MAP"):
            raise ParameterInvalid(f"result column {column!r} is an array of {element[0].lower()}s, "
                                   "which Bigtable's SQL cannot return")
        return ("ARRAY", element)
    if pa.types.is_struct(t):
        return ("STRUCT", tuple((t.field(i).name, of_arrow(t.field(i).type, column))
                                for i in range(t.num_fields)))
    raise ParameterInvalid(f"result column {column!r} is of type {t}, which Bigtable's SQL "
                           "cannot return: CAST it")


def deliverable(t: object) -> pa.DataType:
    """What an answer column of GoogleSQL type ``t`` is delivered as (Arrow)."""
    return to_arrow(t)


# -- DuckDB ---------------------------------------------------------------------------------

_DUCK = {"BYTES": "BLOB", "STRING": "VARCHAR", "INT64": "BIGINT", "FLOAT32": "FLOAT",
         "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN", "TIMESTAMP": "TIMESTAMPTZ", "DATE": "DATE"}


def duck_type(t: object) -> str:
    if isinstance(t, str):
        return _DUCK[t]
    if t[0] == "ARRAY":  # type: ignore[index]
        return f"{duck_type(t[1])}[]"  # type: ignore[index]
    if t[0] == "MAP":  # type: ignore[index]
        return f"MAP({duck_type(t[1])}, {duck_type(t[2])})"  # type: ignore[index]
    fields = ", ".join(f'"{n}" {duck_type(ft)}' for n, ft in t[1])  # type: ignore[index]
    return f"STRUCT({fields})"


# -- parameter values -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Typed:
    """A parameter value with the type its sender gave it (a protocol's typed value)."""
    value: object
    type: object


def check_value(value: object, t: object, what: str) -> object:
    """``value`` as the Python value of type ``t`` (None is NULL of any type);
    ParameterInvalid naming ``what`` if it is not one."""
    if value is None:
        return None
    bad = ParameterInvalid(f"{what}: value {value!r:.80} is not of its declared type {type_name(t)}")
    if t == "BYTES":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise bad
        return bytes(value)
    if t == "STRING":
        if not isinstance(value, str):
            raise bad
        return value
    if t == "INT64":
        if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
            raise bad
        return value
    if t in ("FLOAT32", "FLOAT64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if t == "BOOL":
        if not isinstance(value, bool):
            raise bad
        return value
    if t == "TIMESTAMP":
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        raise bad
    if t == "DATE":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        raise bad
    if isinstance(t, tuple) and t[0] == "ARRAY":
        if not isinstance(value, (list, tuple)):
            raise bad
        return [check_value(v, t[1], what) for v in value]
    raise ParameterInvalid(f"{what}: parameters of type {type_name(t)} are not supported")


def infer_type(name: str, value: object) -> object:
    """A parameter's type from its Python value (as the official client infers it)."""
    for cls, t in ((bool, "BOOL"), (bytes, "BYTES"), (str, "STRING"), (int, "INT64"),
                   (float, "FLOAT64"), (dt.datetime, "TIMESTAMP"), (dt.date, "DATE")):
        if isinstance(value, cls):
            return t
    raise ParameterInvalid(f"cannot infer the type of parameter @{name} from {value!r:.60}: "
                           "give it in param_types")


__all__ = [
    "INT_AGGREGATES",
    "KEY",
    "SCALARS",
    "Typed",
    "answer_schema",
    "check_type",
    "check_value",
    "deliverable",
    "duck_type",
    "family_type",
    "from_json",
    "of_arrow",
    "to_arrow",
    "infer_type",
    "type_name",
]

