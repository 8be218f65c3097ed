"""The store format version: written when a store is made, checked when it opens.

The version lives under ``layout.FORMAT_VERSION_KEY`` (``0x00 "format_version"``,
a uint32 big-endian; see docs/format.md). :func:`check_format` runs before
anything else reads the store:

* an empty store gets ``FORMAT_VERSION``;
* a store of a newer version is refused (``OTSNotSupported``), untouched: this
  release cannot know what the newer one wrote;
* a store of an older version is upgraded by the migration steps in
  ``MIGRATIONS``, one version at a time. Each step writes its changes and the
  next version in one engine batch, so a crash leaves the store at one version
  or the next, never in between. Stores made before the key existed are
  version 0.

To change the format: add a step ``migrate_N_to_N1`` to ``MIGRATIONS``, bump
``FORMAT_VERSION``, test the step on a store of version N, and record it in
docs/format.md.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import NOT_SUPPORTED, WidetableError
from ..keys import layout
from ..table.schema import TableSchema

FORMAT_VERSION = 3  # the format this release writes


def encode_version(version: int) -> bytes:
    return version.to_bytes(4, "big")


def decode_version(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def migrate_0_to_1(engine, batch) -> None:
    """Version 0 (stores made before the format version existed) to 1: the keyspace is
    unchanged; version 1 only records the version, which the caller puts in ``batch``."""


def migrate_1_to_2(engine, batch) -> None:
    """Version 1 to 2 (column families): every catalog entry records its families. A
    table of version 1 has the default family alone, whose rows stay where they are
    (0x10, one blob per row, the engine's default keyspace): only the schemas change."""
    start, end = layout.catalog_range()
    for key, value in engine.scan(start, end):
        schema = TableSchema.from_json(value)  # a format-1 entry reads with the default family
        batch.put(key, schema.to_json())


def migrate_2_to_3(engine, batch) -> None:
    """Version 2 to 3 (index counts, 0x09): every secondary index gets the counts of its
    entries and its count state (``index/counts.py``). A release of format 2 would write
    entries without their counts, so it must not open a store of format 3."""
    from ..index.counts import migrate

    migrate(engine, batch)


# version N -> the step that takes a store from N to N + 1 (adding its changes to the batch)
MIGRATIONS: dict[int, Callable[[object, object], None]] = {
    0: migrate_0_to_1, 1: migrate_1_to_2, 2: migrate_2_to_3}


def _is_empty(engine) -> bool:
    for _ in engine.scan(b"", b"\xff"):
        return False
    return True


def stored_version(engine) -> int | None:
    """The version recorded in the store; None if it records none."""
    raw = engine.get(layout.FORMAT_VERSION_KEY)
    return None if raw is None else decode_version(raw)


def check_format(engine, path: str | None = None) -> int:
    """Bring the store to ``FORMAT_VERSION`` (see the module doc); returns the version it
    had (``FORMAT_VERSION`` for a new store). Raises ``OTSNotSupported`` for a store of
    a newer version, writing nothing."""
    version = stored_version(engine)
    if version is None:
        if _is_empty(engine):
            engine.put(layout.FORMAT_VERSION_KEY, encode_version(FORMAT_VERSION))
            return FORMAT_VERSION
        version = 0
    if version > FORMAT_VERSION:
        where = f"the store at {path!r}" if path else "this store"
        raise WidetableError(
            f"{where} has format version {version}, newer than {FORMAT_VERSION}, the newest "
            f"this release of widetable reads: open it with the release that wrote it or a "
            f"later one", NOT_SUPPORTED)
    had = version
    while version < FORMAT_VERSION:
        batch = engine.batch()
        MIGRATIONS[version](engine, batch)
        version += 1
        batch.put(layout.FORMAT_VERSION_KEY, encode_version(version))
        engine.write(batch)
    return had
