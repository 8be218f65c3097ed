"""Auto-increment key columns: values the store assigns, unique and increasing per partition key.

A table may declare one non-first INTEGER key column auto-increment. A put that
passes ``AUTO_INCREMENT`` for it gets a value that is unique and strictly
increasing among all values given out for the same partition-key value (the
first key column), as in Tablestore; values are not consecutive.

The value is ``max(last + 1, now in microseconds)``. ``last`` is kept per
(table, partition-key value) in the auto-increment keyspace (``layout``) and
is written in the same engine batch as the row, so a value that a crash could
hand out again never reached a row. A row written with a concrete value above
the counter raises it: a put in the row's batch, an update (which may create
the row) just before the row's write, under the counter's lock, so no value
given out later lands on it. Values are assigned under a per-counter
lock, taken before the row's lock (never the other way round).

**The reserved range.** The top ``2**40`` values of int64, ``[RESERVED_START,
2**63)``, are only ever assigned, never taken from a caller: a write with a
concrete value there that would raise the counter (a value above it) is refused
with ``OTSParameterInvalid`` and changes nothing. A concrete value below
``RESERVED_START`` can raise the counter at most to ``RESERVED_START - 1``, so
at least ``2**40`` values are always left to assign: no explicit key exhausts a
partition key's counter. A value in the range at or below the counter (a row
the store assigned, written back) is accepted as any other.

The cache of counters (``AutoIncrementCounters``) keeps at most ``CACHE_LIMIT``
partition keys; past that the oldest entries are dropped, and read again from
the engine (where every cached value is stored) when next needed.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid
from ..keys import codec, layout
from .filters import as_condition
from .row import WriteResult
from .schema import AUTO_INCREMENT
from .values import INT64_MAX, now_ms

if TYPE_CHECKING:
    from .table import Table

_COUNTER_LOCKS = 256
RESERVED_START = INT64_MAX - 2**40 + 1  # first value only the store assigns
CACHE_LIMIT = 65536  # partition keys whose counter is cached


def encode_counter(value: int) -> bytes:
    """DO NOT CHANGE: embedded in on-disk data (int64, big-endian, two's complement)."""
    return value.to_bytes(8, "big", signed=True)


def decode_counter(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


class AutoIncrementCounters:
    """The last value given out per counter key, cached over the engine. One per store (``StoreContext.autoinc``)."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self._last: dict[bytes, int] = {}  # insertion-ordered: the oldest go first
        self._locks = [threading.Lock() for _ in range(_COUNTER_LOCKS)]
        self._cache_lock = threading.Lock()  # guards eviction against concurrent inserts

    def barrier(self) -> None:
        """Return once every writer holding a counter lock at the call has released it (a
        drop: the table is unusable first, and writers check it under the lock)."""
        for lock in self._locks:
            lock.acquire()
            lock.release()

    def lock(self, counter_key: bytes) -> threading.Lock:
        return self._locks[hash(counter_key) % _COUNTER_LOCKS]

    def last(self, counter_key: bytes) -> int | None:
        """The last value given out (None if none). Caller holds ``lock(counter_key)``."""
        cached = self._last.get(counter_key)  # one lookup: another key's eviction may race it
        if cached is not None:
            return cached
        raw = self._engine.get(counter_key)
        return None if raw is None else decode_counter(raw)

    def next_value(self, counter_key: bytes) -> int:
        """A value above every one given out. Caller holds the lock, then calls ``note``."""
        last = self.last(counter_key)
        value = time.time_ns() // 1000
        if last is not None and value <= last:
            value = last + 1
        if value > INT64_MAX:
            raise ParameterInvalid("auto-increment values are exhausted for this partition key")
        return value

    def note(self, counter_key: bytes, value: int) -> None:
        """Record that ``value`` is written (with its row). Caller holds the lock.

        A concrete value below the counter leaves it as it is: compared with the
        stored counter when none is cached (just after opening the store), so the
        cache never holds a lower value that the next put would write back."""
        last = self.last(counter_key)
        cache = self._last
        with self._cache_lock:
            cache[counter_key] = value if last is None or value > last else last
            while len(cache) > CACHE_LIMIT:
                # Every cached value is stored (written with its row, or before an update):
                # a dropped entry is read back from the engine, under its counter's lock.
                del cache[next(iter(cache))]

    def check_raise(self, counter_key: bytes, value: int, last: int | None, column: str) -> None:
        """Refuse a concrete ``value`` that would raise the counter into the reserved range."""
        if value >= RESERVED_START and (last is None or value > last):
            raise ParameterInvalid(
                f"auto-increment column {column!r}: value {value} is in the range reserved for "
                f"assigned values ({RESERVED_START} and above) and above the last value given "
                f"out ({last}); write values below {RESERVED_START}"
            )


def counter_key(table: Table, partition_value: object) -> bytes:
    schema = table.schema
    element = codec.encode_element(partition_value, schema.pk_types[0], schema.pk_names[0])  # type: ignore[arg-type]
    return layout.auto_increment_key(schema.table_id, element)


def put_row(table: Table, pk: object, columns: object, condition: object) -> WriteResult:
    """``Table.put_row`` for a table with an auto-increment column.

    With ``AUTO_INCREMENT`` in that column the row gets a new value, returned in
    ``WriteResult.primary_key``. A concrete value writes that row (say, one read
    back or restored from an export); a value above the counter raises it in
    the same batch, so later assigned values never land on that row.
    """
    values = list(table.normalize_pk(pk))
    index = table._auto_index
    assert index is not None
    if len(values) != len(table._names):
        table._key(tuple(values))  # raises the key codec's error for a key of the wrong length
    for i, v in enumerate(values):
        if v is AUTO_INCREMENT and i != index:
            raise ParameterInvalid(
                f"primary key column {table._names[i]!r} is not auto-increment; got AUTO_INCREMENT"
            )
    assign = values[index] is AUTO_INCREMENT
    if not assign:
        table._key(tuple(values))  # check the concrete key before taking any lock
    cond = as_condition(condition)
    counters = table._ctx.autoinc
    ckey = counter_key(table, values[0])
    engine = table._engine
    with counters.lock(ckey):
        last = counters.last(ckey)
        if assign:
            values[index] = counters.next_value(ckey)
        else:
            counters.check_raise(ckey, values[index], last, table._names[index])
        value = values[index]
        pk_tuple, key = table._key(tuple(values))
        blob = table.encode_put(pk_tuple, columns)
        part = table._route_write(key)  # the partition layer's hook: route, count, throttle
        # No transaction check: local transactions refuse auto-increment tables.
        with table._lock(key):
            if table._unusable:  # dropped since _key: see Catalog.delete_table
                table._check_open()
            if cond is not None and cond.needs_row:
                table._check_condition(pk_tuple, engine.get(key), cond, now_ms())
            batch = engine.batch()
            batch.put(key, blob)
            if last is None or value > last:
                batch.put(ckey, encode_counter(value))
            feed = table._changes  # a stream or an index: the record and entries join the batch
            if feed is None:
                engine.write(batch)
            else:
                feed.commit_rows(batch, [(key, blob)])
        counters.note(ckey, value)
    table._record_write(part, key, len(blob), None)
    return WriteResult(pk_tuple)


def update_row(table: Table, pk: object, *changes: object) -> WriteResult:
    """``Table.update_row`` for a table with an auto-increment column: the key is concrete
    (AUTO_INCREMENT is for put_row), and a value above the counter raises it first, so
    values given out later never land on the row this update may create. Should the
    update then be refused, the counter stays raised: values only skip some numbers."""
    encoded = table._key(pk)  # a concrete, valid key (the codec refuses AUTO_INCREMENT)
    pk_tuple = encoded[0]
    counters = table._ctx.autoinc
    ckey = counter_key(table, pk_tuple[0])
    value = pk_tuple[table._auto_index]  # type: ignore[index]
    with counters.lock(ckey):
        if table._unusable:  # dropped since _key: see Catalog.delete_table
            table._check_open()
        last = counters.last(ckey)
        counters.check_raise(ckey, value, last, table._names[table._auto_index])  # type: ignore[index]
        if last is None or value > last:
            table._engine.put(ckey, encode_counter(value))
            counters.note(ckey, value)
        return table._update_row(pk_tuple, *changes, encoded=encoded)
