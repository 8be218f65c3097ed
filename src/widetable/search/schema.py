"""Search-index definitions: fields, analyzers, index options, and their checks.

A search index (Tablestore's SearchIndex) is declared on a base table as a
list of :class:`FieldSchema`. Each field reads the base column of the same
name (``column`` may name another one). :func:`check_index` fills defaults and
refuses what cannot work, naming the value; the result is what the catalog
stores (``IndexMeta.to_json``) and what ``describe_search_index`` reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ..errors import ObjectNotExist, ParameterInvalid, describe

KEYWORD, LONG, DOUBLE, BOOLEAN, DATE = "KEYWORD", "LONG", "DOUBLE", "BOOLEAN", "DATE"
GEO_POINT, TEXT, NESTED = "GEO_POINT", "TEXT", "NESTED"
FIELD_TYPES = (KEYWORD, LONG, DOUBLE, BOOLEAN, DATE, GEO_POINT, TEXT, NESTED)
ARRAY_TYPES = (KEYWORD, LONG, DOUBLE, DATE, GEO_POINT)
SORTABLE = (KEYWORD, LONG, DOUBLE, BOOLEAN, DATE, GEO_POINT)

SINGLE_WORD, SPLIT, FUZZY, MAX_WORD, MIN_WORD = "single_word", "split", "fuzzy", "max_word", "min_word"
ANALYZERS = (SINGLE_WORD, SPLIT, FUZZY, MAX_WORD, MIN_WORD)

MIN_TTL = 86400  # seconds: an index TTL is -1 or at least a day
MAX_FIELDS = 500
DEFAULT_SHARDS = 2
MAX_SHARDS = 64
MAX_ROUTING_FIELDS = 4
# How an index lays its documents out in tantivy (DO NOT CHANGE a number's meaning: embedded
# in catalogued definitions). 1: the primary-key order in ``_pk`` (a fast text field), keyword
# fields not fast. 2: the order in integer levels ``_k0..`` and keywords that sort and
# aggregate as fast fields (search/ordered.py, search/tantivy_aggs.py). 3: layout 2 plus the
# order field ``_o`` before the levels (search/frame.py) and a single GEO_POINT's coordinates
# as fast fields with a row number ``_rid`` (documents.FieldLayout). New indexes get LAYOUT;
# a definition without the entry is 1. An index keeps its layout until it is rebuilt.
LAYOUT = 3

# Which base-column types a field may read (the table's defined columns are checked at create).
COLUMN_TYPES = {
    KEYWORD: ("STRING",), LONG: ("INTEGER",), DOUBLE: ("DOUBLE", "INTEGER"), BOOLEAN: ("BOOLEAN",),
    DATE: ("INTEGER", "STRING"), GEO_POINT: ("STRING",), TEXT: ("STRING",), NESTED: ("STRING",),
}


@dataclass(frozen=True, slots=True)
class FieldSchema:
    """One indexed field. ``analyzer_parameter``: ``{"delimiter": ","}`` for split,
    ``{"min_chars": 1, "max_chars": 7}`` for fuzzy. ``sub_fields``: a NESTED field's own."""

    name: str
    type: str
    index: bool = True
    enable_sort_and_agg: bool | None = None  # None: on for every type but TEXT and NESTED
    store: bool = True
    is_array: bool = False
    analyzer: str | None = None  # TEXT only; None: single_word
    analyzer_parameter: dict = field(default_factory=dict)
    sub_fields: tuple[FieldSchema, ...] = ()
    column: str | None = None  # the base column it reads (default: the field's name)

    @property
    def source(self) -> str:
        return self.column or self.name

    def to_dict(self) -> dict:
        d = {"name": self.name, "type": self.type, "index": self.index,
             "enable_sort_and_agg": self.enable_sort_and_agg, "store": self.store,
             "is_array": self.is_array}
        if self.type == TEXT:
            d["analyzer"] = self.analyzer
            d["analyzer_parameter"] = dict(self.analyzer_parameter)
        if self.sub_fields:
            d["sub_fields"] = [f.to_dict() for f in self.sub_fields]
        if self.column:
            d["column"] = self.column
        return d

    @staticmethod
    def from_dict(d: dict) -> FieldSchema:
        return FieldSchema(
            d["name"], d["type"], d.get("index", True), d.get("enable_sort_and_agg"),
            d.get("store", True), d.get("is_array", False), d.get("analyzer"),
            dict(d.get("analyzer_parameter") or {}),
            tuple(FieldSchema.from_dict(s) for s in d.get("sub_fields", ())), d.get("column"),
        )


