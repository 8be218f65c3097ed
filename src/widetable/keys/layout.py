"""The keyspace of a widetable store: every key prefix, in the order the bytes sort.

All keys of one store live in one RocksDB instance. This module is the only
place that builds key bytes (with ``codec``); ``docs/format.md`` is the record.

::

    0x01 name                         catalog: table name -> table schema (JSON)
    0x02 name                         counters: name -> uint64 big-endian
    0x10 table_id:u32 pk-tuple        table rows: one key per row, value = row blob

Prefixes 0x03-0x0F and 0x11-0x1F are reserved for later layers (partition
metadata, change log, statistics, indexes).

DO NOT CHANGE the prefix bytes: embedded in on-disk data.
"""

from __future__ import annotations

from . import codec

CATALOG = b"\x01"  # DO NOT CHANGE: embedded in on-disk data
COUNTERS = b"\x02"  # DO NOT CHANGE: embedded in on-disk data
ROWS = b"\x10"  # DO NOT CHANGE: embedded in on-disk data

MAX_TABLE_ID = 2**32 - 1


def catalog_key(table_name: str) -> bytes:
    return CATALOG + table_name.encode("utf-8")


def catalog_range() -> tuple[bytes, bytes]:
    return CATALOG, codec.prefix_end(CATALOG)


def counter_key(name: str) -> bytes:
    return COUNTERS + name.encode("utf-8")


def table_prefix(table_id: int) -> bytes:
    """The prefix of every row key of table ``table_id``."""
    return ROWS + table_id.to_bytes(4, "big")


def row_key(table_id: int, encoded_pk: bytes) -> bytes:
    return ROWS + table_id.to_bytes(4, "big") + encoded_pk


def table_range(table_id: int) -> tuple[bytes, bytes]:
    """Half-open range ``[start, end)`` holding every row of ``table_id``."""
    prefix = table_prefix(table_id)
    return prefix, codec.prefix_end(prefix)


def pretty(key: bytes) -> str:
    """Render raw key bytes for people, e.g. ``/Table/7/r/"u1"/42``."""
    if not key:
        return "/Min"
    head = key[:1]
    if head == CATALOG:
        return f"/Catalog/{key[1:].decode('utf-8', 'replace')!r}"
    if head == COUNTERS:
        return f"/Counter/{key[1:].decode('utf-8', 'replace')!r}"
    if head == ROWS and len(key) >= 5:
        table_id = int.from_bytes(key[1:5], "big")
        try:
            parts = codec.decode_tuple(key, 5)
        except Exception:
            return f"/Table/{table_id}/r/?{key[5:].hex()}"
        return f"/Table/{table_id}/r" + "".join("/" + _pretty_value(p) for p in parts)
    return "/Raw/" + key.hex()


def _pretty_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return str(value)
