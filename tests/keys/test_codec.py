"""The primary-key tuple codec: the four invariants, limits, golden vectors and the tripwire.

The invariants are those of FoundationDB's tuple layer (see ``codec``'s docstring):
decoding an encoding gives back the tuple; byte order equals logical order;
every extension of ``t`` falls inside ``[enc(t), prefix_end(enc(t)))``; a
prefix sorts before its extensions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from widetable.errors import INVALID_PK, InvalidPK
from widetable.keys import codec, layout
from widetable.keys.codec import (
    BINARY,
    INF_MAX,
    INF_MIN,
    INT64_MAX,
    INT64_MIN,
    INTEGER,
    MAX_KEY_VALUE_BYTES,
    STRING,
    decode_tuple,
    encode_element,
    encode_tuple,
    make_encoder,
    prefix_end,
)
from widetable.table import rowcodec
from widetable.table.schema import TableOptions, TableSchema

FORMAT_MD = Path(__file__).resolve().parents[2] / "docs" / "format.md"

# --- strategies --------------------------------------------------------------

# max_size=256 characters is at most 1024 UTF-8 bytes, so every drawn value is legal.
# codec="utf-8" leaves out lone surrogates, which UTF-8 cannot encode.
texts = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=256),
    # A tiny alphabet makes equal values, shared prefixes and NULs common.
    st.text(alphabet="\x00\x01a\x7f\u00e9\uffff\U0001f600", max_size=6),
    st.text(alphabet="a\x00", min_size=1000, max_size=MAX_KEY_VALUE_BYTES),
)
ints = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-3, 3),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, -256, 255, 256, INT64_MAX - 1, INT64_MAX]),
)
binaries = st.one_of(
    st.binary(max_size=MAX_KEY_VALUE_BYTES),
    st.lists(st.sampled_from([0x00, 0x01, 0xFE, 0xFF]), max_size=6).map(bytes),
)
VALUES = {STRING: texts, INTEGER: ints, BINARY: binaries}
schemas = st.lists(st.sampled_from([STRING, INTEGER, BINARY]), min_size=1, max_size=4).map(tuple)


def tuples_of(types: tuple[str, ...]) -> st.SearchStrategy[tuple]:
    return st.tuples(*(VALUES[t] for t in types))


def names_for(types: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"k{i}" for i in range(len(types)))


def logical(t: tuple) -> tuple:
    """The order keys must follow: Python's tuple order, with str compared as UTF-8 bytes."""
    return tuple(v.encode("utf-8") if isinstance(v, str) else v for v in t)


def cmp(a: object, b: object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def same_typed(a: tuple, b: tuple) -> bool:
    return a == b and [type(x) for x in a] == [type(y) for y in b]


# --- invariant 1: decoding an encoding gives back the tuple -------------------


@given(st.data())
def test_decode_inverts_encode(data: st.DataObject) -> None:
    types = data.draw(schemas)
    t = data.draw(tuples_of(types))
    encoded = encode_tuple(t, types)
    assert same_typed(decode_tuple(encoded), t)
    # Types inferred from the values give the same bytes.
    assert encode_tuple(t) == encoded
    # The schema encoder (the one tables use) gives the same bytes too.
    assert make_encoder(types, names_for(types))(t) == encoded
    # Decoding from an offset skips a row key's table prefix.
    key = layout.row_key(7, encoded)
    assert same_typed(decode_tuple(key, len(layout.table_prefix(7))), t)


@given(st.data())
def test_decode_inverts_encode_per_element(data: st.DataObject) -> None:
    types = data.draw(schemas)
    t = data.draw(tuples_of(types))
    joined = b"".join(encode_element(v, ty) for v, ty in zip(t, types))
    assert joined == encode_tuple(t, types)


def test_bytes_like_values_encode_as_bytes() -> None:
    assert encode_tuple([bytearray(b"\x00a")], [BINARY]) == encode_tuple([b"\x00a"], [BINARY])
    assert encode_tuple([memoryview(b"\x00a")], [BINARY]) == encode_tuple([b"\x00a"], [BINARY])
    assert decode_tuple(encode_tuple([bytearray(b"x")])) == (b"x",)


# --- invariant 2: byte order equals logical order ----------------------------


@given(st.data())
def test_byte_order_is_logical_order(data: st.DataObject) -> None:
    types = data.draw(schemas)
    a = data.draw(tuples_of(types))
    # Half the time share a leading part, so later columns decide the order.
    k = data.draw(st.integers(0, len(types)))
    b = a[:k] + data.draw(tuples_of(types[k:]))
    assert cmp(encode_tuple(a, types), encode_tuple(b, types)) == cmp(logical(a), logical(b))


@given(st.data())
def test_sorting_encodings_sorts_tuples(data: st.DataObject) -> None:
    types = data.draw(schemas)
    rows = data.draw(st.lists(tuples_of(types), min_size=2, max_size=20))
    by_bytes = sorted(rows, key=lambda t: encode_tuple(t, types))
    assert [logical(t) for t in by_bytes] == sorted(logical(t) for t in rows)


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        (("",), ("\x00",)),
        (("a",), ("a\x00",)),
        (("a\x00",), ("a\x01",)),
        (("a", INT64_MAX), ("a\x00", INT64_MIN)),
        (("\x7f",), ("\u00e9",)),
        (("\uffff",), ("\U0001f600",)),
        ((INT64_MIN,), (-1,)),
        ((-1,), (0,)),
        ((INT64_MAX - 1,), (INT64_MAX,)),
        ((b"",), (b"\x00",)),
        ((b"\x00",), (b"\x00\x00",)),
        ((b"\x00\xff",), (b"\x01",)),
        ((b"\xfe\xff\xff",), (b"\xff",)),
        ((b"a", b"\xff"), (b"a\x00", b"")),
    ],
)
def test_byte_order_edge_cases(lower: tuple, upper: tuple) -> None:
    assert logical(lower) < logical(upper)
    assert encode_tuple(lower) < encode_tuple(upper)


