"""Every limit and error code: the code, a message naming the offending value, and no change.

``rejects`` (helpers.py) checks all three for each call: the error code, that each
given fragment appears in the message, and that the engine holds exactly the
bytes it held before.
"""

from __future__ import annotations

import pytest

import widetable
from widetable import EXPECT_NOT_EXIST, INF_MAX, INF_MIN, WidetableError, col

from .helpers import rejects

MB2 = 2 * 1024 * 1024
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

BAD_NAMES = ["", "1abc", "a-b", "a b", "naïve", "a" * 256, "tab\t", "x.y"]
GOOD_NAMES = ["a", "_", "_x9", "A" * 255, "Z_z_0"]


def fragment(value: object) -> str:
    """The start of ``repr(value)``: messages shorten long values, so check a prefix."""
    return repr(value)[:20]


@pytest.fixture
def t(table):
    t = table("t", pk=[("s", "STRING"), ("i", "INTEGER"), ("b", "BINARY")], max_versions=2)
    t.put_row(("a", 1, b"\x00"), {"x": 1, "y": "y"})
    return t


PK = ("a", 1, b"\x00")


# --- names ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_table_name(db, name) -> None:
    rejects(db, "OTSParameterInvalid", db.create_table, name, [("k", "STRING")],
            names=[fragment(name)])
    assert db.list_tables() == []


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names_everywhere(db, name) -> None:
    db.create_table("pk_" + name[:200], [(name, "STRING")])
    t = db.create_table(name, [("pk" if name != "pk" else "pk2", "STRING")])
    t.put_row("k", {name: 1})
    t.update_row("k", increment={name: 1})
    assert t.get_row("k", columns=[name], filter=col(name) == 2)[name] == 2
    assert db.list_tables() == sorted([name, "pk_" + name[:200]])


def test_attribute_column_may_not_reuse_a_primary_key_name(db) -> None:
    t = db.create_table("clash", [("k", "STRING"), ("seq", "INTEGER")])
    t.put_row(("a", 1), {"v": 1})
    for call in (
        lambda: t.put_row(("a", 1), {"seq": 1}),
        lambda: t.put_row(("a", 1), [("k", "x")]),
        lambda: t.update_row(("a", 1), put={"seq": 2}),
        lambda: t.update_row(("a", 1), increment={"seq": 1}),
    ):
        with pytest.raises(WidetableError) as info:
            call()
        assert info.value.code == "OTSParameterInvalid"
        assert "primary key" in info.value.message
    assert t.get_row(("a", 1)).columns == {"v": 1}


@pytest.mark.parametrize("name", [*BAD_NAMES, 5, None])
def test_bad_column_name(db, t, name) -> None:
    f = fragment(name)
    rejects(db, "OTSParameterInvalid", t.put_row, PK, {name: 1}, names=[f])
    rejects(db, "OTSParameterInvalid", t.put_row, PK, [(name, 1)], names=[f])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, put={name: 1}, names=[f])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, increment={name: 1}, names=[f])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, delete_column=[name], names=[f])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, delete_version={name: 1}, names=[f])
    rejects(db, "OTSParameterInvalid", t.get_row, PK, columns=[name], names=[f])
    rejects(db, "OTSParameterInvalid", t.get_range, INF_MIN, INF_MAX, columns=[name], names=[f])
    rejects(db, "OTSParameterInvalid", col, name, names=[f])


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_primary_key_column_name(db, name) -> None:
    rejects(db, "OTSParameterInvalid", db.create_table, "t", [(name, "STRING")],
            names=[fragment(name)])


# --- primary key schema ----------------------------------------------------------------


def test_primary_key_has_1_to_4_columns(db) -> None:
    four = [(f"k{i}", "STRING") for i in range(4)]
    t = db.create_table("four", four)
    t.put_row(("a", "b", "c", "d"), {"x": 1})
    rejects(db, "OTSParameterInvalid", db.create_table, "zero", [], names=["[]"])
    five = [(f"k{i}", "STRING") for i in range(5)]
    rejects(db, "OTSParameterInvalid", db.create_table, "five", five, names=["1-4", "[('k0'"])
    rejects(db, "OTSParameterInvalid", db.create_table, "none", None, names=["None"])


@pytest.mark.parametrize("type_", ["FLOAT", "DOUBLE", "BOOLEAN", "", 5])
def test_bad_primary_key_type(db, type_) -> None:
    rejects(db, "OTSParameterInvalid", db.create_table, "t", [("k", type_)],
            names=[repr(type_)])


def test_duplicate_primary_key_column(db) -> None:
    rejects(db, "OTSParameterInvalid", db.create_table, "t", [("k", "STRING"), ("k", "INTEGER")],
            names=["'k'"])
    rejects(db, "OTSParameterInvalid", db.create_table, "t", [("k", "STRING", "extra")])


