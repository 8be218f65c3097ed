"""The RocksDB engine, on rocksdict in raw-bytes mode. The only module that imports rocksdict.

Every exception rocksdict raises leaves this module as a ``StorageError`` (a
``WidetableError``) whose ``kind`` and Tablestore code say what failed: see
``storage_error``.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from functools import partial
from itertools import chain

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    DbClosedError,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from ..errors import StorageError
from . import DEFAULT_CACHE_MB
from .engine import parse_profile

# RocksDB's status names (the start of its messages) -> StorageError kinds.
_KINDS = (
    ("IO error", "io"),
    ("Corruption", "corruption"),
    ("Resource busy", "busy"),
    ("Busy", "busy"),
    ("Operation aborted", "busy"),
    ("Operation timed out", "busy"),
    ("TimedOut", "busy"),
    ("Operation failed. Try again.", "busy"),
    ("TryAgain", "busy"),
)


def storage_error(exc: BaseException, what: str) -> StorageError:
    """The ``StorageError`` for an exception rocksdict raised while doing ``what``.

    A closed store is ``"closed"`` (``OTSServerUnavailable``); RocksDB's Busy,
    TimedOut and TryAgain are ``"busy"`` (``OTSServerBusy``, retried by retriers);
    an I/O error (a full or failing disk) is ``"io"`` and a checksum or format
    failure ``"corruption"``, both ``OTSInternalServerError``, as is anything else."""
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    if isinstance(exc, DbClosedError):
        return StorageError(f"the store is closed ({what}): {text}", kind="closed")
    kind = next((k for prefix, k in _KINDS if text.startswith(prefix) or f" {prefix}" in text[:40]),
                "other")
    return StorageError(f"storage engine error ({what}): {text}", kind=kind)


def _holding(items, opts: ReadOptions, end: bytes) -> Iterator:
    """``items`` chained to an empty tail that keeps ``opts`` and its upper bound alive
    until the iteration ends: rocksdict does not, and an iterator whose bound was freed
    stops early (seen under threads). A chain, not a generator around ``items``: each
    row then costs no Python frame (~30 ns of ~220 per 100-byte value, measured). An
    error of the engine's in mid-scan (corruption, I/O; a closed store's open iterators
    keep reading) leaves as rocksdict raised it; opening the scan maps it."""
    return chain(items, _tail(opts, end))


def _tail(opts: ReadOptions, end: bytes) -> Iterator:
    del opts, end  # referenced by the frame until the chain reaches it
    return
    yield


BLOOM_BITS = 10  # per key: about 1% false positives, ~1.2 bytes a key
BLOCK_SIZE = 16 * 1024  # bytes of a table file's data block, before compression


def rocks_options(cache_mb: int = DEFAULT_CACHE_MB, cache: Cache | None = None) -> Options:
    """The options a store opens with (its default column family).

    * A block cache of ``cache_mb`` MB (LRU; filled only as blocks are read, so a
      small store stays small). RocksDB's own default is 32 MB: a store larger
      than that decompresses a block from the OS cache on most reads (8 against
      4 µs per read measured on 100 MB of 1 KB rows). 0 turns the cache off.
      ``cache``: that cache, made by the caller to share it with column families.
    * A bloom filter of ``BLOOM_BITS`` bits per key in every table file, so a
      point read skips the files that do not hold its key (and a read of a
      missing row, most of them); and one over the memtable's whole keys (2% of
      its size), so a read of a row that is not in the memtable skips searching
      its skip list (5.5 to 4.5 µs per read with 20,000 recent writes there).
    * Data blocks of ``BLOCK_SIZE`` (16 KB; RocksDB's default is 4 KB, HBase's and
      Bigtable's 64 KB). A range read visits a quarter as many blocks: a 51-row page of
      1 KB rows took 32 against 49 µs with its blocks cached, and 79 against 113 µs
      with them mostly outside the cache. The cost is a larger block to search per
      point read: 4.5 against 4.1 µs cached, and more to read and decompress
      uncached, 30-60% more per read on 100 MB of 1 KB rows through an 8 MB cache
      (64 KB blocks there: 3 times as much). Table files written with another
      size stay readable.
    * Two background jobs for flushes and compactions.
    """
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.increase_parallelism(2)
    opts.set_memtable_whole_key_filtering(True)
    opts.set_memtable_prefix_bloom_ratio(0.02)
    if cache is None and cache_mb:
        cache = Cache(cache_mb * 2**20)
    opts.set_block_based_table_factory(_table_options(cache, True))
    return opts


def _table_options(cache: Cache | None, bloom: bool) -> BlockBasedOptions:
    table = BlockBasedOptions()
    if cache is not None:
        table.set_block_cache(cache)
    else:
        table.disable_cache()
    if bloom:
        table.set_bloom_filter(BLOOM_BITS, False)
    table.set_block_size(BLOCK_SIZE)
    return table


_COMPRESSION = {"none": DBCompressionType.none, "lz4": DBCompressionType.lz4,
                "zstd": DBCompressionType.zstd}


def family_options(profile: str, cache: Cache | None) -> Options:
    """The options of the column family of storage ``profile`` (``engine.profile_name``):
    its compression at every level, the store's shared block ``cache`` or none (a cold
    family's blocks then never push a hot family's out), a bloom filter or none."""
    compression, block_cache, bloom = parse_profile(profile)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_compression_type(_COMPRESSION[compression]())
    opts.set_bottommost_compression_type(_COMPRESSION[compression]())
    if bloom:
        opts.set_memtable_whole_key_filtering(True)
        opts.set_memtable_prefix_bloom_ratio(0.02)
    opts.set_block_based_table_factory(_table_options(cache if block_cache else None, bloom))
    return opts


def _scan(db: Rdict, start: bytes, end: bytes, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    opts = ReadOptions()
    opts.set_iterate_upper_bound(end)
    try:
        if not reverse:
            return _holding(db.items(from_key=start, read_opt=opts), opts, end)
        items = db.items(backwards=True, from_key=end, read_opt=opts)
    except Exception as exc:
        raise storage_error(exc, "scan") from exc
    return _holding(_scan_reverse(start, end, items), opts, end)


def _scan_reverse(start: bytes, end: bytes, items) -> Iterator[tuple[bytes, bytes]]:
    # rocksdict ignores iterate_lower_bound, so the lower end is checked here.
    for key, value in items:
        if key < start:
            return
        if key >= end:
            continue
        yield key, value


def _values(db: Rdict, start: bytes, end: bytes) -> Iterator[bytes]:
    opts = ReadOptions()
    opts.set_iterate_upper_bound(end)
    try:
        return _holding(db.values(from_key=start, read_opt=opts), opts, end)
    except Exception as exc:
        raise storage_error(exc, "scan") from exc


class _Reads:
    """Reads by key and range over ``self._db`` (a store or one of its column families).

    Every call maps rocksdict's exceptions to StorageError (storage_error). A try block
    costs nothing until it catches; the frame around the C call costs ~20 ns."""

    _db: Rdict

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._db.get(key)
        except Exception as exc:
            raise storage_error(exc, "get") from exc

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        try:
            return self._db.get(keys)
        except Exception as exc:
            raise storage_error(exc, "get") from exc

    def scan(self, start: bytes, end: bytes, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return _scan(self._db, start, end, reverse)

    def values(self, start: bytes, end: bytes) -> Iterator[bytes]:
        """The values of a forward ``scan``: rocksdict then makes no key objects nor pairs
        (a third less per row read, measured on pages of 1 KB rows)."""
        return _values(self._db, start, end)


class RocksFamily(_Reads):
    """One RocksDB column family of a store (a storage profile): reads by key and range;
    writes go through the store's batches with ``handle`` (``batch.put(k, v, handle)``),
    so one batch stays atomic across families."""

    def __init__(self, name: str, db: Rdict, handle) -> None:
        self.name = name
        self._db = db
        self.handle = handle

    def close(self) -> None:
        self.handle = None
        try:
            self._db.close()
        except Exception:  # noqa: BLE001 - closing a view of a store that closes next
            pass


class RocksEngine(_Reads):
    """One RocksDB instance per store.

    ``sync=True`` fsyncs the write-ahead log on every write, for power-loss
    durability. Without it an acknowledged write is in the WAL in the OS page
    cache, which survives ``kill -9`` of the process but not a power cut.
    ``cache_mb``: the block cache (``rocks_options``).
    """

    def __init__(self, path: str, sync: bool = False, cache_mb: int = DEFAULT_CACHE_MB,
                 statistics: bool = False) -> None:
        os.makedirs(path, exist_ok=True)
        # One block cache for the default column family and every family profile that
        # keeps one: a family with the cache off leaves it to the others.
        self._cache = Cache(cache_mb * 2**20) if cache_mb else None
        self._options = rocks_options(cache_mb, self._cache)
        if statistics:  # tickers for benchmarks (block cache hits and misses); costs a little
            self._options.enable_statistics()
        self._families: dict[str, RocksFamily] = {}
        try:
            existing = [n for n in Rdict.list_cf(path) if n != "default"] \
                if os.path.exists(os.path.join(path, "CURRENT")) else []
            column_families = {n: family_options(n, self._cache) for n in existing}
            self._db = Rdict(path, self._options, column_families=column_families or None)
            for name in existing:
                self._families[name] = RocksFamily(
                    name, self._db.get_column_family(name), self._db.get_column_family_handle(name))
        except Exception as exc:  # a second open of the same directory, a corrupt store, ...
            err = storage_error(exc, "open")
            raise StorageError(f"cannot open store at {path!r}: {exc}", kind=err.kind) from exc
        self.path = path
        self._write_opts = WriteOptions()
        self._write_opts.sync = sync
        self._db.set_write_options(self._write_opts)
        # ``WriteBatch(True)`` is raw mode; the positional form skips keyword parsing, a
        # tenth of what a batch costs to make.
        self.batch = partial(WriteBatch, True)
        self._closed = False
        self._lock = threading.Lock()

    def column_family(self, profile: str) -> RocksFamily:
        """The column family of storage ``profile`` (``engine.profile_name``), created
        with that profile's options on first use; it persists in the store."""
        family = self._families.get(profile)
        if family is not None:
            return family
        parse_profile(profile)  # refuses a name that is no profile
        with self._lock:
            family = self._families.get(profile)
            if family is None:
                try:
                    db = self._db.create_column_family(profile, family_options(profile, self._cache))
                    family = RocksFamily(profile, db, self._db.get_column_family_handle(profile))
                except Exception as exc:
                    raise storage_error(exc, "create column family") from exc
                self._families[profile] = family
        return family

    def column_families(self) -> list[str]:
        """The profiles whose column families exist in this store."""
        return sorted(self._families)

    def cache_stats(self) -> dict[str, int]:
        """Block cache tickers (``rocksdb.block.cache.hit`` / ``.miss``, and the data-block
        ones) when opened with ``statistics=True``; otherwise empty. Usage in bytes too."""
        out: dict[str, int] = {}
        if self._cache is not None:
            out["usage"] = self._cache.get_usage()
        text = self._options.get_statistics() or ""
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0].startswith("rocksdb.block.cache.") and parts[2] == ":" \
                    and parts[1] == "COUNT":
                out[parts[0][len("rocksdb.block.cache."):]] = int(parts[3])
        return out

    # Reads (get, multi_get, scan, values) are _Reads'.

    def write(self, batch: WriteBatch) -> None:
        try:
            self._db.write(batch)
        except Exception as exc:
            raise storage_error(exc, "write") from exc

    def put(self, key: bytes, value: bytes) -> None:
        try:
            self._db.put(key, value)
        except Exception as exc:
            raise storage_error(exc, "put") from exc

    def delete(self, key: bytes) -> None:
        try:
            self._db.delete(key)
        except Exception as exc:
            raise storage_error(exc, "delete") from exc

    def approximate_size(self, start: bytes, end: bytes) -> int:
        """Bytes on disk and in memtables between ``start`` and ``end``, roughly."""
        total = 0
        for key, value in self.scan(start, end):
            total += len(key) + len(value)
        return total

    def compact(self) -> None:
        """Flush the memtables and compact every key into the bottom level (every family)."""
        try:
            self._db.flush(True)
            self._db.compact_range(None, None)
            for family in list(self._families.values()):
                family._db.flush(True)
                family._db.compact_range(None, None)
        except Exception as exc:
            raise storage_error(exc, "compact") from exc

    def flush(self) -> None:
        try:
            self._db.flush_wal(True)
        except Exception as exc:
            raise storage_error(exc, "flush") from exc

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # Every view of a column family lets go of the store first, or its lock stays held.
            had_families = bool(self._families)
            for family in self._families.values():
                family.close()
            self._families.clear()
            self._db.close()
            if had_families:
                gc.collect()  # a batch that held a family's handle in a cycle lets go of it
