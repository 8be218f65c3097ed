"""Table schemas and options: names, primary-key columns and their types, GC settings."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace

from ..errors import ParameterInvalid, describe
from ..keys.codec import PK_TYPES

MAX_PK_COLUMNS = 4
DEFAULT_MAX_TIME_DEVIATION = 86400  # seconds, Tablestore's default
FOREVER = -1
INT32_MAX = 2**31 - 1  # Tablestore's protocol carries versions and seconds as int32
DEFAULT_SPLIT_SIZE = 10 * 2**30  # 10 GB, as Tablestore
DEFAULT_MERGE_SIZE = 2**30

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _AutoIncrement:
    """The placeholder for an auto-increment key column (Tablestore's PK_AUTO_INCR)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "AUTO_INCREMENT"

    def __reduce__(self) -> str:
        return "AUTO_INCREMENT"


# Declares an auto-increment column in create_table, and asks for a value in put_row.
AUTO_INCREMENT = _AutoIncrement()


def check_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is 1-255 bytes of ``[A-Za-z0-9_]`` starting with a letter or ``_``."""
    if not isinstance(name, str) or not 1 <= len(name) <= 255 or not _NAME_RE.match(name):
        raise ParameterInvalid(
            f"invalid {what} {describe(name)}: use 1-255 characters of [A-Za-z0-9_], "
            "starting with a letter or '_'"
        )
    return name


@dataclass(frozen=True, slots=True)
class TableOptions:
    """Garbage-collection and write-check settings of a table.

    ``ttl`` is in seconds, ``-1`` meaning forever. ``max_time_deviation`` is in
    seconds: a write whose explicit timestamp lies further from now is rejected.
    """

    max_versions: int = 1
    ttl: int = FOREVER
    max_time_deviation: int = DEFAULT_MAX_TIME_DEVIATION
    # Partitions (see widetable.partition). Sizes in bytes, loads in operations
    # per second, windows in seconds. capacity 0 = no per-partition limit;
    # split_load 0 = split by load at capacity (never, if capacity is 0 too).
    split_size: int = DEFAULT_SPLIT_SIZE
    split_load: int = 0
    split_load_window: float = 10.0
    merge_size: int = DEFAULT_MERGE_SIZE
    merge_load: float = 1.0
    merge_window: float = 600.0
    capacity: int = 0
    reserved_throughput: int = 0
    stats_retention: int = 7 * 86400
    # Tablestore's reserved read and write capacity units as declared (CreateTable /
    # UpdateTable), kept to describe them; throttling pools them (``reserved_pool``).
    reserved_read: int = 0
    reserved_write: int = 0

    @property
    def reserved_pool(self) -> float:
        """Operations per second the table's one token bucket allows (0 = no limit):
        ``reserved_throughput``, or else the reserved read and write units together."""
        return self.reserved_throughput or self.reserved_read + self.reserved_write

    def checked(self) -> TableOptions:
        for name in PARTITION_OPTIONS:
            value = getattr(self, name)
            # ``not value >= 0`` also refuses NaN (which compares false with everything, and
            # would leave a token bucket empty for good); infinity is no finite setting either.
            if (type(value) not in (int, float) or not 0 <= value < math.inf
                    or (name == "split_size" and value <= 0)):
                raise ParameterInvalid(f"{name} must be a finite number >= 0, got {describe(value)}")
        mv, ttl, dev = self.max_versions, self.ttl, self.max_time_deviation
        if type(mv) is not int or not 1 <= mv <= INT32_MAX:
            raise ParameterInvalid(f"max_versions must be a positive integer, got {describe(mv)}")
        # Seconds travel as int32 in Tablestore's protocol: the same bounds here.
        if type(ttl) is not int or not (ttl == FOREVER or 0 < ttl <= INT32_MAX):
            raise ParameterInvalid(
                f"ttl must be -1 (forever) or seconds from 1 to {INT32_MAX}, got {describe(ttl)}")
        if type(dev) is not int or not 0 < dev <= INT32_MAX:
            raise ParameterInvalid(
                f"max_time_deviation must be seconds from 1 to {INT32_MAX}, got {describe(dev)}"
            )
        return self

    def to_dict(self) -> dict:
        return {
            "max_versions": self.max_versions,
            "ttl": self.ttl,
            "max_time_deviation": self.max_time_deviation,
            # Partition options only when set, so older stores' catalogs read the same.
            **{
                name: getattr(self, name) for name in PARTITION_OPTIONS
                if getattr(self, name) != _DEFAULT_PARTITION_OPTIONS[name]
            },
        }


PARTITION_OPTIONS = (
    "split_size", "split_load", "split_load_window", "merge_size", "merge_load",
    "merge_window", "capacity", "reserved_throughput", "stats_retention",
    "reserved_read", "reserved_write",
)


_DEFAULT_PARTITION_OPTIONS = {name: getattr(TableOptions(), name) for name in PARTITION_OPTIONS}


def check_partition_options(options: dict) -> dict:
    """Return ``options`` if every name is a partition option; else ParameterInvalid."""
    unknown = sorted(set(options) - set(PARTITION_OPTIONS))
    if unknown:
        raise ParameterInvalid(
            f"unknown table option {unknown[0]!r}; partition options are {', '.join(PARTITION_OPTIONS)}"
        )
    return options


def normalize_ttl(ttl: object) -> object:
    return FOREVER if ttl is None else ttl


DEFAULT_STREAM_RETENTION = 86400  # seconds a change record is kept (24 hours, as Tablestore)
ATTRIBUTE_TYPE_NAMES = ("STRING", "INTEGER", "DOUBLE", "BOOLEAN", "BINARY")
GLOBAL, LOCAL = "GLOBAL", "LOCAL"


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """A secondary index as the base table's catalog entry stores it (see widetable.index).

    ``primary_key`` is the index's whole key: the declared columns followed by
    the base table's remaining key columns; ``declared`` counts the declared ones
    (0 in catalogs of earlier releases: ``declared_key`` works it out). ``start_seq``:
    a global index applies change records after it (earlier writes are backfilled).
    ``building``: its backfill has not finished (a store that stopped in the
    middle of one finishes it when it opens again).
    """

    name: str
    table_id: int
    primary_key: tuple[str, ...]
    defined_columns: tuple[str, ...]
    index_type: str
    created_at: float = 0.0
    start_seq: int = 0
    building: bool = False
    declared: int = 0

    def declared_key(self, base_pk: tuple[str, ...]) -> tuple[str, ...]:
        """The key columns as declared; the rest of ``primary_key`` are the base table's
        key columns (``base_pk``) the index appended. An index of an earlier release's
        catalog (``declared`` 0) declared the shortest prefix after which come exactly
        the base key columns it lacks."""
        if self.declared:
            return self.primary_key[:self.declared]
        key = self.primary_key
        for n in range(1, len(key) + 1):
            if list(key[n:]) == [c for c in base_pk if c not in key[:n]]:
                return key[:n]
        return key

    def to_dict(self) -> dict:
        d = {
            "name": self.name, "table_id": self.table_id, "primary_key": list(self.primary_key),
            "defined_columns": list(self.defined_columns), "index_type": self.index_type,
            "created_at": self.created_at, "start_seq": self.start_seq,
        }
        if self.building:
            d["building"] = True
        if self.declared:
            d["declared"] = self.declared
        return d

    @classmethod
    def from_dict(cls, d: dict) -> IndexSpec:
        declared = d.get("declared", 0)
        return cls(d["name"], d["table_id"], tuple(d["primary_key"]), tuple(d["defined_columns"]),
                   d["index_type"], d.get("created_at", 0.0), d.get("start_seq", 0),
                   d.get("building", False) is True, declared if type(declared) is int else 0)


DEFAULT_FAMILY = "default"  # the one family of a Tablestore-model table
TABLESTORE, BIGTABLE = "tablestore", "bigtable"  # a table's data model


@dataclass(frozen=True, slots=True)
class FamilySchema:
    """A column family as the catalog stores it.

    ``family_id`` names its keyspace: 0 is the default family (rows under 0x10 in the
    engine's default keyspace, Tablestore's row blob); ids from 1 are families of the
    Bigtable model (under 0x11, in the column family of their storage ``profile``).
    ``gc`` is a GC rule in ``widetable.bigtable.gc``'s dict form (None: keep every
    version); ``aggregate`` None or "sum" / "min" / "max" / "hll".
    """

    name: str
    family_id: int
    gc: dict | None = None
    compression: str = "none"
    block_cache: bool = True
    bloom_filter: bool = True
    aggregate: str | None = None

    @property
    def profile(self) -> str:
        """The storage profile (its column family's name) of this family's records."""
        from ..storage.engine import profile_name

        return profile_name(self.compression, self.block_cache, self.bloom_filter)

    def to_dict(self) -> dict:
        d: dict = {"name": self.name, "id": self.family_id}
        if self.family_id:
            d.update(compression=self.compression, block_cache=self.block_cache,
                     bloom_filter=self.bloom_filter)
            if self.gc is not None:
                d["gc"] = self.gc
            if self.aggregate is not None:
                d["aggregate"] = self.aggregate
        return d

    @classmethod
    def from_dict(cls, d: dict) -> FamilySchema:
        return cls(d["name"], d["id"], d.get("gc"), d.get("compression", "none"),
                   d.get("block_cache", True), d.get("bloom_filter", True), d.get("aggregate"))


DEFAULT_FAMILIES = (FamilySchema(DEFAULT_FAMILY, 0),)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """What the catalog stores for a table. ``table_id`` names its keyspace."""

    name: str
    table_id: int
    primary_key: tuple[tuple[str, str], ...]
    options: TableOptions = field(default_factory=TableOptions)
    created_at: float = 0.0
    auto_increment: str | None = None  # the auto-increment key column, if any
    # Typed predefined attribute columns (Tablestore's defined columns): [(name, type)].
    defined_columns: tuple[tuple[str, str], ...] = ()
    stream: bool = False  # change records are readable through the stream API
    stream_retention: int = DEFAULT_STREAM_RETENTION  # seconds
    indexes: tuple[IndexSpec, ...] = ()
    # The change seq the current stream starts after: turning a stream off and on again
    # makes a new stream (another id), whose records are those after this seq.
    stream_since: int = 0
    # Column families (format 2): a Tablestore-model table has the default family alone;
    # a Bigtable-model table (model BIGTABLE) has families with ids from 1.
    families: tuple[FamilySchema, ...] = DEFAULT_FAMILIES
    model: str = TABLESTORE

    def family(self, name: str) -> FamilySchema | None:
        """The family called ``name``, or None."""
        for f in self.families:
            if f.name == name:
                return f
        return None

    @property
    def pk_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.primary_key)

    @property
    def pk_types(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.primary_key)

    def with_options(self, options: TableOptions) -> TableSchema:
        return replace(self, options=options)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "name": self.name,
                "table_id": self.table_id,
                "primary_key": [list(c) for c in self.primary_key],
                "options": self.options.to_dict(),
                "created_at": self.created_at,
                # Written only when set, so older stores' catalogs read the same.
                **({"auto_increment": self.auto_increment} if self.auto_increment else {}),
                **({"defined_columns": [list(c) for c in self.defined_columns]}
                   if self.defined_columns else {}),
                **({"stream": True} if self.stream else {}),
                **({"stream_retention": self.stream_retention}
                   if self.stream_retention != DEFAULT_STREAM_RETENTION else {}),
                **({"indexes": [i.to_dict() for i in self.indexes]} if self.indexes else {}),
                **({"stream_since": self.stream_since} if self.stream_since else {}),
                "families": [f.to_dict() for f in self.families],
                **({"model": self.model} if self.model != TABLESTORE else {}),
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TableSchema:
        d = json.loads(data)
        return cls(
            name=d["name"],
            table_id=d["table_id"],
            primary_key=tuple((n, t) for n, t in d["primary_key"]),
            options=TableOptions(**d["options"]),
            created_at=d.get("created_at", 0.0),
            auto_increment=d.get("auto_increment"),
            defined_columns=tuple((n, t) for n, t in d.get("defined_columns", ())),
            stream=d.get("stream", False),
            stream_retention=d.get("stream_retention", DEFAULT_STREAM_RETENTION),
            indexes=tuple(IndexSpec.from_dict(i) for i in d.get("indexes", ())),
            stream_since=d.get("stream_since", 0),
            # A catalog of format 1 records no families: its table has the default one.
            families=tuple(FamilySchema.from_dict(f) for f in d["families"])
            if "families" in d else DEFAULT_FAMILIES,
            model=d.get("model", TABLESTORE),
        )


def check_primary_key(primary_key: object) -> tuple[tuple[str, str], ...]:
    """Validate a primary-key declaration ``[(name, type), ...]`` of 1-4 columns.

    A column may be declared auto-increment as ``(name, "INTEGER", AUTO_INCREMENT)``
    (or ``"AUTO_INCREMENT"``) or ``(name, AUTO_INCREMENT)``; see
    :func:`check_auto_increment`. The result lists ``(name, type)`` pairs only.
    """
    if not isinstance(primary_key, (list, tuple)) or not 1 <= len(primary_key) <= MAX_PK_COLUMNS:
        raise ParameterInvalid(
            f"primary_key must list 1-{MAX_PK_COLUMNS} (name, type) columns, got "
            f"{describe(primary_key)}"
        )
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in primary_key:
        if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
            raise ParameterInvalid(f"primary key column must be (name, type), got {describe(item)}")
        name, type_ = item[0], item[1]
        if len(item) == 3 and not _is_auto(item[2]):
            raise ParameterInvalid(
                f"primary key column {describe(name)}: the third item must be AUTO_INCREMENT, "
                f"got {describe(item[2])}"
            )
        if type_ is AUTO_INCREMENT:
            type_ = "INTEGER"
        check_name(name, "primary key column name")
        type_name = str(getattr(type_, "value", type_)).upper()
        if type_name not in PK_TYPES:
            raise ParameterInvalid(
                f"primary key column {name!r} has type {describe(type_)}; use one of "
                f"{', '.join(PK_TYPES)}"
            )
        if name in seen:
            raise ParameterInvalid(f"Duplicated primary key name: {name!r}. The column is "
                                   "declared twice")
        seen.add(name)
        out.append((name, type_name))
    return tuple(out)


def _is_auto(option: object) -> bool:
    return option is AUTO_INCREMENT or (
        isinstance(option, str) and option.upper() in ("AUTO_INCREMENT", "PK_AUTO_INCR")
    )


def check_auto_increment(primary_key: object) -> str | None:
    """The auto-increment column of a declaration checked by ``check_primary_key``, or None.

    Tablestore's rules: at most one such column, never the first (partition-key)
    column, and only of type INTEGER. Raises ``OTSParameterInvalid`` otherwise.
    """
    pk = check_primary_key(primary_key)
    items: list = list(primary_key)  # type: ignore[call-overload]
    autos = [
        i for i, item in enumerate(items)
        if item[1] is AUTO_INCREMENT or (len(item) == 3 and _is_auto(item[2]))
    ]
    if not autos:
        return None
    if len(autos) > 1:
        names = [pk[i][0] for i in autos]
        raise ParameterInvalid(f"only one primary key column may be AUTO_INCREMENT, got {names}")
    index = autos[0]
    name, type_ = pk[index]
    if index == 0:
        raise ParameterInvalid(
            f"primary key column {name!r} is the partition key and cannot be AUTO_INCREMENT"
        )
    if type_ != "INTEGER":
        raise ParameterInvalid(
            f"AUTO_INCREMENT column {name!r} must be INTEGER, got {type_}"
        )
    return name


def check_defined_columns(columns: object, primary_key: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Validate predefined columns ``[(name, type), ...]``; types are attribute types."""
    if columns is None:
        return ()
    if not isinstance(columns, (list, tuple)):
        raise ParameterInvalid(f"defined_columns must be a list of (name, type), got {describe(columns)}")
    out: list[tuple[str, str]] = []
    pk_names = {n for n, _ in primary_key}
    for item in columns:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ParameterInvalid(f"defined column must be (name, type), got {describe(item)}")
        name = check_name(item[0], "defined column name")
        type_name = str(getattr(item[1], "value", item[1])).upper()
        if type_name not in ATTRIBUTE_TYPE_NAMES:
            raise ParameterInvalid(
                f"defined column {name!r} has type {describe(item[1])}; use one of "
                f"{', '.join(ATTRIBUTE_TYPE_NAMES)}"
            )
        if name in pk_names or name in {n for n, _ in out}:
            raise ParameterInvalid(f"defined column {name!r} is declared twice or is a primary key column")
        out.append((name, type_name))
    return tuple(out)
