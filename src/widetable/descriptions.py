"""What ``describe_table`` returns, and checks shared by the embedded API and the client.

A leaf module: it imports nothing that opens a store, so ``widetable.connect``
(``client/``) builds the same descriptions from a server's answer as
``Database.describe_table`` does locally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ParameterInvalid, describe

if TYPE_CHECKING:
    from .partition.manager import PartitionInfo
    from .partition.meta import PartitionEvent
    from .table.schema import TableOptions

MAX_STREAM_RETENTION = (2**31 - 1) * 3600  # Tablestore's protocol carries it as int32 hours


def check_flag(value: object, what: str, optional: bool = False) -> None:
    """ParameterInvalid unless ``value`` is True or False (or None, when ``optional``):
    ``bool("false")`` would be True."""
    if type(value) is not bool and not (optional and value is None):
        raise ParameterInvalid(f"{what} must be True or False, got {describe(value)}")


@dataclass(frozen=True, slots=True)
class LoopState:
    """How a background loop of the store is doing (``describe_table``'s ``background``,
    ``widetable describe``, the server's health endpoint).

    ``name`` is ``"purge"`` (TTL and version garbage collection), ``"maintenance"``
    (partition splits, merges, statistics) or ``"indexer"`` (the global-index applier
    and change-log trimming). ``ok`` is False from an error until a pass works again;
    ``error`` is the last error (type and message), ``error_at`` when it happened
    (unix seconds), ``errors`` how many passes failed since the store opened, and
    ``ok_at`` when a pass last worked. ``running`` is False once the loop has ended
    (the store closing, or off: ``purge_interval=None``)."""

    name: str
    ok: bool = True
    error: str | None = None
    error_at: float | None = None
    errors: int = 0
    ok_at: float | None = None
    running: bool = True


@dataclass(frozen=True, slots=True)
class IndexDescription:
    """One index as ``describe_table`` lists it. ``lag_ms`` is None for a local index.

    ``primary_key`` is the key as declared; ``base_key``, the base table's key columns
    the index appends after it (so each entry is unique): the index's rows are keyed by
    ``primary_key + base_key``."""

    name: str
    index_type: str
    primary_key: tuple[str, ...]
    defined_columns: tuple[str, ...]
    lag_ms: int | None
    behind_retention: bool = False  # a global index whose unapplied records outlived retention
    # A global index's applier state: the last error applying it (None: its last pass
    # worked), when (unix seconds) and how many passes failed. A stuck index keeps its
    # change log from being trimmed: its lag and its error say so.
    error: str | None = None
    error_at: float | None = None
    errors: int = 0
    # Rows the index cannot hold (a key value over the key limits, such as a string
    # over 1 KB): a global index skips them, and counts them here.
    too_long_rows: int = 0
    base_key: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TableDescription:
    name: str
    primary_key: list[tuple[str, str]]
    options: TableOptions
    table_id: int
    created_at: float
    auto_increment: str | None = None  # the auto-increment key column, if any
    partitions: list[PartitionInfo] = field(default_factory=list)  # in key order
    split_history: list[PartitionEvent] = field(default_factory=list)  # oldest first
    defined_columns: list[tuple[str, str]] = field(default_factory=list)  # predefined columns
    stream: bool = False
    stream_retention: int = 86400  # seconds change records are kept
    indexes: list[IndexDescription] = field(default_factory=list)  # with each global one's lag
    stream_id: str | None = None  # the stream's id while ``stream`` is on
    background: list[LoopState] = field(default_factory=list)  # the store's background loops