# --- invariants 3 and 4: prefixes and their extensions ------------------------


@given(st.data())
def test_extensions_fall_inside_prefix_range(data: st.DataObject) -> None:
    types = data.draw(schemas)
    k = data.draw(st.integers(0, len(types)))
    prefix = encode_tuple(data.draw(tuples_of(types[:k])), types[:k])
    extension = data.draw(tuples_of(types[k:]))
    full = prefix + encode_tuple(extension, types[k:])
    assert prefix <= full < prefix_end(prefix)
    # The same holds under a table's key prefix, as range reads use it.
    table = layout.table_prefix(3)
    assert table + prefix <= table + full < prefix_end(table + prefix)


@given(st.data())
def test_non_extensions_fall_outside_prefix_range(data: st.DataObject) -> None:
    types = data.draw(schemas)
    k = data.draw(st.integers(1, len(types)))
    t = data.draw(tuples_of(types))
    u = data.draw(tuples_of(types))
    assume(t[:k] != u[:k])
    prefix = encode_tuple(t[:k], types[:k])
    other = encode_tuple(u, types)
    assert not prefix <= other < prefix_end(prefix)


@given(st.data())
def test_prefix_sorts_before_its_extensions(data: st.DataObject) -> None:
    types = data.draw(schemas)
    t = data.draw(tuples_of(types))
    k = data.draw(st.integers(0, len(types) - 1))
    assert encode_tuple(t[:k], types[:k]) < encode_tuple(t, types)


@given(st.data())
def test_no_element_starts_with_0xff(data: st.DataObject) -> None:
    """Range bounds append 0xFF (INF_MAX) and 0x00 (inclusive bump); both rely on this."""
    type_ = data.draw(st.sampled_from([STRING, INTEGER, BINARY]))
    element = encode_element(data.draw(VALUES[type_]), type_)
    assert element[0] in (codec.CODE_BINARY, codec.CODE_STRING, codec.CODE_INTEGER)
    assert element[0] != 0xFF and element[0] != 0x00


def test_prefix_end_appends_0xff() -> None:
    assert prefix_end(b"") == b"\xff"
    assert prefix_end(b"\x02a\x00") == b"\x02a\x00\xff"


# --- limits and type checks ---------------------------------------------------


def expect_invalid_pk(fn, *args, match: str) -> InvalidPK:
    with pytest.raises(InvalidPK, match=match) as info:
        fn(*args)
    assert info.value.code == INVALID_PK
    return info.value


@pytest.mark.parametrize(
    ("value", "type_", "size"),
    [
        ("a" * 1025, STRING, 1025),
        ("\u00e9" * 512 + "a", STRING, 1025),  # the limit counts UTF-8 bytes, not characters
        ("\U0001f600" * 257, STRING, 1028),
        (b"\x00" * 1025, BINARY, 1025),
    ],
)
def test_values_over_1kb_are_rejected_naming_the_value(value, type_, size) -> None:
    """OTSParameterInvalid in Tablestore's wording (still an InvalidPK to callers that skip
    keys which cannot be encoded)."""
    err = expect_too_long(encode_element, value, type_, "v", match=f"is {size} bytes; the limit is 1024")
    assert repr(value)[:20] in str(err)
    assert err.message.startswith(
        f"The length of primary key column: 'v' exceeds the MaxLength:1024 with CurrentLength:{size}.")
    names = names_for((type_,))
    expect_too_long(make_encoder((type_,), names), (value,), match=f"column: '{names[0]}' exceeds")
    expect_too_long(make_encoder((INTEGER, type_), ("n", "v")), (1, value),
                    match=f"column: 'v' exceeds the MaxLength:1024 with CurrentLength:{size}")


