"""The row layout: one RocksDB value per row, holding every cell and version.

Grammar (DO NOT CHANGE: embedded in on-disk data), as a MessagePack array::

    row      := [1, pk, latest, stamps, history]
    pk       := [key-value, ...]                  the primary key, in column order
    latest   := {column: value}                   newest version of each column
    stamps   := timestamp-ms                      one timestamp shared by every latest value
              | {column: timestamp-ms}            or the timestamp of each newest version
    history  := nil | {column: [ts, value, ts, value, ...]}
                                                  older versions, newest first

MessagePack keeps the five attribute types apart (str, int, float, bool, bin),
so a row decodes in one C call (msgspec encodes and decodes it) and a plain read needs no Python loop. The key
is repeated inside the value so range reads never parse key bytes. A row
written in one put shares one timestamp, stored once, which halves decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import msgspec

FORMAT = 1  # DO NOT CHANGE: embedded in on-disk data

# Versions of one column, newest first: [(timestamp, value), ...]
Versions = list[tuple[int, object]]

# One encoder and one typed decoder serve every thread: msgspec keeps no state
# between calls, and both run in C under the GIL. Decoding into the row's
# shape yields the key as a tuple and needs no per-row Python work.
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(
    tuple[int, tuple, dict, Union[int, dict], Union[dict, None]]  # noqa: UP007
)

pack = _encoder.encode
"""MessagePack bytes of a row list (tuples pack as arrays)."""

unpack = _decoder.decode
"""Decode a row blob into ``(FORMAT, pk, latest, stamps, history)``; ``pk`` is a tuple."""


class Projection:
    """Decodes row blobs straight into ``pk + (newest value of each of columns)`` tuples
    (None where a row lacks the column): the row's other columns are skipped unread, and
    its older versions are not decoded. One C call a row, with no dict made. ``columns``
    are distinct names."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        fields = [(f"c{i}", Any, None) for i in range(len(self.columns))]
        # gc=False: the structs hold plain values only and live for one call.
        latest = msgspec.defstruct("Latest", fields, gc=False,
                                   rename={f[0]: c for f, c in zip(fields, self.columns)})
        row = msgspec.defstruct("Row", [("format", int), ("pk", tuple), ("latest", latest),
                                        ("stamps", Any), ("history", msgspec.Raw)],
                                array_like=True, gc=False)
        self._decode = msgspec.msgpack.Decoder(row).decode

    def rows(self, blobs: list[bytes]) -> list[tuple]:
        """One ``pk + values`` tuple per blob, in order."""
        astuple = msgspec.structs.astuple
        return [r.pk + astuple(r.latest) for r in map(self._decode, blobs)]

    def row(self, blob: bytes) -> tuple:
        """The ``pk + values`` tuple of one blob."""
        r = self._decode(blob)
        return r.pk + msgspec.structs.astuple(r.latest)


def encode_latest(pk: tuple | list, latest: dict, stamps: dict | int) -> bytes:
    """Encode a row whose columns hold one version each (``stamps`` may be one shared int)."""
    if type(stamps) is dict:
        stamps = _compact(stamps)
    return pack([FORMAT, pk, latest, stamps, None])


def _compact(stamps: dict) -> dict | int:
    values = set(stamps.values())
    return values.pop() if len(values) == 1 else stamps


def decode_versions(row: list) -> dict[str, Versions]:
    """All versions of every column of a decoded row, newest first."""
    latest, stamps, history = row[2], row[3], row[4]
    out: dict[str, Versions] = {}
    shared = type(stamps) is int
    for name, value in latest.items():
        versions = [(stamps if shared else stamps[name], value)]
        if history:
            older = history.get(name)
            if older:
                versions.extend(zip(older[0::2], older[1::2]))
        out[name] = versions
    return out


def encode_versions(pk: tuple | list, columns: dict[str, Versions]) -> bytes:
    """Encode a row from ``{column: versions newest first}``; empty columns are dropped."""
    latest: dict = {}
    stamps: dict = {}
    history: dict | None = None
    for name, versions in columns.items():
        if not versions:
            continue
        ts, value = versions[0]
        latest[name] = value
        stamps[name] = ts
        if len(versions) > 1:
            if history is None:
                history = {}
            flat: list = []
            for t, v in versions[1:]:
                flat.append(t)
                flat.append(v)
            history[name] = flat
    return pack([FORMAT, pk, latest, _compact(stamps) if stamps else stamps, history])


def merge_version(versions: Versions, ts: int, value: object) -> None:
    """Insert ``(ts, value)`` in place, keeping newest first; a same timestamp is replaced."""
    for i, (t, _) in enumerate(versions):
        if t == ts:
            versions[i] = (ts, value)
            return
        if t < ts:
            versions.insert(i, (ts, value))
            return
    versions.append((ts, value))


def trim(columns: dict[str, Versions], max_versions: int, cutoff_ms: int | None) -> None:
    """Drop versions past ``max_versions`` and those at or before ``cutoff_ms`` (TTL)."""
    for name in list(columns):
        versions = columns[name]
        if cutoff_ms is not None:
            versions = [tv for tv in versions if tv[0] > cutoff_ms]
        if len(versions) > max_versions:
            versions = versions[:max_versions]
        if versions:
            columns[name] = versions
        else:
            del columns[name]
