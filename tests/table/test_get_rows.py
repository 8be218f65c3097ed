"""Table.get_rows: what get_row gives for each key, in one multi-row read."""

from __future__ import annotations

import pytest

from .helpers import values

PK2 = [("a", "STRING"), ("b", "INTEGER")]


@pytest.mark.parametrize("ttl", [-1, 86400])
@pytest.mark.parametrize("columns", [None, ["x"], ["x", "nope"], ["nope"]])
def test_get_rows_is_get_row_per_key(table, now, ttl, columns) -> None:
    t = table(pk=PK2, ttl=ttl, max_versions=2, max_time_deviation=3 * 86400)
    t.put_row(("r", 1), {"x": 1, "y": "a"})
    t.put_row(("r", 1), {"x": 2, "y": "b"})
    t.put_row(("r", 2), {"y": ("old", now - 2 * 86400 * 1000)})  # expired under the TTL
    t.put_row(("s", 3), {"x": 3})
    keys = [("s", 3), ("r", 1), ("missing", 0), ("r", 2), ("r", 1)]
    got = t.get_rows(keys, columns)
    want = [t.get_row(k, columns=columns) for k in keys]
    assert [None if g is None else (g.primary_key, values(g)) for g in got] == \
        [None if w is None else (w.primary_key, values(w)) for w in want]
    assert t.get_rows([], columns) == []