# --- primary key values (OTSInvalidPK) ----------------------------------------------------


@pytest.mark.parametrize(
    "pk, named",
    [
        ((1, 1, b""), ["'s'", "1"]),
        (("a", "1", b""), ["'i'", "'1'"]),
        (("a", 1.0, b""), ["'i'", "1.0"]),
        (("a", True, b""), ["'i'", "True"]),
        (("a", 1, "str"), ["'b'", "'str'"]),
        (("a", None, b""), ["'i'", "None"]),
        (("a", 1), ["('a', 1)"]),
        (("a", 1, b"", 2), ["('a', 1, b'', 2)"]),
        (("a", INF_MIN, b""), ["INF_MIN"]),
        ((INF_MAX, 1, b""), ["INF_MAX"]),
        (("a", 2**63, b""), [str(2**63)]),
        (("a", INT64_MIN - 1, b""), [str(INT64_MIN - 1)]),
    ],
)
def test_bad_primary_key_value(db, t, pk, named) -> None:
    rejects(db, "OTSInvalidPK", t.put_row, pk, {"x": 1}, names=named)
    rejects(db, "OTSInvalidPK", t.update_row, pk, put={"x": 1}, names=named)
    rejects(db, "OTSInvalidPK", t.delete_row, pk, names=named)
    rejects(db, "OTSInvalidPK", t.get_row, pk, names=named)
    res = db.batch_write_row([("t", "put", pk, {"x": 1})])
    assert res[0].error.code == "OTSInvalidPK"
    assert db.batch_get_row([("t", pk)])[0].error.code == "OTSInvalidPK"


def test_int64_primary_key_edges_are_fine(db, t) -> None:
    for i in (INT64_MIN, INT64_MAX):
        t.put_row(("e", i, b""), {"x": i})
        assert t.get_row(("e", i, b""))["x"] == i


def test_primary_key_value_1kb_limit(db, t) -> None:
    """Tablestore answers a key value over 1 KB with OTSParameterInvalid, "The length of
    primary key column: 's' exceeds the MaxLength:1024 with CurrentLength:1025."; the
    message goes on with the value."""
    t.put_row(("s" * 1024, 1, b"b" * 1024), {"x": 1})
    assert t.get_row(("s" * 1024, 1, b"b" * 1024))["x"] == 1
    t.put_row(("é" * 512, 1, b""), {"x": 2})  # 1024 UTF-8 bytes
    for pk in [("s" * 1025, 1, b""), ("é" * 513, 1, b""), ("a", 1, b"\x00" * 1025)]:
        size = 1025 if len(pk[0]) != 513 else 1026
        column = "s" if len(pk[2]) < 1025 else "b"
        named = [(f"The length of primary key column: '{column}' exceeds the MaxLength:1024 "
                  f"with CurrentLength:{size}."), fragment(pk[0] if column == "s" else pk[2])]
        for call in ((t.put_row, pk, {"x": 1}), (t.get_row, pk), (t.delete_row, pk),
                     (t.get_range, pk, INF_MAX)):
            err = rejects(db, "OTSParameterInvalid", *call, names=named)
            assert err.message.startswith(named[0])
        res = db.batch_write_row([("t", "put", pk, {"x": 1})])
        assert res[0].error.code == "OTSParameterInvalid"
        assert db.batch_get_row([("t", pk)])[0].error.code == "OTSParameterInvalid"


# --- attribute values --------------------------------------------------------------------