def expect_too_long(fn, *args, match: str) -> InvalidPK:
    with pytest.raises(InvalidPK, match=match) as info:
        fn(*args)
    assert info.value.code == "OTSParameterInvalid"
    return info.value


@pytest.mark.parametrize(
    ("value", "type_"),
    [
        ("a" * 1024, STRING),
        ("\u00e9" * 512, STRING),
        (b"\x00" * 1024, BINARY),
        ("\x00" * 1024, STRING),
    ],
)
def test_values_of_exactly_1kb_are_accepted(value, type_) -> None:
    assert decode_tuple(encode_element(value, type_)) == (value,)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 2**64, -(2**64)])
def test_integers_outside_int64_are_rejected(value: int) -> None:
    expect_invalid_pk(encode_element, value, INTEGER, match=f"{value} does not fit")
    expect_invalid_pk(encode_tuple, [value], match=f"{value} does not fit")
    expect_invalid_pk(make_encoder((INTEGER,), ("n",)), (value,), match=f"{value} does not fit")


@pytest.mark.parametrize("value", [True, False])
def test_bool_is_not_an_integer(value: bool) -> None:
    expect_invalid_pk(encode_element, value, INTEGER, match=f"must be INTEGER, got bool {value}")
    expect_invalid_pk(encode_tuple, [value], match="is not STRING, INTEGER or BINARY")
    expect_invalid_pk(
        make_encoder((INTEGER,), ("n",)), (value,), match=r"column 'n' must be INTEGER, got bool"
    )


@pytest.mark.parametrize(
    ("value", "type_", "got"),
    [
        (1.0, INTEGER, "float 1.0"),
        ("1", INTEGER, "str '1'"),
        (None, INTEGER, "NoneType None"),
        (1, STRING, "int 1"),
        (b"a", STRING, "bytes b'a'"),
        ("a", BINARY, "str 'a'"),
        (1, BINARY, "int 1"),
        ([1], BINARY, r"list \[1\]"),
    ],
)
def test_wrong_types_are_rejected_naming_the_value(value, type_, got) -> None:
    expect_invalid_pk(encode_element, value, type_, match=f"must be {type_}, got {got}")
    expect_invalid_pk(
        make_encoder((STRING, type_), ("a", "b")), ("x", value), match=f"column 'b' must be {type_}"
    )


@pytest.mark.parametrize("value", [1.5, None, [1], object()])
def test_untyped_tuples_reject_other_python_types(value) -> None:
    expect_invalid_pk(encode_tuple, ["a", value], match="is not STRING, INTEGER or BINARY")


@pytest.mark.parametrize("bound", [INF_MIN, INF_MAX])
def test_infinities_are_not_key_values(bound) -> None:
    for type_ in (STRING, INTEGER, BINARY):
        expect_invalid_pk(
            encode_element, bound, type_, match=f"{bound!r} is only allowed in range bounds"
        )
    expect_invalid_pk(
        make_encoder((STRING,), ("k",)), (bound,), match="only allowed in range bounds"
    )
    expect_invalid_pk(make_encoder((INTEGER, STRING), ("a", "b")), (1, bound), match="column 'b'")


def test_unknown_type_is_rejected() -> None:
    expect_invalid_pk(encode_element, 1.0, "DOUBLE", match="unknown primary key type 'DOUBLE'")


ARITY_CASES = [
    (types, arity)
    for types in [(STRING,), (INTEGER, BINARY), (STRING, STRING, INTEGER)]
    for arity in range(5)
    if arity != len(types)
]


@pytest.mark.parametrize(("types", "arity"), ARITY_CASES)
def test_make_encoder_checks_arity(types: tuple[str, ...], arity: int) -> None:
    encode = make_encoder(types, names_for(types))
    values = ("x",) * arity
    err = expect_invalid_pk(encode, values, match=f"primary key needs {len(types)} column")
    assert "k0" in str(err)


