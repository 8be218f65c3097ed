"""Mapping tables: the SQL view of a data table, declared with CREATE TABLE.

A mapping names the data table's primary-key columns (all of them, in key
order) and the attribute columns SQL may see, each with a SQL type. As in
Tablestore, undeclared (schema-less) columns are invisible to SQL and a missing
cell reads as NULL. A declaration that contradicts the data table (a key
column left out or reordered, a key or predefined column declared with another
type) is rejected before anything is stored.

Mappings persist under ``layout.sql_mapping_key(name)`` as JSON
(``docs/format.md``)::

    {"name": "t", "table": "t", "primary_key": ["a", "b"],
     "columns": [["a", "BIGINT"], ["b", "MEDIUMTEXT"], ["c", "DOUBLE"]]}

and ``"search_index": "ix"`` for a mapping made with ENGINE='searchindex', whose
queries read that search index of the table.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, describe
from ..keys import layout
from .types import SQL_NAME, widetable_type

if TYPE_CHECKING:
    from ..storage import Engine
    from ..table.table import Table


@dataclass(frozen=True, slots=True)
class Column:
    """A mapped column: its name, its widetable type and the SQL type as declared."""

    name: str
    wtype: str
    sql_type: str


@dataclass(frozen=True, slots=True)
class Mapping:
    """A mapping table. ``columns`` lists key columns first, then attributes, as declared."""

    name: str
    table: str
    primary_key: tuple[str, ...]
    columns: tuple[Column, ...]
    search_index: str | None = None  # ENGINE='searchindex': queries read this search index

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def attributes(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.name not in self.primary_key)

    def to_json(self) -> bytes:
        d = {"name": self.name, "table": self.table, "primary_key": list(self.primary_key),
             "columns": [[c.name, c.sql_type] for c in self.columns]}
        if self.search_index is not None:
            d["search_index"] = self.search_index
        return json.dumps(d).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Mapping:
        d = json.loads(data)
        cols = tuple(Column(n, widetable_type(t, n), t) for n, t in d["columns"])
        return cls(d["name"], d["table"], tuple(d["primary_key"]), cols, d.get("search_index"))


def check_mapping(mapping: Mapping, table: Table) -> None:
    """Reject a mapping that contradicts ``table``'s schema (OTSParameterInvalid names why)."""
    schema = table.schema
    seen: set[str] = set()
    for c in mapping.columns:
        if c.name in seen:
            raise ParameterInvalid(f"column {c.name!r} is declared twice in mapping {mapping.name!r}")
        seen.add(c.name)
    pk = tuple(schema.pk_names)
    if mapping.primary_key != pk:
        raise ParameterInvalid(
            f"mapping {mapping.name!r} declares PRIMARY KEY({', '.join(mapping.primary_key)}), but "
            f"table {table.name!r} has primary key ({', '.join(pk)}); declare every key column "
            "in key order")
    key_types = dict(schema.primary_key)
    defined = dict(schema.defined_columns)
    for c in mapping.columns:
        want = key_types.get(c.name) or defined.get(c.name)
        if want is not None and want != c.wtype:
            what = "primary-key" if c.name in key_types else "predefined"
            raise ParameterInvalid(
                f"column {c.name!r} is declared {c.sql_type} ({c.wtype}) but is a {what} column of "
                f"type {want} in table {table.name!r}; declare it {SQL_NAME[want]}")
    missing = [n for n in pk if n not in seen]
    if missing:
        raise ParameterInvalid(f"mapping {mapping.name!r} must declare key column {missing[0]!r}")


class MappingCatalog:
    """The mapping tables of one store, loaded at open and written through. Thread-safe."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._mappings: dict[str, Mapping] = {}
        start, end = layout.sql_mapping_range()
        for _, value in engine.scan(start, end):
            m = Mapping.from_json(value)
            self._mappings[m.name] = m

    def get(self, name: str) -> Mapping:
        """The mapping ``name``; OTSObjectNotExist if there is none."""
        try:
            return self._mappings[name]
        except KeyError:
            raise ObjectNotExist(
                f"table {name!r} does not exist in SQL: map it first with CREATE TABLE "
                f"{name} (..., PRIMARY KEY(...))") from None

    def find(self, name: str) -> Mapping | None:
        return self._mappings.get(name)

    def names(self) -> list[str]:
        return sorted(self._mappings)

    def create(self, mapping: Mapping, table: Table) -> None:
        check_mapping(mapping, table)
        with self._lock:
            if mapping.name in self._mappings:
                raise ObjectAlreadyExist(f"mapping table {mapping.name!r} already exists")
            self._store(mapping)

    def drop(self, name: str) -> None:
        with self._lock:
            self.get(name)
            self._engine.delete(layout.sql_mapping_key(name))
            del self._mappings[name]

    def add_column(self, name: str, column: Column, table: Table) -> None:
        with self._lock:
            m = self.get(name)
            if m.column(column.name) is not None:
                raise ParameterInvalid(f"column {column.name!r} already exists in {name!r}")
            new = replace(m, columns=(*m.columns, column))
            check_mapping(new, table)
            self._store(new)

    def drop_column(self, name: str, column: str) -> None:
        with self._lock:
            m = self.get(name)
            if m.column(column) is None:
                raise ParameterInvalid(f"column {column!r} does not exist in {name!r}")
            if column in m.primary_key:
                raise ParameterInvalid(f"column {column!r} is a primary-key column of {name!r}; "
                                       "key columns cannot be dropped")
            self._store(replace(m, columns=tuple(c for c in m.columns if c.name != column)))

    def _store(self, mapping: Mapping) -> None:
        self._engine.put(layout.sql_mapping_key(mapping.name), mapping.to_json())
        self._mappings[mapping.name] = mapping


def column_of(name: object, sql_type: object) -> Column:
    if not isinstance(name, str) or not name:
        raise ParameterInvalid(f"invalid column name {describe(name)}")
    text = str(sql_type)
    return Column(name, widetable_type(text, name), text.upper())
