"""The keyspace of a widetable store: every key prefix, in the order the bytes sort.

All keys of one store live in one RocksDB instance. This module is the only
place that builds key bytes (with ``codec``); ``docs/format.md`` is the record.

::

    0x00 name                         store metadata: "format_version" -> uint32 big-endian
    0x01 name                         catalog: table name -> table schema (JSON)
    0x02 name                         counters: name -> uint64 big-endian
    0x03 table_id:u32 kind:u8         partitions: 0x00 map + split history, 0x01 samples
    0x04 table_id:u32 bucket:u64      statistics: per-partition counters of one time bucket
    0x05 table_id:u32 pk-element      auto-increment: last value given out -> int64 big-endian
    0x06 table_id:u32 shard:u32 seq:u64  change log: one record per committed write
    0x07 consumer_id:u32 shard:u32    checkpoints: last change-log seq a consumer applied
    0x08 index_id:u32 base-pk-tuple   index refs: the global-index key of one base row
    0x09 index_id:u32 length:u8 prefix  index counts: entries whose first ``length`` key
                                      columns are ``prefix`` -> uint64 big-endian; length 0
                                      (no prefix): the index's count state
    0x0A table_id:u32 name            search indexes: definition (JSON); documents live in tantivy
    0x0B name                         SQL mapping tables: mapping name -> declaration (JSON)
    0x10 table_id:u32 pk-tuple        table rows: one key per row, value = row blob
    0x11 table_id:u32 family_id:u16 pk-tuple  family rows: one key per row and family

Index rows (local and global) are table rows under 0x10 with the index's own
table id from the same counter, so an index reads like a table. A table's default
family (family id 0: every Tablestore-model table has only it) lives under 0x10 in the
engine's default keyspace, exactly as before families existed; every other family
(a Bigtable table's families: ids from 1) under 0x11, in the engine's column family
of that family's storage profile, so a read of one family never reads another's
bytes. Prefixes 0x0C-0x0F and 0x12-0x1F are reserved for later layers. Partition
boundaries are row keys cut after the first primary-key element (``partition_prefix``),
so one partition-key value never spans two partitions.

DO NOT CHANGE the prefix bytes: embedded in on-disk data.
"""

from __future__ import annotations

from . import codec

META = b"\x00"  # DO NOT CHANGE: embedded in on-disk data
CATALOG = b"\x01"  # DO NOT CHANGE: embedded in on-disk data
COUNTERS = b"\x02"  # DO NOT CHANGE: embedded in on-disk data
PARTITIONS = b"\x03"  # DO NOT CHANGE: embedded in on-disk data
STATS = b"\x04"  # DO NOT CHANGE: embedded in on-disk data
AUTO_INCREMENT = b"\x05"  # DO NOT CHANGE: embedded in on-disk data
CHANGE_LOG = b"\x06"  # DO NOT CHANGE: embedded in on-disk data
CHECKPOINTS = b"\x07"  # DO NOT CHANGE: embedded in on-disk data
INDEX_REFS = b"\x08"  # DO NOT CHANGE: embedded in on-disk data
INDEX_COUNTS = b"\x09"  # DO NOT CHANGE: embedded in on-disk data
SEARCH_INDEXES = b"\x0a"  # DO NOT CHANGE: embedded in on-disk data
SQL_MAPPINGS = b"\x0b"  # DO NOT CHANGE: embedded in on-disk data
ROWS = b"\x10"  # DO NOT CHANGE: embedded in on-disk data
FAMILY_ROWS = b"\x11"  # DO NOT CHANGE: embedded in on-disk data

PARTITION_MAP = 0  # DO NOT CHANGE: kind byte of the partition map record
PARTITION_SAMPLES = 1  # DO NOT CHANGE: kind byte of the key-sample record

MAX_TABLE_ID = 2**32 - 1
ROW_PK_OFFSET = 5  # len(ROWS + table id): a row key's encoded primary key starts here
DEFAULT_FAMILY_ID = 0  # a table's default family: its rows are the 0x10 rows
MAX_FAMILY_ID = 2**16 - 1
FAMILY_PK_OFFSET = 7  # len(FAMILY_ROWS + table id + family id)


def meta_key(name: str) -> bytes:
    """A store-wide metadata record, e.g. ``meta_key("format_version")``."""
    return META + name.encode("utf-8")