@pytest.mark.parametrize(
    "data",
    [
        b"\x02a",  # no terminator
        b"\x01\x00\xff",  # escaped NUL, then no terminator
        b"\x15\x80\x00",  # short integer
        b"\x03",  # unknown type code
        b"\xff",  # prefix_end is a bound, never a key
    ],
)
def test_decode_rejects_malformed_keys(data: bytes) -> None:
    expect_invalid_pk(decode_tuple, data, match="key bytes")


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb"])
def test_lone_surrogates_are_rejected_as_invalid_pk(value: str) -> None:
    expect_invalid_pk(encode_element, value, STRING, match="is not valid Unicode text")
    expect_invalid_pk(make_encoder((STRING,), ("k",)), (value,), match="is not valid Unicode text")
    expect_invalid_pk(encode_tuple, [1, value], match="is not valid Unicode text")


@pytest.mark.parametrize("data", [b"\x02\xc3\x00", b"\x02\xff\x00", b"\x02\xed\xa0\x80\x00"])
def test_decode_rejects_invalid_utf8(data: bytes) -> None:
    expect_invalid_pk(decode_tuple, data, match="invalid UTF-8 in key bytes")


# --- the single-STRING fast path agrees with the generic path -----------------

fast_path_texts = st.one_of(
    texts,
    st.text(alphabet=st.characters(), max_size=8),  # lone surrogates too
    st.text(alphabet=st.characters(max_codepoint=0x7F), min_size=250, max_size=262),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1020, max_size=1030),
    st.text(alphabet="ab", min_size=1020, max_size=1030),
)


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except InvalidPK as err:
        return ("InvalidPK", str(err))


@given(fast_path_texts)
def test_single_string_fast_path_agrees_with_generic_path(value: str) -> None:
    fast = make_encoder((STRING,), ("k",))
    fast_result = outcome(fast, (value,))
    generic_result = outcome(encode_element, value, STRING, "k")
    assert fast_result[0] == generic_result[0]
    if fast_result[0] == "ok":
        assert fast_result[1] == generic_result[1] == encode_tuple((value,), (STRING,))
    else:
        assert fast_result[1] == generic_result[1]


# --- golden vectors -----------------------------------------------------------
# These are the type-code examples of docs/format.md; a test below checks the two agree.

GOLDEN_TUPLES: list[tuple[tuple, str]] = [
    (("a",), "02 61 00"),
    (("",), "02 00"),
    (("\u00e9",), "02 c3 a9 00"),
    (("a\x00b", 7), "02 61 00 ff 62 00 15 80 00 00 00 00 00 00 07"),
    ((0,), "15 80 00 00 00 00 00 00 00"),
    ((1,), "15 80 00 00 00 00 00 00 01"),
    ((-1,), "15 7f ff ff ff ff ff ff ff"),
    ((2**63 - 1,), "15 ff ff ff ff ff ff ff ff"),
    ((-(2**63),), "15 00 00 00 00 00 00 00 00"),
    ((b"",), "01 00"),
    ((b"\x00\xff",), "01 00 ff ff 00"),
    (("u1", 42, b"\x01"), "02 75 31 00 15 80 00 00 00 00 00 00 2a 01 01 00"),
]


@pytest.mark.parametrize(("t", "hex_"), GOLDEN_TUPLES, ids=[repr(t) for t, _ in GOLDEN_TUPLES])
def test_golden_tuple_encodings(t: tuple, hex_: str) -> None:
    encoded = bytes.fromhex(hex_)
    assert encode_tuple(t) == encoded
    assert same_typed(decode_tuple(encoded), t)


def golden_rows_in_format_md() -> list[tuple[tuple, str]]:
    """The rows between the golden-tuples markers of docs/format.md."""
    text = FORMAT_MD.read_text(encoding="utf-8")
    block = text.split("<!-- golden-tuples:begin -->")[1].split("<!-- golden-tuples:end -->")[0]
    rows = re.findall(r"^\|\s*`(.+?)`\s*\|\s*`([0-9a-f ]+)`\s*\|", block, re.MULTILINE)
    return [(ast.literal_eval(t), h) for t, h in rows]


def test_format_md_records_the_same_golden_vectors() -> None:
    assert golden_rows_in_format_md() == GOLDEN_TUPLES


# --- tripwire -------------------------------------------------------------------

TS = 1_700_000_000_000  # fixed timestamps: 2023-11-14T22:13:20Z in ms


