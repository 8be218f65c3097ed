"""The stored cells of one row in one family: the value of a 0x11 family key.

Grammar (MessagePack, through msgspec; docs/format.md section 4b)::

    family-blob := [1, columns]                 1 = this layout's version
    columns     := [[qualifier:bin, versions], ...]   qualifiers ascending (bytes order)
    versions    := [[timestamp:int, value:bin], ...]  timestamps descending (micros)

A family with no cell left in a row has no key (its blob is deleted, never empty).
In memory the cells are ``Columns``: ``{qualifier: [(ts, value), ...]}`` newest first.

DO NOT CHANGE: embedded in on-disk data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import msgspec

from .types import Cell

BLOB_VERSION = 1  # DO NOT CHANGE: embedded in on-disk data

Columns = dict[bytes, list[tuple[int, bytes]]]

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode
# the grammar as a type: msgspec builds the (qualifier, versions) and (ts, value) tuples
_decode_typed = msgspec.msgpack.Decoder(  # Literal[1]: BLOB_VERSION
    tuple[Literal[1], list[tuple[bytes, list[tuple[int, bytes]]]]]).decode


def now_micros() -> int:
    """Now in microseconds, at Bigtable's millisecond granularity."""
    return time.time_ns() // 1_000_000 * 1000


def encode_columns(columns: Columns) -> bytes | None:
    """The blob of ``columns`` (None when no cell is left: the key is deleted)."""
    # tuples encode as MessagePack arrays, as lists do: the bytes of the grammar above
    if len(columns) == 1:  # most records: no sort (it costs more than the encoding)
        for item in columns.items():
            return _encode((BLOB_VERSION, (item,))) if item[1] else None
    out = [item for item in sorted(columns.items()) if item[1]]
    return _encode((BLOB_VERSION, out)) if out else None


def decode_columns(blob: bytes | None) -> Columns:
    """The columns of a stored blob (empty for None)."""
    if blob is None:
        return {}
    try:
        return dict(_decode_typed(blob)[1])
    except msgspec.ValidationError as exc:  # not this layout: say which version it has
        version = _decode(blob)[0]
        if version != BLOB_VERSION:
            raise ValueError(f"family blob of version {version}, not {BLOB_VERSION}") from None
        raise ValueError(f"corrupt family blob: {exc}") from None


def collect_garbage(columns: Columns, gc_expired: Callable | None, rule: object, now_micros: int) -> bool:
    """Drop the cells ``rule`` deletes (``gc.gc_expired`` per column, newest first) from
    ``columns`` in place; True if any was dropped."""
    if rule is None or gc_expired is None:
        return False
    dropped = False
    for q in list(columns):
        versions = columns[q]
        expired = gc_expired(rule, [ts for ts, _ in versions], now_micros)
        if any(expired):
            kept = [cell for cell, gone in zip(versions, expired) if not gone]
            dropped = True
            if kept:
                columns[q] = kept
            else:
                del columns[q]
    return dropped


def to_cells(family: str, columns: Columns) -> list[Cell]:
    """``columns`` as cells in row order (qualifier ascending, newest first)."""
    return [Cell(family, q, ts, v) for q in sorted(columns) for ts, v in columns[q]]


def put_cell(columns: Columns, qualifier: bytes, ts: int, value: bytes) -> None:
    """Set the version ``ts`` of a column (replacing one of the same timestamp)."""
    versions = columns.get(qualifier)
    if versions is None:
        columns[qualifier] = [(ts, value)]
        return
    for i, (old, _) in enumerate(versions):
        if old == ts:
            versions[i] = (ts, value)
            return
        if old < ts:
            versions.insert(i, (ts, value))
            return
    versions.append((ts, value))


def delete_versions(columns: Columns, qualifier: bytes, start: int | None, end: int | None) -> None:
    """Delete the versions of a column in ``[start, end)`` (None: unbounded)."""
    versions = columns.get(qualifier)
    if not versions:
        return
    lo = 0 if start is None else start
    kept = [(ts, v) for ts, v in versions if not (ts >= lo and (end is None or ts < end))]
    if kept:
        columns[qualifier] = kept
    else:
        del columns[qualifier]


def blob_size(columns: Columns) -> int:
    """Bytes of qualifiers and values (what Bigtable's row-size limit counts, roughly)."""
    return sum(len(q) + sum(len(v) + 8 for _, v in versions) for q, versions in columns.items())