@dataclass(frozen=True, slots=True)
class IndexMeta:
    """A search index as the catalog stores it (defaults filled in)."""

    table: str
    name: str
    index_id: int  # a table id from the store's counter: names its directory
    fields: tuple[FieldSchema, ...]
    index_sort: tuple = ()  # ((field, "ASC"|"DESC"), ...); () = by primary key
    routing_fields: tuple[str, ...] = ()
    ttl: int = -1
    shards: int = DEFAULT_SHARDS
    created_at: float = 0.0
    # A rebuild in progress (fields added): the new definition and its own index id.
    pending: IndexMeta | None = None
    layout: int = LAYOUT

    def field(self, name: str) -> FieldSchema:
        head, _, rest = name.partition(".")
        for f in self.fields:
            if f.name == name:
                return f
            if f.name == head and rest and f.type == NESTED:
                for s in f.sub_fields:
                    if s.name == rest:
                        return s
        raise ParameterInvalid(f"search index {self.name!r} has no field {describe(name)}")

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False).encode()

    def to_dict(self) -> dict:
        return {
            "table": self.table, "name": self.name, "index_id": self.index_id,
            "fields": [f.to_dict() for f in self.fields],
            "index_sort": [list(s) for s in self.index_sort],
            "routing_fields": list(self.routing_fields), "ttl": self.ttl, "shards": self.shards,
            "created_at": self.created_at,
            "pending": None if self.pending is None else self.pending.to_dict(),
            "layout": self.layout,
        }

    @staticmethod
    def from_dict(d: dict) -> IndexMeta:
        return IndexMeta(
            d["table"], d["name"], d["index_id"],
            tuple(FieldSchema.from_dict(f) for f in d["fields"]),
            tuple(tuple(s) for s in d.get("index_sort", ())), tuple(d.get("routing_fields", ())),
            d.get("ttl", -1), d.get("shards", DEFAULT_SHARDS), d.get("created_at", 0.0),
            None if d.get("pending") is None else IndexMeta.from_dict(d["pending"]),
            d.get("layout", 1),
        )

    @staticmethod
    def from_json(raw: bytes) -> IndexMeta:
        return IndexMeta.from_dict(json.loads(raw))


def as_field(value: object) -> FieldSchema:
    if isinstance(value, FieldSchema):
        return value
    if isinstance(value, dict):
        d = dict(value)
        if "sub_fields" in d:
            d["sub_fields"] = [(as_field(s).to_dict()) for s in d["sub_fields"]]
        if "name" not in d or "type" not in d:
            raise ParameterInvalid(f"a field needs a name and a type, got {describe(value)}")
        d["type"] = str(d["type"]).upper()
        return FieldSchema.from_dict(d)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return FieldSchema(str(value[0]), str(value[1]).upper())
    raise ParameterInvalid(f"a field is a FieldSchema, a dict or (name, type), got {describe(value)}")


