"""Index declarations and the index key of a base row.

An index's primary key is the declared columns followed by the base table's
primary-key columns not among them (seed 002: the base key makes each entry
unique). Declared columns are base key columns or predefined columns of type
STRING, INTEGER or BINARY. A base row lacking a declared attribute column (or
holding a value of another type) has no entry. The entry's attribute columns
are the index's ``defined_columns`` (predefined columns), with the base row's
timestamps.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..errors import InvalidPK, ParameterInvalid, describe
from ..keys import codec, layout
from ..keys.compiled import Slow, join_code, tuple_code
from ..table import rowcodec
from ..table.schema import GLOBAL, LOCAL, IndexSpec, TableSchema, check_name

# What a global (non-strict) codec's ``entry`` returns for a row it cannot index because
# a key value is over the key limits (a string or binary over 1 KB): the row has no
# entry, as for None, but the applier and verify_index count it.
TOO_LONG = ("too long",)

_PY = {"STRING": str, "INTEGER": int, "BINARY": bytes, "DOUBLE": float, "BOOLEAN": bool}


def check_index(base: TableSchema, name: object, primary_key: object, defined_columns: object,
                index_type: object, table_id: int, start_seq: int) -> IndexSpec:
    """Validate a create_index request against ``base``; OTSParameterInvalid names the fault."""
    check_name(name, "index name")
    kind = str(getattr(index_type, "value", index_type)).upper()
    if kind not in (GLOBAL, LOCAL):
        raise ParameterInvalid(f"index_type must be 'GLOBAL' or 'LOCAL', got {describe(index_type)}")
    if base.options.max_versions != 1 or base.options.ttl != -1:
        raise ParameterInvalid(
            f"table {base.name!r} must have max_versions 1 and no TTL to take an index "
            f"(it has max_versions {base.options.max_versions}, ttl {base.options.ttl}), as in Tablestore"
        )
    if isinstance(primary_key, str) or not isinstance(primary_key, (list, tuple)) or not primary_key:
        raise ParameterInvalid(f"index primary_key must be a non-empty list of column names, got {describe(primary_key)}")
    defined = dict(base.defined_columns)
    pk_names = base.pk_names
    cols: list[str] = []
    for col in primary_key:
        if type(col) is not str:
            raise ParameterInvalid(f"index primary key column names must be strings, got {describe(col)}")
        if col in cols:
            raise ParameterInvalid(f"index primary key names column {describe(col)} twice")
        if col not in pk_names:
            if col not in defined:
                raise ParameterInvalid(
                    f"index key column {describe(col)} is neither a primary key column nor a "
                    f"predefined column of table {base.name!r}; declare it in defined_columns"
                )
            if defined[col] not in codec.PK_TYPES:
                raise ParameterInvalid(
                    f"index key column {col!r} is {defined[col]}; key columns must be STRING, INTEGER or BINARY"
                )
        cols.append(col)
    if kind == LOCAL and cols[0] != pk_names[0]:
        raise ParameterInvalid(
            f"a LOCAL index must start with the partition key {pk_names[0]!r} of table "
            f"{base.name!r}, got {cols[0]!r}"
        )
    full = tuple(cols) + tuple(n for n in pk_names if n not in cols)
    if defined_columns is not None and (
            isinstance(defined_columns, str) or not isinstance(defined_columns, (list, tuple))):
        raise ParameterInvalid(
            f"index defined_columns must be a list of column names, got {describe(defined_columns)}")
    attrs: list = list(defined_columns or ())
    for col in attrs:
        if type(col) is not str:
            raise ParameterInvalid(f"index defined column names must be strings, got {describe(col)}")
        if col not in defined:
            raise ParameterInvalid(f"index defined column {describe(col)} is not a predefined column of table {base.name!r}")
        if col in full:
            raise ParameterInvalid(f"index defined column {col!r} is already in the index key")
    if len(set(attrs)) != len(attrs):
        raise ParameterInvalid(f"index defined_columns {describe(attrs)} name a column twice")
    return IndexSpec(name, table_id, full, tuple(attrs), kind, time.time(), start_seq,  # type: ignore[arg-type]
                     declared=len(cols))


def index_schema(base: TableSchema, spec: IndexSpec) -> TableSchema:
    """The schema an index reads with: its own table id and key, the base table's options."""
    types = dict(base.primary_key) | dict(base.defined_columns)
    pk = tuple((n, types[n]) for n in spec.primary_key)
    return TableSchema(spec.name, spec.table_id, pk, replace(base.options), spec.created_at)


