"""``BigtableInstance``: the Bigtable model's DDL over one store (``db.bigtable``).

Bigtable tables are catalog tables (model ``bigtable``) beside Tablestore's: one
namespace of names; ``list_tables`` lists the Bigtable ones, and each API refuses the
other model's tables with a clear error. Families get ids from 1 in the catalog; their
specs (GC rule, compression, block cache, bloom filter, aggregate) are stored there and
their storage options pick the column family their records live in.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

from ..errors import (
    NotSupported,
    ObjectAlreadyExist,
    ObjectNotExist,
    ParameterInvalid,
    PrimaryKeyTooLong,
)
from ..keys import layout
from ..table.schema import FamilySchema
from .store import FamilyTable
from .table import BigtableTable
from .types import (
    MAX_FAMILIES,
    MAX_ROW_KEY,
    FamilySpec,
    TableInfo,
    check_family_name,
    check_family_spec,
)

if TYPE_CHECKING:
    from ..context import StoreContext

MAX_TABLE_NAME = 50  # Bigtable's table ids: 1-50 characters
_TABLE_NAME = re.compile(r"[_a-zA-Z0-9][-_.a-zA-Z0-9]*")
MAX_SPLIT_KEYS = 1000


def check_table_name(name: object) -> str:
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name) or len(name) > MAX_TABLE_NAME:
        raise ParameterInvalid(
            f"invalid table name {name!r:.80}: use 1-{MAX_TABLE_NAME} characters of "
            "[-_.a-zA-Z0-9], not starting with '-' or '.'")
    return name


def _gc_dict(spec: FamilySpec) -> dict | None:
    if spec.gc is None:
        return None
    from .gc import check_gc, gc_to_dict

    check_gc(spec.gc)
    return gc_to_dict(spec.gc)


def to_schema(spec: FamilySpec, family_id: int) -> FamilySchema:
    check_family_spec(spec)
    return FamilySchema(spec.name, family_id, _gc_dict(spec), spec.compression, spec.block_cache,
                        spec.bloom_filter, spec.aggregate)


def to_spec(family: FamilySchema) -> FamilySpec:
    gc = None
    if family.gc is not None:
        from .gc import gc_from_dict

        gc = gc_from_dict(family.gc)
    return FamilySpec(family.name, gc, family.compression, family.block_cache,
                      family.bloom_filter, family.aggregate)


def _specs(families: object, what: str = "families") -> list[FamilySpec]:
    if isinstance(families, dict):
        out = []
        for name, spec in families.items():
            check_family_spec(spec)
            if spec.name != name:
                raise ParameterInvalid(f"family {name!r} is given a FamilySpec named {spec.name!r}")
            out.append(spec)
        return out
    if not isinstance(families, (list, tuple)):
        raise ParameterInvalid(f"{what} must be a list of FamilySpec or a dict, got {families!r:.80}")
    return [check_family_spec(s) for s in families]


class BigtableInstance:
    """The Bigtable tables of one store. Thread-safe (DDL runs under the catalog's lock)."""

    def __init__(self, ctx: StoreContext, sql=None) -> None:
        """``sql(instance)``: makes the GoogleSQL engine of ``sql``/``execute_query`` (the
        store passes ``widetable.sql.googlesql.GoogleSQL``: SQL sits above this layer)."""
        self._ctx = ctx
        self._make_sql = sql
        self._sql = None
        self._sql_lock = threading.Lock()

    @property
    def sql(self):
        """GoogleSQL over these tables (``widetable.sql.googlesql.GoogleSQL``), made on
        first use: ``prepare(query, param_types)``, ``execute(prepared, params)``."""
        if self._sql is None:
            if self._make_sql is None:
                raise NotSupported("this Bigtable instance has no SQL engine")
            with self._sql_lock:
                if self._sql is None:
                    self._sql = self._make_sql(self)
        return self._sql

    def execute_query(self, query: str, params: dict | None = None,
                      param_types: dict | None = None):
        """Run GoogleSQL ``query`` over this instance's tables: ``_key`` and one map
        column per family (``widetable.sql.googlesql``). ``params``: ``{name: value}``
        for each ``@name`` (types inferred from the values unless ``param_types`` gives
        them). The result has ``rows``, ``columns``, ``to_arrow()`` and iterates."""
        return self.sql.execute_query(query, params, param_types)

    def prepare_query(self, query: str, param_types: dict | None = None):
        """Check ``query`` and type its answer (a ``PreparedQuery``, run by
        ``sql.execute(prepared, params)``)."""
        return self.sql.prepare(query, param_types)

    def close(self) -> None:
        """Release the SQL engine (the store calls this as it closes)."""
        if self._sql is not None:
            self._sql.close()

    def _backing(self, name: object) -> FamilyTable:
        self._ctx.check_open()
        table = self._ctx.tables.get(name) if isinstance(name, str) else None
        if table is None:
            raise ObjectNotExist(f"table {name!r:.80} does not exist")
        if not isinstance(table, FamilyTable):
            raise ParameterInvalid(
                f"table {name!r} is a Tablestore table (typed primary key, no column families): "
                "use db.table(name), not db.bigtable")
        return table

    def table(self, name: str) -> BigtableTable:
        """The data API of table ``name``: ``OTSObjectNotExist`` if there is none."""
        return BigtableTable(self._backing(name))

    def list_tables(self) -> list[str]:
        """The names of the store's Bigtable tables, sorted."""
        self._ctx.check_open()
        return sorted(n for n, t in list(self._ctx.tables.items()) if isinstance(t, FamilyTable))

    def create_table(self, name: str, families: object = (), split_keys: object = ()) -> None:
        """Create table ``name`` with ``families`` (FamilySpecs, or a dict name -> spec),
        pre-split into partitions at ``split_keys`` (row keys). ``OTSObjectAlreadyExist``
        if the name is taken (by a table of either model)."""
        self._ctx.check_open()
        check_table_name(name)
        specs = _specs(families)
        if len(specs) > MAX_FAMILIES:
            raise ParameterInvalid(f"{len(specs)} column families, over the limit of {MAX_FAMILIES}")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ParameterInvalid(f"column family {dup!r} is declared twice")
        schemas = tuple(to_schema(s, i) for i, s in enumerate(specs, 1))
        splits = self._split_keys(split_keys)
        if name in self._ctx.tables:
            raise ObjectAlreadyExist(f"table {name!r} already exists")
        try:
            self._ctx.catalog.create_family_table(name, schemas, splits)
        except PrimaryKeyTooLong as exc:
            raise ParameterInvalid(f"a split key is over the 1 KB a partition boundary holds: {exc.message}") from None

    @staticmethod
    def _split_keys(split_keys: object) -> list[bytes]:
        if not isinstance(split_keys, (list, tuple)):
            raise ParameterInvalid(f"split_keys must be a list of row keys, got {split_keys!r:.80}")
        if len(split_keys) > MAX_SPLIT_KEYS:
            raise ParameterInvalid(f"{len(split_keys)} split keys, over {MAX_SPLIT_KEYS}")
        out = set()
        for k in split_keys:
            if not isinstance(k, (bytes, bytearray)) or not k or len(k) > MAX_ROW_KEY:
                raise ParameterInvalid(f"split key must be 1-{MAX_ROW_KEY} bytes, got {k!r:.80}")
            out.add(bytes(k))
        return sorted(out)

    def get_table(self, name: str) -> TableInfo:
        """Table ``name``'s families and its partitions' split keys (current boundaries)."""
        t = self._backing(name)
        tp = self._ctx.partitions.partitions(t)
        splits = tuple(layout.decode_bigtable_row_key(p.start) for p in tp.router.parts[1:])
        return TableInfo(t.name, {n: to_spec(t.families[n]) for n in t.family_order}, splits,
                         t.schema.created_at)

    def delete_table(self, name: str) -> None:
        """Delete table ``name`` and every row of it."""
        self._backing(name)
        self._ctx.catalog.delete_table(name)

    def modify_families(self, name: str, create: object = (), update: object = (),
                        drop: object = ()) -> TableInfo:
        """Create families (FamilySpecs, new names), update them (same name: GC rule and
        storage options; a changed storage profile moves the family's records to its
        column family; the aggregate type cannot change) and drop them (names: their
        cells are deleted). All checked first; one catalog write."""
        t = self._backing(name)
        creates, updates = _specs(create, "create"), _specs(update, "update")
        if not isinstance(drop, (list, tuple)):
            raise ParameterInvalid(f"drop must be a list of family names, got {drop!r:.80}")
        current = {f.name: f for f in t.schema.families if f.family_id}
        seen: set[str] = set()
        for n in [s.name for s in creates] + [s.name for s in updates] + [check_family_name(d) for d in drop]:
            if n in seen:
                raise ParameterInvalid(f"column family {n!r} is named twice in one modification")
            seen.add(n)
        for s in creates:
            if s.name in current:
                raise ObjectAlreadyExist(f"column family {s.name!r} already exists in table {name!r}")
        for s in updates:
            if s.name not in current:
                raise ObjectNotExist(f"column family {s.name!r} does not exist in table {name!r}")
            if s.aggregate != current[s.name].aggregate:
                raise ParameterInvalid(
                    f"column family {s.name!r}: the aggregate type cannot change "
                    f"({current[s.name].aggregate!r} to {s.aggregate!r})")
        for d in drop:
            if d not in current:
                raise ObjectNotExist(f"column family {d!r} does not exist in table {name!r}")
        families = dict(current)
        for s in updates:
            families[s.name] = to_schema(s, current[s.name].family_id)
        for d in drop:
            del families[d]
        next_id = max([f.family_id for f in current.values()], default=0) + 1
        for s in creates:
            if next_id > layout.MAX_FAMILY_ID:
                raise ParameterInvalid(f"table {name!r} has used every family id")
            families[s.name] = to_schema(s, next_id)
            next_id += 1
        if len(families) > MAX_FAMILIES:
            raise ParameterInvalid(f"{len(families)} column families, over the limit of {MAX_FAMILIES}")
        self._ctx.catalog.set_families(name, tuple(families.values()))
        return self.get_table(name)

    def drop_row_range(self, name: str, prefix: bytes | None = None, all_rows: bool = False) -> None:
        """``table(name).drop_row_range(prefix, all_rows)``."""
        self.table(name).drop_row_range(prefix, all_rows)