def tripwire_encodings() -> dict[str, bytes]:
    schema = TableSchema(
        "users", 7, (("uid", STRING), ("seq", INTEGER)), TableOptions(3, 86400, 86400), 1700000000.5
    )
    return {
        "catalog_key": layout.catalog_key("users"),
        "counter_key": layout.counter_key("table_id"),
        "table_prefix": layout.table_prefix(7),
        "row_key_str_int": layout.row_key(7, encode_tuple(("u1", 42))),
        "row_key_bin_neg": layout.row_key(2**32 - 1, encode_tuple((b"\x00\xff", -5))),
        "row_key_nul_utf8": layout.row_key(1, encode_tuple(("a\x00\u00e9",))),
        "catalog_value": schema.to_json(),
        "row_latest_shared_ts": rowcodec.encode_latest(
            ("u1", 42),
            {"name": "Ann", "age": 37, "score": 9.5, "ok": True, "raw": b"\x00\xff"},
            {"name": TS, "age": TS, "score": TS, "ok": TS, "raw": TS},
        ),
        "row_latest_own_ts": rowcodec.encode_latest(
            ("u2", -1), {"a": "x", "b": 1}, {"a": TS, "b": TS + 1}
        ),
        "row_versions": rowcodec.encode_versions(
            (b"\x01",),
            {"n": [(TS + 2, 3), (TS + 1, 2.0), (TS, "two")], "f": [(TS, False)]},
        ),
    }


# DO NOT UPDATE these literals unless you are deliberately changing the on-disk format;
# then bump FORMAT and write a migration.
TRIPWIRE_HEX = {
    "catalog_key": "017573657273",
    "counter_key": "027461626c655f6964",
    "table_prefix": "1000000007",
    "row_key_str_int": "10000000070275310015800000000000002a",
    "row_key_bin_neg": "10ffffffff0100ffff00157ffffffffffffffb",
    "row_key_nul_utf8": "1000000001026100ffc3a900",
    "catalog_value": (  # format 2: the schema records its families
        "7b22637265617465645f6174223a20313730303030303030302e352c202266616d696c696573223a205b"
        "7b226964223a20302c20226e616d65223a202264656661756c74227d5d2c20226e616d65223a20227573"
        "657273222c20226f7074696f6e73223a207b226d61785f74696d655f646576696174696f6e223a203836"
        "3430302c20226d61785f76657273696f6e73223a20332c202274746c223a2038363430307d2c20227072"
        "696d6172795f6b6579223a205b5b22756964222c2022535452494e47225d2c205b22736571222c202249"
        "4e5445474552225d5d2c20227461626c655f6964223a20377d"
    ),
    "row_latest_shared_ts": (
        "950192a275312a85a46e616d65a3416e6ea361676525a573636f7265cb4023000000000000a26f6bc3"
        "a3726177c40200ffcf0000018bcfe56800c0"
    ),
    "row_latest_own_ts": (
        "950192a27532ff82a161a178a1620182a161cf0000018bcfe56800a162cf0000018bcfe56801c0"
    ),
    "row_versions": (
        "950191c4010182a16e03a166c282a16ecf0000018bcfe56802a166cf0000018bcfe5680081a16e94cf00"
        "00018bcfe56801cb4000000000000000cf0000018bcfe56800a374776f"
    ),
}


def test_on_disk_format_tripwire() -> None:
    assert rowcodec.FORMAT == 1
    assert (codec.CODE_BINARY, codec.CODE_STRING, codec.CODE_INTEGER) == (0x01, 0x02, 0x15)
    assert (layout.CATALOG, layout.COUNTERS, layout.ROWS) == (b"\x01", b"\x02", b"\x10")
    actual = {name: blob.hex() for name, blob in tripwire_encodings().items()}
    assert actual == TRIPWIRE_HEX


def test_format_md_records_the_tripwire_blobs() -> None:
    text = FORMAT_MD.read_text(encoding="utf-8")
    for name in ("row_latest_shared_ts", "row_latest_own_ts", "row_versions"):
        assert TRIPWIRE_HEX[name] in text, name
    assert bytes.fromhex(TRIPWIRE_HEX["catalog_value"]).decode() in text


@given(st.lists(st.text(max_size=40), min_size=1, max_size=50))
def test_encode_keys_matches_one_by_one(texts: list[str]) -> None:
    """The one-pass bulk encoder gives the same bytes as encoding key by key."""
    encode = codec.make_encoder(("STRING",), ("k",))
    keys = [(t,) for t in texts]
    try:
        expected = [b"P" + encode(k) for k in keys]
    except Exception as exc:  # e.g. a lone surrogate: both paths must refuse it
        with pytest.raises(type(exc)):
            codec.encode_keys(b"P", keys, ("STRING",), encode)
        return
    assert codec.encode_keys(b"P", keys, ("STRING",), encode) == expected
    ints = [(i,) for i in range(len(texts))]
    int_encode = codec.make_encoder(("INTEGER",), ("i",))
    assert codec.encode_keys(b"P", ints, ("INTEGER",), int_encode) == [
        b"P" + int_encode(k) for k in ints
    ]
