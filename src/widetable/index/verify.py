"""verify_index: compare an index with the one derived from its table's rows, and its
counts (``counts.py``) with its entries."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import InvalidPK
from ..keys import codec as keycodec
from ..keys import layout
from ..table import rowcodec
from .counts import stored_counts
from .schema import TOO_LONG, IndexCodec


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What ``verify_index`` found. Keys are index primary keys (tuples).

    ``missing``: entries the table's rows call for that the index lacks (or
    holds with other columns). ``stale``: entries no row calls for.
    """

    index: str
    index_type: str
    rows: int  # base rows scanned
    entries: int  # index entries found
    missing: list[tuple]
    stale: list[tuple]
    # Base rows no entry can hold (a key value over the key limits): the index skips them.
    # They are not missing entries (``ok`` stays True), but never invisible either.
    too_long_rows: int = 0
    too_long: list[tuple] = field(default_factory=list)  # their base primary keys (<= limit)
    # Counts that differ from the entries: ``(prefix tuple, stored count, entries)``.
    wrong_counts: list[tuple] = field(default_factory=list)
    counted: bool = False  # whether the index keeps counts

    @property
    def ok(self) -> bool:
        return not self.missing and not self.stale and not self.wrong_counts


def verify(engine, table, codec: IndexCodec, limit: int = 1000) -> IndexReport:
    """Scan the table and the index once each; report at most ``limit`` of each kind."""
    expected: dict[bytes, bytes] = {}
    rows = too_long_rows = 0
    too_long: list[tuple] = []
    for _, blob in engine.scan(*layout.table_range(table.schema.table_id)):
        rows += 1
        row = rowcodec.unpack(blob)
        try:
            entry = codec.entry(row)
        except InvalidPK:  # a LOCAL index: a row older than the index, over the limits
            entry = TOO_LONG
        if entry is TOO_LONG:  # a key value over the limits: no index can hold this row
            too_long_rows += 1
            if len(too_long) < limit:
                too_long.append(tuple(row[1]))
        elif entry is not None:
            expected[entry[0]] = entry[1]
    missing: list[tuple] = []
    stale: list[tuple] = []
    entries = 0
    n = len(codec.prefix)
    counts = codec.counts
    wanted: Counter = Counter()
    for key, blob in engine.scan(*layout.table_range(codec.spec.table_id)):
        entries += 1
        if counts is not None:
            wanted.update(counts.keys(key))
        want = expected.pop(key, None)
        if want is None:
            if len(stale) < limit:
                stale.append(keycodec.decode_tuple(key, n))
        elif rowcodec.unpack(want)[2:4] != rowcodec.unpack(blob)[2:4] and len(missing) < limit:
            missing.append(keycodec.decode_tuple(key, n))
    for key in list(expected)[:max(limit - len(missing), 0)]:
        missing.append(keycodec.decode_tuple(key, n))
    wrong: list[tuple] = []
    if counts is not None:
        stored = stored_counts(engine, codec.spec.table_id)
        for key in sorted(stored.keys() | wanted.keys()):
            if stored.get(key, 0) != wanted.get(key, 0) and len(wrong) < limit:
                wrong.append((layout.decode_index_count_key(key)[2], stored.get(key, 0),
                              wanted[key]))
    return IndexReport(codec.spec.name, codec.spec.index_type, rows, entries, missing, stale,
                       too_long_rows, too_long, wrong, counts is not None)