def check_field(f: FieldSchema, nested: bool = False) -> FieldSchema:
    """``f`` with defaults filled in; ParameterInvalid naming what is wrong."""
    if not isinstance(f.name, str) or not f.name or "." in f.name or len(f.name) > 255:
        raise ParameterInvalid(f"invalid field name {describe(f.name)}")
    if f.type not in FIELD_TYPES:
        raise ParameterInvalid(f"field {f.name!r}: unknown field type {describe(f.type)}; "
                               f"one of {', '.join(FIELD_TYPES)}")
    if f.is_array and f.type not in ARRAY_TYPES:
        raise ParameterInvalid(f"field {f.name!r}: is_array is not allowed on type {f.type}")
    sort_agg = f.enable_sort_and_agg
    if sort_agg is None:
        sort_agg = f.type in SORTABLE
    if sort_agg and f.type not in SORTABLE:
        raise ParameterInvalid(f"field {f.name!r}: enable_sort_and_agg is not allowed on type {f.type}")
    analyzer, params = f.analyzer, dict(f.analyzer_parameter)
    if f.type == TEXT:
        analyzer = analyzer or SINGLE_WORD
        if analyzer not in ANALYZERS:
            raise ParameterInvalid(f"field {f.name!r}: unknown analyzer {describe(analyzer)}; "
                                   f"one of {', '.join(ANALYZERS)}")
        params = _check_analyzer_parameter(f.name, analyzer, params)
    elif analyzer is not None:
        raise ParameterInvalid(f"field {f.name!r}: an analyzer is for TEXT fields, not {f.type}")
    subs: tuple[FieldSchema, ...] = ()
    if f.type == NESTED:
        if nested:
            raise ParameterInvalid(f"field {f.name!r}: NESTED fields cannot nest further")
        if not f.sub_fields:
            raise ParameterInvalid(f"NESTED field {f.name!r} needs sub_fields")
        subs = tuple(check_field(as_field(s), nested=True) for s in f.sub_fields)
        _no_duplicates([s.name for s in subs], f"NESTED field {f.name!r}")
    elif f.sub_fields:
        raise ParameterInvalid(f"field {f.name!r}: sub_fields are for NESTED fields")
    return replace(f, enable_sort_and_agg=sort_agg, analyzer=analyzer, analyzer_parameter=params,
                   sub_fields=subs)


def _check_analyzer_parameter(name: str, analyzer: str, params: dict) -> dict:
    if analyzer == SPLIT:
        delim = params.get("delimiter", " ")
        if not isinstance(delim, str) or not delim:
            raise ParameterInvalid(f"field {name!r}: split delimiter must be a non-empty string, "
                                   f"got {describe(delim)}")
        return {"delimiter": delim}
    if analyzer == FUZZY:
        lo, hi = params.get("min_chars", 1), params.get("max_chars", 7)
        if type(lo) is not int or type(hi) is not int or not 1 <= lo <= hi <= 16:
            raise ParameterInvalid(f"field {name!r}: fuzzy needs 1 <= min_chars <= max_chars <= 16, "
                                   f"got {describe(lo)} and {describe(hi)}")
        return {"min_chars": lo, "max_chars": hi}
    if params:
        raise ParameterInvalid(f"field {name!r}: analyzer {analyzer} takes no parameters, "
                               f"got {describe(params)}")
    return {}


