"""What describe_search_index and verify_search_index answer (plain values: the thin client
makes them too)."""

from __future__ import annotations

from dataclasses import dataclass

from .schema import IndexMeta


@dataclass(frozen=True, slots=True)
class SearchIndexDescription:
    """``describe_search_index``: the definition with defaults, and the sync state."""

    meta: IndexMeta
    sync_phase: str  # FULL while backfilling, then INCR
    current_to: int  # ms: every write committed before this is searchable
    lag_ms: int
    row_count: int
    size_bytes: int
    rejected_rows: int
    last_rejected: str | None
    error: str | None = None
    rebuilding: bool = False  # fields are being added: reads use the old index meanwhile


@dataclass(frozen=True, slots=True)
class SearchIndexReport:
    """``verify_search_index``: documents missing, stale or extra against the base table."""

    checked: int
    missing: list
    stale: list
    extra: list
    rejected: list

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.extra)