FORMAT_VERSION_KEY = META + b"format_version"  # DO NOT CHANGE: read before anything else


def catalog_key(table_name: str) -> bytes:
    return CATALOG + table_name.encode("utf-8")


def catalog_range() -> tuple[bytes, bytes]:
    return CATALOG, codec.prefix_end(CATALOG)


def counter_key(name: str) -> bytes:
    return COUNTERS + name.encode("utf-8")


def partition_key(table_id: int, kind: int) -> bytes:
    """The partition metadata record ``kind`` (PARTITION_MAP or PARTITION_SAMPLES) of a table."""
    return PARTITIONS + table_id.to_bytes(4, "big") + bytes([kind])


def partition_range(table_id: int) -> tuple[bytes, bytes]:
    """Half-open range of every partition metadata record of ``table_id``."""
    prefix = PARTITIONS + table_id.to_bytes(4, "big")
    return prefix, codec.prefix_end(prefix)


def stats_key(table_id: int, bucket: int) -> bytes:
    """Statistics of ``table_id`` for the bucket starting at unix second ``bucket``."""
    return STATS + table_id.to_bytes(4, "big") + bucket.to_bytes(8, "big")


def stats_range(table_id: int, since: int = 0, until: int | None = None) -> tuple[bytes, bytes]:
    """Half-open range of stats buckets of ``table_id`` starting in ``[since, until)`` seconds."""
    prefix = STATS + table_id.to_bytes(4, "big")
    end = codec.prefix_end(prefix) if until is None else prefix + max(until, 0).to_bytes(8, "big")
    return prefix + max(since, 0).to_bytes(8, "big"), end


def auto_increment_key(table_id: int, encoded_partition_value: bytes) -> bytes:
    """The auto-increment counter of one partition-key value (an encoded key element)."""
    return AUTO_INCREMENT + table_id.to_bytes(4, "big") + encoded_partition_value


def auto_increment_range(table_id: int) -> tuple[bytes, bytes]:
    """Half-open range of every auto-increment counter of ``table_id``."""
    prefix = AUTO_INCREMENT + table_id.to_bytes(4, "big")
    return prefix, codec.prefix_end(prefix)


