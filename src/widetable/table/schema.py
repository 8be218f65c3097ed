"""Table schemas and options: names, primary-key columns and their types, GC settings."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from ..errors import ParameterInvalid, describe
from ..keys.codec import PK_TYPES

MAX_PK_COLUMNS = 4
DEFAULT_MAX_TIME_DEVIATION = 86400  # seconds, Tablestore's default
FOREVER = -1

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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

    def checked(self) -> TableOptions:
        mv, ttl, dev = self.max_versions, self.ttl, self.max_time_deviation
        if type(mv) is not int or not 1 <= mv <= 2**31 - 1:
            raise ParameterInvalid(f"max_versions must be a positive integer, got {describe(mv)}")
        if type(ttl) is not int or not (ttl == FOREVER or ttl > 0):
            raise ParameterInvalid(f"ttl must be -1 (forever) or seconds > 0, got {describe(ttl)}")
        if type(dev) is not int or dev <= 0:
            raise ParameterInvalid(
                f"max_time_deviation must be seconds > 0, got {describe(dev)}"
            )
        return self

    def to_dict(self) -> dict:
        return {
            "max_versions": self.max_versions,
            "ttl": self.ttl,
            "max_time_deviation": self.max_time_deviation,
        }


def normalize_ttl(ttl: object) -> object:
    return FOREVER if ttl is None else ttl


@dataclass(frozen=True, slots=True)
class TableSchema:
    """What the catalog stores for a table. ``table_id`` names its keyspace."""

    name: str
    table_id: int
    primary_key: tuple[tuple[str, str], ...]
    options: TableOptions = field(default_factory=TableOptions)
    created_at: float = 0.0

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
        )


def check_primary_key(primary_key: object) -> tuple[tuple[str, str], ...]:
    """Validate a primary-key declaration ``[(name, type), ...]`` of 1-4 columns."""
    if not isinstance(primary_key, (list, tuple)) or not 1 <= len(primary_key) <= MAX_PK_COLUMNS:
        raise ParameterInvalid(
            f"primary_key must list 1-{MAX_PK_COLUMNS} (name, type) columns, got "
            f"{describe(primary_key)}"
        )
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in primary_key:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ParameterInvalid(f"primary key column must be (name, type), got {describe(item)}")
        name, type_ = item
        check_name(name, "primary key column name")
        type_name = str(getattr(type_, "value", type_)).upper()
        if type_name not in PK_TYPES:
            raise ParameterInvalid(
                f"primary key column {name!r} has type {describe(type_)}; use one of "
                f"{', '.join(PK_TYPES)}"
            )
        if name in seen:
            raise ParameterInvalid(f"primary key column {name!r} is declared twice")
        seen.add(name)
        out.append((name, type_name))
    return tuple(out)