def test_attribute_value_2mb_limit(db, t) -> None:
    t.put_row(PK, {"bin": b"\x01" * MB2, "str": "s" * MB2})
    t.update_row(PK, put={"e": "é" * (MB2 // 2)})
    row = t.get_row(PK)
    assert len(row["bin"]) == MB2 and len(row["str"]) == MB2 and len(row["e"]) == MB2 // 2
    for value in (b"\x01" * (MB2 + 1), "s" * (MB2 + 1), "é" * (MB2 // 2) + "x"):
        rejects(db, "OTSParameterInvalid", t.put_row, PK, {"big": value}, names=["'big'"])
        rejects(db, "OTSParameterInvalid", t.put_row, PK, [("big", value)], names=["'big'"])
        rejects(db, "OTSParameterInvalid", t.update_row, PK, put={"big": value}, names=["'big'"])
        res = db.batch_write_row([("t", "put", ("z", 1, b""), {"big": value})])
        assert res[0].error.code == "OTSParameterInvalid" and "'big'" in res[0].error.message
    rejects(db, "OTSParameterInvalid", t.put_row, PK,
            {"big": bytearray(MB2 + 1)}, names=["'big'"])


@pytest.mark.parametrize("value", [2**63, INT64_MIN - 1, 10**30])
def test_attribute_int64_range(db, t, value) -> None:
    rejects(db, "OTSParameterInvalid", t.put_row, PK, {"n": value}, names=["'n'", str(value)])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, put={"n": value},
            names=["'n'", str(value)])
    rejects(db, "OTSParameterInvalid", col("n").__eq__, value, names=[str(value)])


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, {1, 2}, object(), 1j])
def test_attribute_bad_type(db, t, value) -> None:
    rejects(db, "OTSParameterInvalid", t.put_row, PK, {"v": value}, names=["'v'", type(value).__name__])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, put={"v": value}, names=["'v'"])


def test_bytearray_and_memoryview_are_stored_as_bytes(t) -> None:
    t.put_row(PK, {"a": bytearray(b"ab"), "m": memoryview(b"cd")})
    row = t.get_row(PK)
    assert row["a"] == b"ab" and type(row["a"]) is bytes and row["m"] == b"cd"


# --- column count (OTSOutOfColumnCountLimit) ---------------------------------------------


def test_1024_columns_per_write(db, t) -> None:
    t.put_row(PK, {f"c{i}": i for i in range(1024)})
    assert len(t.get_row(PK).columns) == 1024
    t.update_row(PK, put={f"d{i}": i for i in range(1024)})
    assert len(t.get_row(PK).columns) == 2048  # the limit is per write, not per row
    many = {f"e{i}": i for i in range(1025)}
    rejects(db, "OTSOutOfColumnCountLimit", t.put_row, PK, many, names=["1025", "1024"])
    rejects(db, "OTSOutOfColumnCountLimit", t.put_row, PK, list(many.items()), names=["1025"])
    rejects(db, "OTSOutOfColumnCountLimit", t.update_row, PK, put=many, names=["1025"])
    rejects(db, "OTSOutOfColumnCountLimit", t.update_row, PK,
            put={f"e{i}": i for i in range(600)},
            delete_column=[f"c{i}" for i in range(400)],
            increment={f"n{i}": 1 for i in range(25)}, names=["1025"])
    res = db.batch_write_row([("t", "put", ("z", 1, b""), many), ("t", "put", ("z", 2, b""), {"x": 1})])
    assert res[0].error.code == "OTSOutOfColumnCountLimit" and res[1].ok


def test_versions_of_one_column_count_as_cells(db, t, now) -> None:
    cells = [("x", i, now - 2000 - i) for i in range(1025)]
    rejects(db, "OTSOutOfColumnCountLimit", t.put_row, PK, cells, names=["1025"])


# --- timestamps -----------------------------------------------------------------------------


def test_timestamp_deviation(db, table, now) -> None:
    t = table("dev", max_time_deviation=60, max_versions=3)
    t.put_row("k", [("x", 1, now - 50_000), ("x", 2, now + 50_000)])
    for ts in (now - 120_000, now + 120_000, 0, 1):
        rejects(db, "OTSParameterInvalid", t.put_row, "k", {"x": (9, ts)}, names=[str(ts), "'x'"])
        rejects(db, "OTSParameterInvalid", t.update_row, "k", put={"x": (9, ts)},
                names=[str(ts), "'x'"])
        res = db.batch_write_row([("dev", "put", "k2", {"x": (9, ts)})])
        assert res[0].error.code == "OTSParameterInvalid" and str(ts) in res[0].error.message
    for ts in (-1, 2**63, 1.5, "now"):
        rejects(db, "OTSParameterInvalid", t.put_row, "k", {"x": (9, ts)}, names=[repr(ts)])
    rejects(db, "OTSParameterInvalid", t.update_row, "k", delete_version={"x": "old"},
            names=["'old'"])


def test_default_deviation_is_one_day(table, db, now) -> None:
    t = table()
    t.put_row("k", {"x": (1, now - 86_000_000)})
    rejects(db, "OTSParameterInvalid", t.put_row, "k", {"x": (1, now - 86_500_000)},
            names=[str(now - 86_500_000)])


# --- tables (OTSObjectNotExist / OTSObjectAlreadyExist) ---------------------------------------


def test_object_not_exist(db) -> None:
    for call in (db.table, db.describe_table, db.delete_table, db.update_table):
        rejects(db, "OTSObjectNotExist", call, "missing", names=["missing"])
    rejects(db, "OTSObjectNotExist", db.purge_expired, "missing", names=["missing"])
    assert db.batch_get_row([("missing", "k")])[0].error.code == "OTSObjectNotExist"
    assert db.batch_write_row([("missing", "put", "k", {"x": 1})])[0].error.code == \
        "OTSObjectNotExist"
    assert db.batch_write_row([("missing", "delete", "k")])[0].error.code == "OTSObjectNotExist"


def test_object_already_exist(db, table) -> None:
    t = table("t", max_versions=2)
    t.put_row("k", {"x": 1})
    rejects(db, "OTSObjectAlreadyExist", db.create_table, "t", [("other", "INTEGER")],
            names=["'t'"])
    assert db.describe_table("t").options.max_versions == 2
    assert db.table("t").get_row("k")["x"] == 1


# --- options and read arguments (OTSParameterInvalid) -----------------------------------------


@pytest.mark.parametrize(
    "options, named",
    [
        ({"max_versions": 0}, "0"),
        ({"max_versions": -1}, "-1"),
        ({"max_versions": 1.5}, "1.5"),
        ({"ttl": 0}, "0"),
        ({"ttl": -2}, "-2"),
        ({"ttl": "1d"}, "'1d'"),
        ({"max_time_deviation": 0}, "0"),
        ({"max_time_deviation": -5}, "-5"),
    ],
)
def test_bad_table_options(db, table, options, named) -> None:
    rejects(db, "OTSParameterInvalid", db.create_table, "new", [("k", "STRING")],
            names=[named], **options)
    table("t")
    rejects(db, "OTSParameterInvalid", db.update_table, "t", names=[named], **options)
    assert db.describe_table("t").options == widetable.TableOptions()


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"max_versions": 0}, "0"),
        ({"max_versions": "2"}, "'2'"),
        ({"time_range": (5, 5)}, "(5, 5)"),
        ({"time_range": (6, 5)}, "(6, 5)"),
        ({"time_range": (-1, 5)}, "(-1, 5)"),
        ({"time_range": (1, 2, 3)}, "(1, 2, 3)"),
        ({"time_range": "today"}, "'today'"),
        ({"columns": "x"}, "'x'"),
    ],
)
def test_bad_read_arguments(db, t, kwargs, named) -> None:
    rejects(db, "OTSParameterInvalid", t.get_row, PK, names=[named], **kwargs)
    rejects(db, "OTSParameterInvalid", t.get_range, INF_MIN, INF_MAX, names=[named], **kwargs)
    res = db.batch_get_row([("t", PK, kwargs)])
    assert res[0].error.code == "OTSParameterInvalid"