def _successor(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix``, for prefixes that end in
    fixed-width integers (whose next byte may be 0xFF, so ``prefix + 0xFF`` would cut
    keys off): the prefix, trailing 0xFF bytes dropped, plus one."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def change_log_prefix(table_id: int) -> bytes:
    """The prefix of every change record of ``table_id``."""
    return CHANGE_LOG + table_id.to_bytes(4, "big")


def change_log_key(table_id: int, shard: int, seq: int) -> bytes:
    """The change record ``seq`` of shard (partition id) ``shard`` of ``table_id``."""
    return CHANGE_LOG + table_id.to_bytes(4, "big") + shard.to_bytes(4, "big") + seq.to_bytes(8, "big")


def change_log_encoder(table_id: int):
    """``encode(shard, seq) -> change_log_key(table_id, shard, seq)``, with the table's
    prefix made once: the write path of a logged table calls it per record."""
    prefix = change_log_prefix(table_id)

    def encode(shard: int, seq: int) -> bytes:
        return prefix + shard.to_bytes(4, "big") + seq.to_bytes(8, "big")

    return encode


def change_log_range(table_id: int, shard: int | None = None, after: int = -1) -> tuple[bytes, bytes]:
    """Half-open range of the change records of ``table_id`` (one ``shard``: those with seq > ``after``)."""
    prefix = CHANGE_LOG + table_id.to_bytes(4, "big")
    if shard is None:
        return prefix, _successor(prefix)
    prefix += shard.to_bytes(4, "big")
    return prefix + (after + 1).to_bytes(8, "big"), _successor(prefix)


def change_log_shards_from(table_id: int, shard: int) -> tuple[bytes, bytes]:
    """Half-open range of the change records of ``table_id`` in shards ``>= shard``."""
    prefix = CHANGE_LOG + table_id.to_bytes(4, "big")
    return prefix + shard.to_bytes(4, "big"), _successor(prefix)


def decode_change_log_key(key: bytes) -> tuple[int, int, int]:
    """``(table_id, shard, seq)`` of a change-log key."""
    return (int.from_bytes(key[1:5], "big"), int.from_bytes(key[5:9], "big"),
            int.from_bytes(key[9:17], "big"))


def change_log_seq(key: bytes) -> int:
    """The seq of a change-log key."""
    return int.from_bytes(key[9:17], "big")


def change_log_shard(key: bytes) -> int:
    """The shard of a change-log key."""
    return int.from_bytes(key[5:9], "big")


def checkpoint_key(consumer_id: int, shard: int) -> bytes:
    """The last change-log seq of ``shard`` that consumer ``consumer_id`` (an index id) applied."""
    return CHECKPOINTS + consumer_id.to_bytes(4, "big") + shard.to_bytes(4, "big")


def checkpoint_range(consumer_id: int) -> tuple[bytes, bytes]:
    """Half-open range of every checkpoint of ``consumer_id``."""
    prefix = CHECKPOINTS + consumer_id.to_bytes(4, "big")
    return prefix, _successor(prefix)


def decode_checkpoint_key(key: bytes) -> tuple[int, int]:
    """``(consumer_id, shard)`` of a checkpoint key."""
    return int.from_bytes(key[1:5], "big"), int.from_bytes(key[5:9], "big")


def index_ref_key(index_id: int, encoded_base_pk: bytes) -> bytes:
    """Where a global index records the index key it holds for one base row."""
    return INDEX_REFS + index_id.to_bytes(4, "big") + encoded_base_pk


def index_ref_keys(index_id: int, base_row_keys: list[bytes]) -> list[bytes]:
    """The index refs of base rows given by their row keys (``row_key``): one pass."""
    head = INDEX_REFS + index_id.to_bytes(4, "big")
    return [head + k[ROW_PK_OFFSET:] for k in base_row_keys]


def index_ref_range(index_id: int) -> tuple[bytes, bytes]:
    prefix = INDEX_REFS + index_id.to_bytes(4, "big")
    return prefix, codec.prefix_end(prefix)


def index_count_key(index_id: int, length: int, encoded_prefix: bytes) -> bytes:
    """The count of index ``index_id``'s entries whose first ``length`` (1-255) key columns
    encode to ``encoded_prefix`` (a tuple of ``length`` elements)."""
    return index_count_head(index_id, length) + encoded_prefix


def index_count_head(index_id: int, length: int) -> bytes:
    """What every count key of ``index_id`` of prefixes of ``length`` columns starts with
    (``index_count_key`` is it plus the encoded prefix)."""
    return INDEX_COUNTS + index_id.to_bytes(4, "big") + bytes((length,))


def index_count_state_key(index_id: int) -> bytes:
    """The count state of index ``index_id`` (what is counted, and how writers count)."""
    return INDEX_COUNTS + index_id.to_bytes(4, "big") + b"\x00"


def index_count_range(index_id: int) -> tuple[bytes, bytes]:
    """Half-open range of every count of index ``index_id``, and its count state."""
    prefix = INDEX_COUNTS + index_id.to_bytes(4, "big")
    return prefix, _successor(prefix)


def index_counts_of_length(index_id: int, length: int) -> tuple[bytes, bytes]:
    """Half-open range of the counts of index ``index_id`` of prefixes of ``length`` columns."""
    prefix = INDEX_COUNTS + index_id.to_bytes(4, "big") + bytes((length,))
    return prefix, _successor(prefix)


def decode_index_count_key(key: bytes) -> tuple[int, int, tuple]:
    """``(index_id, length, prefix tuple)`` of an index count key."""
    return int.from_bytes(key[1:5], "big"), key[5], codec.decode_tuple(key, 6)


def index_count_keys(index_id: int, lengths: tuple[int, ...], entry_key: bytes) -> list[bytes]:
    """The count keys an index entry (its row key, ``0x10 index_id tuple``) adds to: one per
    prefix length in ``lengths`` (ascending, each at most the key's columns): the key cut
    after that many elements (``codec``'s grammar: an INTEGER is 9 bytes, a STRING or
    BINARY ends at its first 0x00 not followed by 0xFF)."""
    return list(index_count_keyer(index_id, lengths)(entry_key))


def index_count_keyer(index_id: int, lengths: tuple[int, ...]):
    """``keys(entry_key)``: ``index_count_keys(index_id, lengths, entry_key)``, with the
    heads made once and the usual case (one length, 1) on its own path: writers call it
    per entry."""
    head = INDEX_COUNTS + index_id.to_bytes(4, "big")
    integer = codec.CODE_INTEGER
    if lengths != (1,):
        heads = [head + bytes((k,)) if k in lengths else None for k in range(1, lengths[-1] + 1)]

        def keys(entry_key: bytes) -> list[bytes]:
            out, pos = [], ROW_PK_OFFSET
            for h in heads:  # each element's end, up to the longest prefix
                if entry_key[pos] == integer:
                    pos += 9
                else:
                    pos = entry_key.index(b"\x00", pos + 1)
                    while entry_key[pos + 1:pos + 2] == b"\xff":
                        pos = entry_key.index(b"\x00", pos + 2)
                    pos += 1
                if h is not None:
                    out.append(h + entry_key[ROW_PK_OFFSET:pos])
            return out
        return keys
    one = head + b"\x01"

    def first(entry_key: bytes) -> tuple[bytes]:
        if entry_key[ROW_PK_OFFSET] == integer:
            return (one + entry_key[ROW_PK_OFFSET:ROW_PK_OFFSET + 9],)
        end = entry_key.index(b"\x00", ROW_PK_OFFSET + 1)
        while entry_key[end + 1:end + 2] == b"\xff":
            end = entry_key.index(b"\x00", end + 2)
        return (one + entry_key[ROW_PK_OFFSET:end + 1],)
    return first


def search_index_key(table_id: int, name: str) -> bytes:
    """Where the catalog keeps the definition of search index ``name`` of a table."""
    return SEARCH_INDEXES + table_id.to_bytes(4, "big") + name.encode("utf-8")


def search_index_range(table_id: int | None = None) -> tuple[bytes, bytes]:
    prefix = SEARCH_INDEXES if table_id is None else SEARCH_INDEXES + table_id.to_bytes(4, "big")
    return prefix, codec.prefix_end(prefix)


def sql_mapping_key(name: str) -> bytes:
    """Where the SQL layer keeps the declaration of mapping table ``name``."""
    return SQL_MAPPINGS + name.encode("utf-8")


def sql_mapping_range() -> tuple[bytes, bytes]:
    return SQL_MAPPINGS, codec.prefix_end(SQL_MAPPINGS)


def partition_prefix(row_key: bytes) -> bytes:
    """``row_key`` cut after its first primary-key element: the key's partition-key prefix.

    Every row with the same partition-key value has the same prefix, so a
    boundary of this form never splits one partition-key value.
    """
    pos = 5  # ROWS + table id
    code = row_key[pos]
    if code == codec.CODE_INTEGER:
        return row_key[: pos + 9]
    end = pos + 1
    while True:
        end = row_key.index(b"\x00", end)
        if row_key[end + 1 : end + 2] != b"\xff":
            return row_key[: end + 1]
        end += 2


def table_prefix(table_id: int) -> bytes:
    """The prefix of every row key of table ``table_id``."""
    return ROWS + table_id.to_bytes(4, "big")


def row_key(table_id: int, encoded_pk: bytes) -> bytes:
    return ROWS + table_id.to_bytes(4, "big") + encoded_pk


def decode_row_pk(key: bytes) -> tuple:
    """The primary-key tuple of a row key."""
    return codec.decode_tuple(key, ROW_PK_OFFSET)


def table_range(table_id: int) -> tuple[bytes, bytes]:
    """Half-open range ``[start, end)`` holding every row of ``table_id``."""
    prefix = table_prefix(table_id)
    return prefix, codec.prefix_end(prefix)


def family_prefix(table_id: int, family_id: int) -> bytes:
    """The prefix of every key of family ``family_id`` (>= 1) of table ``table_id``."""
    return FAMILY_ROWS + table_id.to_bytes(4, "big") + family_id.to_bytes(2, "big")


def family_row_key(table_id: int, family_id: int, encoded_pk: bytes) -> bytes:
    """The key of one row's cells of family ``family_id`` (>= 1)."""
    return FAMILY_ROWS + table_id.to_bytes(4, "big") + family_id.to_bytes(2, "big") + encoded_pk


def family_key_of(row_key_: bytes, family_id: int) -> bytes:
    """The family key of the row whose 0x10 row key is ``row_key_``."""
    return FAMILY_ROWS + row_key_[1:5] + family_id.to_bytes(2, "big") + row_key_[ROW_PK_OFFSET:]


def family_keys_of(row_keys: list[bytes], family_ids: list[int]) -> list[bytes]:
    """``family_key_of`` of each pair of ``row_keys`` and ``family_ids`` (one pass: a
    bulk write's records)."""
    return [FAMILY_ROWS + rk[1:5] + fid.to_bytes(2, "big") + rk[ROW_PK_OFFSET:]
            for rk, fid in zip(row_keys, family_ids)]


def row_key_of_family_key(key: bytes) -> bytes:
    """The 0x10 row key of the row a family key belongs to (what partitions route)."""
    return ROWS + key[1:5] + key[FAMILY_PK_OFFSET:]


def family_range(table_id: int, family_id: int | None = None) -> tuple[bytes, bytes]:
    """Half-open range of family ``family_id`` of ``table_id``, or of all its families."""
    if family_id is None:
        prefix = FAMILY_ROWS + table_id.to_bytes(4, "big")
        return prefix, _successor(prefix)
    prefix = family_prefix(table_id, family_id)
    return prefix, _successor(prefix)


def family_bounds(table_id: int, family_id: int, lo: bytes, hi: bytes) -> tuple[bytes, bytes]:
    """The family range of the rows in ``[lo, hi)``, given as 0x10 row keys (or the
    table's ``table_range`` bounds)."""
    prefix = family_prefix(table_id, family_id)
    start = prefix + lo[ROW_PK_OFFSET:]
    end = prefix + hi[ROW_PK_OFFSET:] if len(hi) > ROW_PK_OFFSET else _successor(prefix)
    return start, end


def decode_family_key(key: bytes) -> tuple[int, int, tuple]:
    """``(table_id, family_id, pk tuple)`` of a family key."""
    return (int.from_bytes(key[1:5], "big"), int.from_bytes(key[5:7], "big"),
            codec.decode_tuple(key, FAMILY_PK_OFFSET))


# -- Bigtable row keys ---------------------------------------------------------------
# A Bigtable table's primary key is one BINARY column: its row keys are 0x10 keys of that
# 1-tuple (codec's BINARY element), without the Tablestore 1 KB limit (Bigtable's is
# 4 KB, checked above this layer). Byte order of the keys = byte order of the row keys.


def encode_bigtable_key(key: bytes) -> bytes:
    """The encoded 1-tuple ``(key,)`` (codec's BINARY element) of any length."""
    return bytes((codec.CODE_BINARY,)) + key.replace(b"\x00", b"\x00\xff") + b"\x00"


def bigtable_row_key(table_id: int, key: bytes) -> bytes:
    """The 0x10 row key of Bigtable row ``key`` (partitions route it; the row's cells are
    under ``family_key_of(row_key, family_id)``)."""
    return ROWS + table_id.to_bytes(4, "big") + encode_bigtable_key(key)


def bigtable_row_keys(table_id: int, keys: list[bytes]) -> list[bytes]:
    """``bigtable_row_key`` of each of ``keys`` (one pass: a bulk write's rows)."""
    head = ROWS + table_id.to_bytes(4, "big") + bytes((codec.CODE_BINARY,))
    return [head + key.replace(b"\x00", b"\x00\xff") + b"\x00" for key in keys]


def decode_bigtable_row_key(key: bytes, offset: int = ROW_PK_OFFSET) -> bytes:
    """The Bigtable row key of a 0x10 row key (``offset`` FAMILY_PK_OFFSET: of a family key)."""
    return codec.decode_tuple(key, offset)[0]  # type: ignore[return-value]


def bigtable_range(table_id: int, start: bytes | None, end: bytes | None,
                   start_inclusive: bool = True, end_inclusive: bool = False) -> tuple[bytes, bytes]:
    """Half-open 0x10 row-key bounds ``[lo, hi)`` of the Bigtable rows in a row range
    (None: unbounded). An exclusive start or inclusive end appends 0x00 to the encoded
    key: no other encoded key lies between the two."""
    prefix = table_prefix(table_id)
    lo = prefix if start is None else prefix + encode_bigtable_key(start) + (
        b"" if start_inclusive else b"\x00")
    hi = codec.prefix_end(prefix) if end is None else prefix + encode_bigtable_key(end) + (
        b"\x00" if end_inclusive else b"")
    return lo, hi


def bigtable_prefix_range(table_id: int, key_prefix: bytes) -> tuple[bytes, bytes]:
    """Half-open 0x10 row-key bounds of every Bigtable row whose key starts with ``key_prefix``
    (non-empty): the escaped prefix, without the terminator, and its successor."""
    lo = table_prefix(table_id) + bytes((codec.CODE_BINARY,)) + key_prefix.replace(
        b"\x00", b"\x00\xff")
    return lo, _successor(lo)


def pretty(key: bytes) -> str:
    """Render raw key bytes for people, e.g. ``/Table/7/r/"u1"/42``."""
    if not key:
        return "/Min"
    head = key[:1]
    if head == META:
        return f"/Meta/{key[1:].decode('utf-8', 'replace')!r}"
    if head == CATALOG:
        return f"/Catalog/{key[1:].decode('utf-8', 'replace')!r}"
    if head == COUNTERS:
        return f"/Counter/{key[1:].decode('utf-8', 'replace')!r}"
    if head == PARTITIONS and len(key) == 6:
        kind = {PARTITION_MAP: "map", PARTITION_SAMPLES: "samples"}.get(key[5], f"?{key[5]}")
        return f"/Partitions/{int.from_bytes(key[1:5], 'big')}/{kind}"
    if head == STATS and len(key) == 13:
        return f"/Stats/{int.from_bytes(key[1:5], 'big')}/{int.from_bytes(key[5:13], 'big')}"
    if head == AUTO_INCREMENT and len(key) > 5:
        try:
            parts = codec.decode_tuple(key, 5)
        except Exception:
            parts = ("?" + key[5:].hex(),)
        return f"/AutoIncrement/{int.from_bytes(key[1:5], 'big')}/" + _pretty_value(parts[0])
    if head == CHANGE_LOG and len(key) == 17:
        table_id, shard, seq = decode_change_log_key(key)
        return f"/ChangeLog/{table_id}/{shard}/{seq}"
    if head == CHECKPOINTS and len(key) == 9:
        return f"/Checkpoint/{int.from_bytes(key[1:5], 'big')}/{int.from_bytes(key[5:9], 'big')}"
    if head == INDEX_REFS and len(key) > 5:
        try:
            parts = codec.decode_tuple(key, 5)
        except Exception:
            return f"/IndexRef/{int.from_bytes(key[1:5], 'big')}/?{key[5:].hex()}"
        return f"/IndexRef/{int.from_bytes(key[1:5], 'big')}" + "".join("/" + _pretty_value(p) for p in parts)
    if head == INDEX_COUNTS and len(key) >= 6:
        index_id, length = int.from_bytes(key[1:5], "big"), key[5]
        if length == 0:
            return f"/IndexCount/{index_id}/state" + ("" if len(key) == 6 else f"/?{key[6:].hex()}")
        try:
            parts = codec.decode_tuple(key, 6)
        except Exception:
            return f"/IndexCount/{index_id}/{length}/?{key[6:].hex()}"
        return f"/IndexCount/{index_id}/{length}" + "".join("/" + _pretty_value(p) for p in parts)
    if head == SEARCH_INDEXES and len(key) > 5:
        return f"/SearchIndex/{int.from_bytes(key[1:5], 'big')}/{key[5:].decode('utf-8', 'replace')!r}"
    if head == SQL_MAPPINGS:
        return f"/SQLMapping/{key[1:].decode('utf-8', 'replace')!r}"
    if head == ROWS and len(key) >= 5:
        table_id = int.from_bytes(key[1:5], "big")
        try:
            parts = codec.decode_tuple(key, 5)
        except Exception:
            return f"/Table/{table_id}/r/?{key[5:].hex()}"
        return f"/Table/{table_id}/r" + "".join("/" + _pretty_value(p) for p in parts)
    if head == FAMILY_ROWS and len(key) >= FAMILY_PK_OFFSET:
        table_id, family_id = int.from_bytes(key[1:5], "big"), int.from_bytes(key[5:7], "big")
        try:
            parts = codec.decode_tuple(key, FAMILY_PK_OFFSET)
        except Exception:
            return f"/Table/{table_id}/f/{family_id}/?{key[FAMILY_PK_OFFSET:].hex()}"
        return f"/Table/{table_id}/f/{family_id}" + "".join("/" + _pretty_value(p) for p in parts)
    return "/Raw/" + key.hex()


def _pretty_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return str(value)