def compile_entry(prefix: bytes, sources: list, attrs: tuple, slow):
    """The entry function of one index: ``sources`` lists, per index key column,
    ``(base key position, None, type)`` or ``(None, attribute column, type)``. Rows passed to
    it hold a key the base table's encoder accepted, so key values skip the limit checks."""
    py = {codec.STRING: "str", codec.INTEGER: "int", codec.BINARY: "bytes"}
    lines = ["def entry(row):", "    pk = row[1]", "    latest = row[2]"]
    values = []
    for i, (pos, col, kind) in enumerate(sources):
        v = f"_v{i}"
        if pos is not None:
            lines.append(f"    {v} = pk[{pos}]")
        else:
            lines += [f"    {v} = latest.get({col!r})",
                      f"    if type({v}) is not {py[kind]}: return None"]
        values.append((v, kind, pos is not None))
    body: list[str] = []
    lines.append("    try:")
    parts = tuple_code(values, body, "        ")
    lines += body + [f"        key = {join_code([prefix, *parts])}",
                     "    except (_Slow, UnicodeEncodeError):",
                     "        return _slow(row)"]
    vals = "[" + ", ".join(v for v, _, _ in values) + "]"
    if not attrs:
        lines.append(f"    return key, _pack((1, {vals}, {{}}, {{}}, None))")
    else:
        lines.append("    cols = {}")
        for n in attrs:
            lines += [f"    x = latest.get({n!r}, _M)", f"    if x is not _M: cols[{n!r}] = x"]
        lines += ["    stamps = row[3]",
                  "    if type(stamps) is not int:",
                  "        return key, _encode_latest(" + vals + ", cols, {n: stamps[n] for n in cols})",
                  "    return key, _pack((1, " + vals + ", cols, stamps if cols else {}, None))"]
    ns = {"_Slow": Slow, "_slow": slow, "_prefix": prefix, "_pack": rowcodec.pack,
          "_encode_latest": rowcodec.encode_latest, "_M": object()}
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the index declaration only
    return ns["entry"]


class IndexCodec:
    """Computes the entry (index row key and blob) of a decoded base row."""

    def __init__(self, base: TableSchema, spec: IndexSpec, strict: bool) -> None:
        self.spec = spec
        self.schema = index_schema(base, spec)
        self.strict = strict  # raise on an unencodable key (local) instead of skipping (global)
        # The index's counts (``counts.IndexCounts``), shared by every codec of the index;
        # None: not counted (``IndexManager`` sets it).
        self.counts = None
        self.prefix = layout.table_prefix(spec.table_id)
        self._encode = codec.make_encoder(self.schema.pk_types, self.schema.pk_names)
        base_pos = {n: i for i, n in enumerate(base.pk_names)}
        defined = dict(base.defined_columns)
        # (base key position, None) or (None, (column, python type)) per index key column
        self._sources = [
            (base_pos[n], None) if n in base_pos else (None, (n, _PY[defined[n]]))
            for n in spec.primary_key
        ]
        self._attrs = spec.defined_columns
        # where each base key column sits in the index key
        self.base_positions = [spec.primary_key.index(n) for n in base.pk_names]
        self.entry = compile_entry(self.prefix, [
            (pos, None, self.schema.pk_types[i]) if pos is not None else (None, attr[0], self.schema.pk_types[i])  # type: ignore[index]
            for i, (pos, attr) in enumerate(self._sources)
        ], self._attrs, self.entry_slow)
        """``(index key, index row blob)`` of a decoded base row, or None if it is not indexed
        (a row lacking a declared column, or holding one of another type), or, for a global
        index, ``TOO_LONG`` if a key value is over the key limits (a local one raises). Compiled per index;
        any value off the fast path (long, non-UTF-8, out of range) goes to :meth:`entry_slow`."""

    def entry_slow(self, row: list) -> tuple | None:
        """The reference implementation of :meth:`entry` (checks and errors of ``keys.codec``)."""
        pk, latest, stamps = row[1], row[2], row[3]
        values = []
        for pos, attr in self._sources:
            if pos is not None:
                values.append(pk[pos])
            else:
                v = latest.get(attr[0])  # type: ignore[index]
                if v is None or type(v) is not attr[1]:  # type: ignore[index]
                    return None
                values.append(v)
        try:
            key = self.prefix + self._encode(tuple(values))
        except InvalidPK:
            if self.strict:
                raise
            return TOO_LONG
        cols = {n: latest[n] for n in self._attrs if n in latest}
        shared = type(stamps) is int
        ts = {n: stamps if shared else stamps[n] for n in cols}
        return key, rowcodec.encode_latest(values, cols, ts)

    def base_pk(self, index_pk: tuple) -> tuple:
        return tuple(index_pk[i] for i in self.base_positions)

    def key_checks(self) -> tuple[tuple[int, str, type], ...]:
        """``(index key position, attribute column, python type)`` of each declared
        attribute column of the key: what a base row must still hold to match an entry."""
        return tuple((i, attr[0], attr[1]) for i, (pos, attr) in enumerate(self._sources)
                     if pos is None)  # type: ignore[misc]

    def still_matches(self, index_pk: tuple, latest: dict) -> bool:
        """Whether a base row's newest values (``latest``) still give the entry ``index_pk``:
        False for a row changed since a lagging global index wrote the entry."""
        for i, column, kind in self.key_checks():
            v = latest.get(column)
            if type(v) is not kind or v != index_pk[i]:
                return False
        return True