def test_bad_write_arguments(db, t) -> None:
    rejects(db, "OTSParameterInvalid", t.put_row, PK, "x=1", names=["'x=1'"])
    rejects(db, "OTSParameterInvalid", t.put_row, PK, [("x",)], names=["('x',)"])
    rejects(db, "OTSParameterInvalid", t.put_row, PK, {"x": (1, 2, 3)}, names=["(1, 2, 3)"])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, increment=5, names=["5"])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, delete_column=5, names=["5"])


def test_condition_check_fail(db, t) -> None:
    rejects(db, "OTSConditionCheckFail", t.put_row, PK, {"x": 2}, condition=EXPECT_NOT_EXIST,
            names=[repr(PK)])
    assert t.get_row(PK)["x"] == 1


def test_open_arguments(tmp_path) -> None:
    for kwargs, named in [({"engine": "leveldb"}, "'leveldb'"), ({"purge_interval": 0}, "0")]:
        with pytest.raises(WidetableError) as info:
            widetable.open(str(tmp_path / "x"), **kwargs)
        assert info.value.code == "OTSParameterInvalid" and named in info.value.message


def test_errors_carry_code_and_message() -> None:
    err = WidetableError("boom", "OTSParameterInvalid")
    assert err.code == "OTSParameterInvalid" and err.message == "boom"
    assert str(err) == "OTSParameterInvalid: boom"
    import pickle

    again = pickle.loads(pickle.dumps(err))
    assert (again.code, again.message) == (err.code, err.message)


def test_text_that_is_not_unicode(db, t) -> None:
    bad = "a\ud800"
    rejects(db, "OTSInvalidPK", t.put_row, (bad, 1, b""), {"x": 1}, names=[repr(bad)])
    rejects(db, "OTSInvalidPK", t.get_range, (bad,), INF_MAX, names=[repr(bad)])
    rejects(db, "OTSParameterInvalid", t.put_row, PK, {"v": bad}, names=["'v'", repr(bad)])
    rejects(db, "OTSParameterInvalid", t.put_row, PK, [("v", bad)], names=["'v'"])
    rejects(db, "OTSParameterInvalid", t.update_row, PK, put={"v": bad}, names=["'v'"])
    rejects(db, "OTSParameterInvalid", lambda: col("x") == bad, names=["'x'"])
    res = db.batch_write_row([("t", "put", ("z", 1, b""), {"v": bad})])
    assert res[0].error.code == "OTSParameterInvalid"
