"""Index counts: how many entries of an index share a key prefix, kept with the entries.

``SELECT COUNT(*) ... WHERE`` equality on a counted prefix of an index's key is then
one point read instead of a walk over the entries (RocksDB has no exact count
without visiting them).

What is counted (``counted_lengths``): the leading prefixes of the index key that
end at or after its last declared attribute column, up to the declared columns.
A shorter prefix would stop before an attribute column, and a row lacking that
column has no entry: its count would not be the rows ``WHERE`` selects. Base key
columns are in every row, so an index declared ``[Device]`` counts ``(Device)``, a
LOCAL index ``[user, status]`` counts ``(user, status)``, and ``[a, pk0]`` counts
``(a)`` and ``(a, pk0)``.

Where (``keys/layout.py``, docs/format.md): ``0x09 index_id length prefix`` ->
uint64 big-endian, absent for 0; ``0x09 index_id 0x00`` is the index's *count
state*: its mode byte, then the counted lengths, one byte each. An index without
a state is not counted (the SQL layer counts its entries instead).

How the counts stay exact: every change of entries changes the counts in the same
engine batch (``CountDeltas``: read the counts, add, put), under a lock that every
writer of those counters holds:

* a global index: the applier's per-index lock (``GlobalIndex.lock``), which its
  backfill takes too; the index refs say exactly which entry each row has;
* a local index: the base table feed's lock (``TableFeed.lock``), taken by every
  write whose counts change, around the read and the engine write.

A local index that may lack entries of rows older than it (while its backfill runs,
or made without base data, or counted from an older store's entries) is in mode
``CHECKED``: a writer reads whether the entry it replaces is there before it counts
it away. A complete one is ``EXACT``: a row's entry is there iff the row has one.
"""

from __future__ import annotations

from collections import Counter

from ..keys import layout
from ..table.schema import LOCAL, IndexSpec, TableSchema

EXACT = 1  # DO NOT CHANGE: every base row with an entry has it (a complete index)
CHECKED = 2  # DO NOT CHANGE: entries of older rows may be missing: writers check
_WIDTH = 8  # a count: uint64 big-endian


def counted_lengths(spec: IndexSpec, base_pk: tuple[str, ...]) -> tuple[int, ...]:
    """The prefix lengths of ``spec``'s key that are counted (see the module doc)."""
    declared = spec.declared_key(base_pk)
    attrs = [i for i, c in enumerate(declared) if c not in base_pk]
    first = attrs[-1] + 1 if attrs else 1
    return tuple(range(first, len(declared) + 1))


def encode_count(n: int) -> bytes:
    return n.to_bytes(_WIDTH, "big")


def decode_count(raw: bytes | None) -> int:
    return 0 if raw is None else int.from_bytes(raw, "big")


class IndexCounts:
    """The count state of one index, shared by its writers and readers."""

    __slots__ = ("index_id", "keys", "lengths", "mode")

    def __init__(self, index_id: int, lengths: tuple[int, ...], mode: int) -> None:
        self.index_id = index_id
        self.lengths = lengths
        self.mode = mode
        # keys(entry key) -> the count keys of one entry (its index row key)
        self.keys = layout.index_count_keyer(index_id, lengths)

    def state(self) -> bytes:
        return bytes((self.mode, *self.lengths))

    @classmethod
    def load(cls, engine, index_id: int) -> IndexCounts | None:
        """The stored state of ``index_id``, or None (not counted)."""
        raw = engine.get(layout.index_count_state_key(index_id))
        if not raw or raw[0] not in (EXACT, CHECKED) or len(raw) < 2:
            return None
        return cls(index_id, tuple(raw[1:]), raw[0])

    def store(self, engine, mode: int) -> None:
        """Record (and take) ``mode``."""
        self.mode = mode
        engine.put(layout.index_count_state_key(self.index_id), self.state())

    def move(self, deltas: CountDeltas | None, old: bytes | None,
             new: bytes | None) -> CountDeltas | None:
        """Count entry ``old`` away and ``new`` in (either None: none); returns ``deltas``
        (made when None and something changes)."""
        if old == new:
            return deltas
        if deltas is None:
            deltas = CountDeltas()
        get = deltas.get
        if old is not None:
            for key in self.keys(old):
                deltas[key] = get(key, 0) - 1
        if new is not None:
            for key in self.keys(new):
                deltas[key] = get(key, 0) + 1
        return deltas

    def change(self, deltas: CountDeltas | None, before: tuple | None, after: tuple | None,
               get) -> CountDeltas | None:
        """The count changes of a local index write that replaces entry ``before`` with
        ``after`` (``(key, blob)`` or None; the caller puts ``after`` as they differ and
        deletes ``before`` if its key differs). ``get(key)``: a read, for CHECKED."""
        old = None if before is None else before[0]
        new = None if after is None else after[0]
        if self.mode == CHECKED and old is not None and get(old) is None:
            old = None  # an older row's entry the index never held
        return self.move(deltas, old, new)


class CountDeltas(dict):
    """Count key -> change, of one engine batch."""

    __slots__ = ()

    def stage(self, engine, batch) -> None:
        """Put the new counts into ``batch``. The caller holds the lock of these counters
        until ``batch`` is written (see the module doc)."""
        keys = [k for k, d in self.items() if d]
        if not keys:
            return
        raws = [engine.get(keys[0])] if len(keys) == 1 else engine.multi_get(keys)
        put, delete = batch.put, batch.delete
        for key, raw in zip(keys, raws):
            # Never below 0: that would be a bug of the counting; verify_index reports
            # a count that differs from the entries.
            n = max(decode_count(raw) + self[key], 0)
            if n:
                put(key, n.to_bytes(_WIDTH, "big"))
            else:
                delete(key)


def count_entries(engine, index_id: int, lengths: tuple[int, ...]) -> Counter:
    """The counts the entries of ``index_id`` call for, from one scan of them."""
    counts: Counter = Counter()
    keys = layout.index_count_keys
    for key, _ in engine.scan(*layout.table_range(index_id)):
        counts.update(keys(index_id, lengths, key))
    return counts


def stored_counts(engine, index_id: int) -> dict[bytes, int]:
    """Every count stored for ``index_id`` (its state left out)."""
    lo, hi = layout.index_count_range(index_id)
    state = layout.index_count_state_key(index_id)
    return {k: decode_count(v) for k, v in engine.scan(lo, hi) if k != state}


def rebuild(engine, batch, spec: IndexSpec, base_pk: tuple[str, ...]) -> IndexCounts | None:
    """Put into ``batch`` the counts of ``spec``'s entries as they are and its state
    (replacing whatever was stored); returns the state, None if nothing is counted.
    A local index is CHECKED: whether its entries are complete is not known here."""
    lengths = counted_lengths(spec, base_pk)
    batch.delete_range(*layout.index_count_range(spec.table_id))
    if not lengths:
        return None
    for key, n in count_entries(engine, spec.table_id, lengths).items():
        batch.put(key, encode_count(n))
    counts = IndexCounts(spec.table_id, lengths, CHECKED if spec.index_type == LOCAL else EXACT)
    batch.put(layout.index_count_state_key(spec.table_id), counts.state())
    return counts


def migrate(engine, batch) -> None:
    """Count the entries of every index of a store made before index counts (format 2),
    into ``batch`` (``db/format.py``'s step to format 3)."""
    start, end = layout.catalog_range()
    for _, value in engine.scan(start, end):
        schema = TableSchema.from_json(value)
        for spec in schema.indexes:
            rebuild(engine, batch, spec, schema.pk_names)
