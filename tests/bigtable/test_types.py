"""The Bigtable value types: frozen, slotted, and their validation helpers name bad values."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widetable.bigtable import types as T
from widetable.errors import ParameterInvalid


def test_values_are_frozen_and_slotted():
    cell = T.Cell("cf", b"q", 1000, b"v")
    assert cell.labels == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.value = b"x"  # type: ignore[misc]
    for cls in (T.Cell, T.BigtableRow, T.RowRange, T.RowSet, T.SetCell, T.DeleteFromColumn,
                T.DeleteFromFamily, T.DeleteFromRow, T.AddToCell, T.MergeToCell,
                T.ReadModifyWriteRule, T.FamilySpec, T.TableInfo):
        assert dataclasses.is_dataclass(cls) and "__slots__" in cls.__dict__, cls
    assert T.RowRange() == T.RowRange(None, None, True, False)
    assert T.RowSet() == T.RowSet((), ())
    spec = T.FamilySpec("cf")
    assert (spec.gc, spec.compression, spec.block_cache, spec.bloom_filter, spec.aggregate) == (
        None, "none", True, True, None)


def test_row_key_limits():
    assert T.check_row_key(b"k") == b"k"
    assert T.check_row_key(b"x" * 4096) == b"x" * 4096
    with pytest.raises(ParameterInvalid, match="4097 bytes"):
        T.check_row_key(b"x" * 4097)
    with pytest.raises(ParameterInvalid, match="empty"):
        T.check_row_key(b"")
    with pytest.raises(ParameterInvalid, match="str"):
        T.check_row_key("k")


@pytest.mark.parametrize("name", ["cf", "_x", "0", "a-b.c_d", "x" * 64])
def test_family_name_ok(name):
    assert T.check_family_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".a", "a b", "é", "x" * 65, 3])
def test_family_name_bad(name):
    with pytest.raises(ParameterInvalid):
        T.check_family_name(name)


def test_qualifier_value_timestamp():
    assert T.check_qualifier(b"") == b""
    with pytest.raises(ParameterInvalid, match="16385 bytes"):
        T.check_qualifier(b"q" * (16 * 1024 + 1))
    assert T.check_timestamp(5000) == 5000
    assert T.check_timestamp(-1, allow_server_time=True) == -1
    with pytest.raises(ParameterInvalid, match="1234"):
        T.check_timestamp(1234)
    with pytest.raises(ParameterInvalid, match="negative"):
        T.check_timestamp(-1)
    with pytest.raises(ParameterInvalid):
        T.check_timestamp(True)
    with pytest.raises(ParameterInvalid, match="bytes"):
        T.check_value("s")


def test_family_spec_checks():
    assert T.check_family_spec(T.FamilySpec("cf", compression="zstd", aggregate="hll"))
    with pytest.raises(ParameterInvalid, match="snappy"):
        T.check_family_spec(T.FamilySpec("cf", compression="snappy"))
    with pytest.raises(ParameterInvalid, match="avg"):
        T.check_family_spec(T.FamilySpec("cf", aggregate="avg"))
    with pytest.raises(ParameterInvalid, match="FamilySpec"):
        T.check_family_spec("cf")


@given(st.text(max_size=5), st.binary(max_size=5), st.integers(-1, 10**12), st.binary(max_size=5))
def test_make_set_cell_makes_what_set_cell_makes(family, qualifier, ts, value) -> None:
    made, plain = T.make_set_cell(family, qualifier, ts, value), T.SetCell(family, qualifier, ts, value)
    assert type(made) is T.SetCell and made == plain and hash(made) == hash(plain)
    assert repr(made) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.value = b"x"  # type: ignore[misc]