def _no_duplicates(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ParameterInvalid(f"{where}: duplicate field name {n!r}")
        seen.add(n)


def check_ttl(ttl: object, table_ttl: int) -> int:
    """An index TTL: -1, or a day at least and at most the table's TTL."""
    if type(ttl) is not int:
        raise ParameterInvalid(f"search index ttl must be an integer, got {describe(ttl)}")
    if ttl == -1:
        if table_ttl != -1:
            raise ParameterInvalid(f"search index ttl -1 exceeds the table's ttl {table_ttl}")
        return ttl
    if ttl < MIN_TTL:
        raise ParameterInvalid(f"search index ttl {ttl} is out of range: -1 or at least {MIN_TTL}")
    if table_ttl != -1 and ttl > table_ttl:
        raise ParameterInvalid(f"search index ttl {ttl} exceeds the table's ttl {table_ttl}")
    return ttl


def check_index(table_schema, name: object, fields: object, index_sort: object,
                routing_fields: object, ttl: object, shards: object) -> IndexMeta:
    """An :class:`IndexMeta` (index_id 0) from a create call's arguments, or ParameterInvalid."""
    if not isinstance(name, str) or not name or len(name) > 255 or not (name[0].isalpha() or name[0] == "_") \
            or not all(c.isalnum() or c in "_-" for c in name):
        raise ParameterInvalid(f"invalid search index name {describe(name)}")
    if not isinstance(fields, (list, tuple)) or not fields:
        raise ParameterInvalid(f"a search index needs a list of fields, got {describe(fields)}")
    if len(fields) > MAX_FIELDS:
        raise ParameterInvalid(f"a search index has at most {MAX_FIELDS} fields, got {len(fields)}")
    checked = tuple(check_field(as_field(f)) for f in fields)
    _no_duplicates([f.name for f in checked], f"search index {name!r}")
    pk_names = set(table_schema.pk_names)
    defined = dict(table_schema.defined_columns)
    for f in checked:
        col = defined.get(f.source)
        if f.source in pk_names:
            col = dict(table_schema.primary_key)[f.source]
        if col is not None and col not in COLUMN_TYPES[f.type] and not (f.is_array and col == "STRING"):
            raise ParameterInvalid(f"field {f.name!r} of type {f.type} cannot read column "
                                   f"{f.source!r} of type {col}")
    meta = IndexMeta(table_schema.name, name, 0, checked)
    sort = _check_index_sort(meta, index_sort)
    routing = _check_routing(table_schema, meta, routing_fields)
    if type(shards) is not int or not 1 <= shards <= MAX_SHARDS:
        raise ParameterInvalid(f"shards must be an integer in [1, {MAX_SHARDS}], got {describe(shards)}")
    return replace(meta, index_sort=sort, routing_fields=routing,
                   ttl=check_ttl(ttl, table_schema.options.ttl), shards=shards)


def _check_index_sort(meta: IndexMeta, index_sort: object) -> tuple:
    if index_sort is None:
        return ()
    if not isinstance(index_sort, (list, tuple)):
        raise ParameterInvalid(f"index_sort is a list of (field, order), got {describe(index_sort)}")
    out = []
    for item in index_sort:
        fname, order = (item, "ASC") if isinstance(item, str) else tuple(item)
        f = meta.field(fname) if "." not in fname else None
        if f is None or not f.enable_sort_and_agg or f.is_array or f.type == GEO_POINT:
            raise ParameterInvalid(f"index_sort field {describe(fname)} must be a single-valued field "
                                   "with enable_sort_and_agg")
        if str(order).upper() not in ("ASC", "DESC"):
            raise ParameterInvalid(f"index_sort order must be ASC or DESC, got {describe(order)}")
        out.append((fname, str(order).upper()))
    return tuple(out)


def _check_routing(table_schema, meta: IndexMeta, routing_fields: object) -> tuple[str, ...]:
    if routing_fields is None:
        return ()
    if not isinstance(routing_fields, (list, tuple)) or len(routing_fields) > MAX_ROUTING_FIELDS:
        raise ParameterInvalid(f"routing_fields is a list of at most {MAX_ROUTING_FIELDS} primary-key "
                               f"columns, got {describe(routing_fields)}")
    for r in routing_fields:
        if r not in table_schema.pk_names:
            raise ParameterInvalid(f"routing field {describe(r)} is not a primary-key column of "
                                   f"table {table_schema.name!r}")
    return tuple(routing_fields)


def add_fields(meta: IndexMeta, new_fields: object, table_schema) -> tuple[FieldSchema, ...]:
    """The field list of ``meta`` plus ``new_fields``, checked (names must be new)."""
    if not isinstance(new_fields, (list, tuple)) or not new_fields:
        raise ParameterInvalid(f"add_fields is a list of fields, got {describe(new_fields)}")
    fields = list(meta.fields) + [check_field(as_field(f)) for f in new_fields]
    check_index(table_schema, meta.name, fields, None, None, meta.ttl, meta.shards)
    return tuple(check_field(f) for f in fields)


def missing(table: str, name: str) -> ObjectNotExist:
    return ObjectNotExist(f"table {table!r} has no search index {describe(name)}")
