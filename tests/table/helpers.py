"""Assertions shared by the table tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from widetable import Database, Row, WidetableError


def engine_state(db: Database) -> list[tuple[bytes, bytes]]:
    """Every key and value the engine holds: catalog, counters and rows."""
    return list(db._engine.scan(b"", b"\xff" * 8))


def rejects(
    db: Database,
    code: str,
    fn: Callable,
    *args,
    names: tuple[str, ...] | list[str] = (),
    **kwargs,
) -> WidetableError:
    """Call ``fn``; assert it raises ``code``, the message names each of ``names``,
    and the store is byte-for-byte what it was before the call."""
    before = engine_state(db)
    with pytest.raises(WidetableError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.code == code, f"expected {code}, got {err.code}: {err.message}"
    for name in names:
        assert str(name) in err.message, f"{name!r} not named in {err.message!r}"
    assert code in str(err)
    assert engine_state(db) == before, "a rejected request changed the store"
    return err


def cells(row: Row | None) -> dict | None:
    """A row as ``{column: [(type name, value, ts), ...]}`` so True and 1 stay apart."""
    if row is None:
        return None
    return {
        name: [(type(v).__name__, v, ts) for v, ts in row.versions(name)]
        for name in sorted(row.columns)
    }


def values(row: Row | None) -> dict | None:
    """Newest values with their types, ``{column: (type name, value)}``."""
    if row is None:
        return None
    return {n: (type(v).__name__, v) for n, v in row.columns.items()}


def pks(rows) -> list[tuple]:
    return [r.primary_key for r in rows]
