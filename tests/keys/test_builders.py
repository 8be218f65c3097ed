"""Key builders: round trips, order, golden values from the seeds, and errors."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widetable.errors import PARAMETER_INVALID, ParameterInvalid
from widetable.keys import builders as b

LONG_MAX = 2**63 - 1

# Characters that sort above "," (0x2C); codec="utf-8" leaves out surrogates.
above_comma = st.text(alphabet=st.characters(min_codepoint=0x2D, codec="utf-8"), max_size=12)
key_values = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8")),
    st.integers(),
)
seps = st.sampled_from([",", ":", "#", "/", "|", "\x00"])


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def expect_invalid(fn, *args, match: str, **kwargs) -> ParameterInvalid:
    with pytest.raises(ParameterInvalid, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.code == PARAMETER_INVALID
    return info.value


# --- hash prefix -----------------------------------------------------------


def test_hash_prefix_golden_seed_000_machine_ip() -> None:
    expected = md5_hex(b"10.10.0.1")[:4] + ",10.10.0.1"
    assert b.hash_prefix("10.10.0.1") == expected
    # Tripwire: this key is embedded in stored data. DO NOT CHANGE.
    assert b.hash_prefix("10.10.0.1") == "7e4a,10.10.0.1"


def test_hash_prefix_hashes_int_as_decimal_and_bytes_as_is() -> None:
    assert b.hash_prefix(123) == md5_hex(b"123")[:4] + ",123"
    assert b.hash_prefix(-7, n=6) == md5_hex(b"-7")[:6] + ",-7"
    assert b.hash_prefix(b"10.10.0.1") == b.hash_prefix("10.10.0.1")
    assert b.hash_prefix("é", sep=":") == md5_hex("é".encode())[:4] + ":é"


@given(value=key_values, n=st.integers(1, 32), sep=seps)
def test_hash_prefix_round_trip_and_determinism(value, n, sep) -> None:
    key = b.hash_prefix(value, n=n, sep=sep)
    assert key == b.hash_prefix(value, n=n, sep=sep)
    assert key[:n] == md5_hex(str(value).encode())[:n]
    assert b.strip_hash_prefix(key, n=n, sep=sep) == str(value)


def test_hash_prefix_spreads_sequential_ids_over_first_hex_digit() -> None:
    # Seed 000 情境二: sequential OrderNumbers must not stay adjacent.
    counts = Counter(b.hash_prefix(i)[0] for i in range(10_000))
    assert set(counts) == set("0123456789abcdef")
    expected = 10_000 / 16
    chi_square = sum((c - expected) ** 2 / expected for c in counts.values())
    # Deterministic input, so no flakiness: 37.7 is the p=0.001 critical value at 15 d.o.f.
    assert chi_square < 37.7
    assert all(0.85 * expected < c < 1.15 * expected for c in counts.values())


def test_strip_hash_prefix_refuses_bad_keys() -> None:
    expect_invalid(b.strip_hash_prefix, "0000,10.10.0.1", match="not the MD5")
    assert b.strip_hash_prefix("0000,10.10.0.1", verify=False) == "10.10.0.1"
    expect_invalid(b.strip_hash_prefix, "7e4a:10.10.0.1", match="'7e4a:10.10.0.1'")
    expect_invalid(b.strip_hash_prefix, "7E4A,10.10.0.1", match="hex digits")
    expect_invalid(b.strip_hash_prefix, "7e4", match="hex digits")


def test_hash_prefix_refuses_bad_arguments() -> None:
    expect_invalid(b.hash_prefix, 1.5, match="1.5")
    expect_invalid(b.hash_prefix, True, match="True")
    expect_invalid(b.hash_prefix, b"\xff\xfe", match="not UTF-8")
    expect_invalid(b.hash_prefix, "\ud800", match="not valid Unicode")
    for n in (0, 33, True):
        expect_invalid(b.hash_prefix, "x", n=n, match="hash prefix length")
    expect_invalid(b.hash_prefix, "x", sep="::", match="single character")


# --- buckets and salt ------------------------------------------------------


@given(value=key_values, buckets=st.integers(1, 10_000))
def test_bucket_is_md5_mod_n_and_in_range(value, buckets) -> None:
    number = b.bucket(value, buckets)
    assert 0 <= number < buckets
    digest = hashlib.md5(str(value).encode()).digest()
    assert number == int.from_bytes(digest, "big") % buckets


def test_bucket_golden() -> None:
    # Tripwire: bucket numbers are embedded in stored data. DO NOT CHANGE.
    # Modulo 16 is the last hex digit of the MD5: ...8, ...0 and ...e.
    assert [b.bucket(v, 16) for v in ("10.10.0.1", 123, b"a100")] == [8, 0, 14]
    assert b.bucket(b"\xff\x00", 7) == int.from_bytes(hashlib.md5(b"\xff\x00").digest()) % 7


def test_bucket_and_hash_prefix_are_stable_across_processes() -> None:
    code = (
        "from widetable.keys import builders as b;"
        "print(b.bucket('10.10.0.1', 1000), b.bucket(42, 97), b.hash_prefix('u1'))"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    here = f"{b.bucket('10.10.0.1', 1000)} {b.bucket(42, 97)} {b.hash_prefix('u1')}\n"
    assert outputs == {here}


def test_bucket_spreads_whole_second_timestamps_unlike_plain_modulo() -> None:
    # Seed 000 方法三 writes timestamp % 16; millisecond timestamps of whole
    # seconds are multiples of 8, so plain modulo fills only two buckets.
    stamps = [1_718_000_001_000 + 1000 * i for i in range(1600)]
    assert {ts % 16 for ts in stamps} == {0, 8}
    counts = Counter(b.bucket(ts, 16) for ts in stamps)
    assert set(counts) == set(range(16))
    assert min(counts.values()) > 50


def test_bucket_refuses_bad_counts() -> None:
    for buckets in (0, -1, True, 1.5):
        expect_invalid(b.bucket, "x", buckets, match="bucket count")


def test_salted_golden_and_padding() -> None:
    assert b.salted("10.10.0.1", 16) == f"{b.bucket('10.10.0.1', 16):02d},10.10.0.1"
    assert b.salted("10.10.0.1", 16) == "08,10.10.0.1"
    assert b.salted(123, 1000, sep=":") == f"{b.bucket(123, 1000):03d}:123"
    assert b.salted("x", 1) == "0,x"
    assert b.salted("x", 10).startswith(str(b.bucket("x", 10)) + ",")


@given(value=key_values, buckets=st.integers(1, 5000), sep=seps)
def test_salted_round_trip_and_prefixes(value, buckets, sep) -> None:
    key = b.salted(value, buckets, sep=sep)
    assert b.strip_salt(key, buckets, sep=sep) == str(value)
    prefix = b.salt_prefixes(buckets, sep=sep)[b.bucket(value, buckets)]
    assert key.startswith(prefix)


@pytest.mark.parametrize("buckets", [1, 10, 16, 100, 1001])
def test_salt_prefixes_sort_in_bucket_order(buckets) -> None:
    prefixes = b.salt_prefixes(buckets)
    assert len(prefixes) == buckets == len(set(prefixes))
    assert prefixes == sorted(prefixes)
    assert all(int(p[:-1]) == i for i, p in enumerate(prefixes))


def test_strip_salt_refuses_bad_keys() -> None:
    wrong = (b.bucket("10.10.0.1", 16) + 1) % 16
    expect_invalid(b.strip_salt, f"{wrong:02d},10.10.0.1", 16, match="not the bucket")
    assert b.strip_salt(f"{wrong:02d},10.10.0.1", 16, verify=False) == "10.10.0.1"
    expect_invalid(b.strip_salt, "16,x", 16, match="not the bucket")
    expect_invalid(b.strip_salt, "8,10.10.0.1", 16, match="'8,10.10.0.1'")
    expect_invalid(b.strip_salt, "08:10.10.0.1", 16, match="2-digit bucket")


# --- concatenation ---------------------------------------------------------


def test_concat_zero_pads_like_seed_000() -> None:
    assert b.concat(123, widths=[8]) == "00000123"
    assert b.concat(54, "a100", 7, widths=[6, None, None]) == "000054,a100," + "7".zfill(20)
    assert b.concat("phone", "4c410523", "20200501", sep="#") == "phone#4c410523#20200501"


@given(x=st.integers(0, 10**20 - 1), y=st.integers(0, 10**20 - 1))
def test_concat_ints_keep_numeric_order(x, y) -> None:
    kx, ky = b.concat(x), b.concat(y)
    assert len(kx) == len(ky) == 20
    assert (kx < ky) == (x < y) and (kx == ky) == (x == y)


@given(x=st.integers(-(2**63), LONG_MAX), y=st.integers(-(2**63), LONG_MAX))
def test_concat_offset_orders_signed_int64(x, y) -> None:
    kx, ky = b.concat(x, offset=b.INT64_OFFSET), b.concat(y, offset=b.INT64_OFFSET)
    assert (kx < ky) == (x < y)
    assert b.split_concat(kx, types=[int], offset=b.INT64_OFFSET) == (x,)


@given(x=st.tuples(above_comma, above_comma), y=st.tuples(above_comma, above_comma))
def test_concat_comma_keeps_tuple_order(x, y) -> None:
    kx, ky = b.concat(*x), b.concat(*y)
    assert (kx < ky) == (x < y) and (kx == ky) == (x == y)


@given(
    parts=st.lists(st.one_of(above_comma, st.integers(0, 10**12)), min_size=1, max_size=5),
    extra=st.one_of(above_comma, st.integers(0, 10**12)),
)
def test_concat_round_trip_and_prefix_sorts_first(parts, extra) -> None:
    types = [type(p) for p in parts]
    key = b.concat(*parts)
    assert b.split_concat(key, types=types) == tuple(parts)
    longer = b.concat(*parts, extra)
    assert longer.startswith(key + ",")
    assert key < longer


def test_seed_000_colon_separator_breaks_seller_id_order() -> None:
    # The seed's table: joined with ":", the row of a1001 sorts before "000054:a100:".
    first, second = ("000054", "a100", "c1"), ("000054", "a1001", "c1")
    assert first < second
    assert ":".join(second) < ":".join(first)
    assert ":".join(second).startswith("000054:a1001")
    assert ":".join(first).startswith("000054:a100:")
    assert ",".join(first) < ",".join(second)

    error = expect_invalid(b.check_separator, ":", ["a100", "a1001"], match="':'")
    assert "'a100'" in str(error) and "0x3A" in str(error)
    expect_invalid(b.concat, "000054", "a100", sep=":", match="separator ':'")
    expect_invalid(b.concat, "000054", "a1001", sep=":", match="separator ':'")
    b.check_separator(",", ["000054", "a100", "a1001"])
    assert b.concat("000054", "a100") < b.concat("000054", "a1001")


def test_check_separator_refuses_characters_at_or_below_it() -> None:
    expect_invalid(b.check_separator, ",", ["ok", "a,b"], match="'a,b'")
    expect_invalid(b.check_separator, ",", ["a b"], match="' ' \\(0x20\\)")
    expect_invalid(b.check_separator, ":", [7], match="separator ':'")
    b.check_separator("/", [7, "", "a"])
    assert b.separator_conflict(":", ["zz", "a100"]) == "a100"
    assert b.separator_conflict(",", ["zz", "a100"]) is None
    expect_invalid(b.check_separator, ",", [1.5], match="1.5")
    expect_invalid(b.check_separator, ",;", ["a"], match="single character")


def test_concat_refuses_bad_parts() -> None:
    expect_invalid(b.concat, -1, match="integer part -1 is negative")
    expect_invalid(b.concat, 10**20, match=f"{10**20}")
    expect_invalid(b.concat, 1000, widths=[3], match="1000")
    expect_invalid(b.concat, "a", widths=[3], match="string part 'a'")
    expect_invalid(b.concat, 1, 2, widths=[3], match="1 entries for 2 parts")
    expect_invalid(b.concat, 1, widths=[0], match="width")
    expect_invalid(b.concat, True, match="True")
    expect_invalid(b.concat, b"x", match="b'x'")
    expect_invalid(b.concat, match="at least one")


def test_split_concat_refuses_mismatched_keys() -> None:
    assert b.split_concat("a,b") == ("a", "b")
    expect_invalid(b.split_concat, "a,b", types=[str], match="'a,b' has 2 parts")
    expect_invalid(b.split_concat, "a,b", types=[str, int], match="'b'")
    expect_invalid(b.split_concat, "a,", types=[str, int], match="''")
    expect_invalid(b.split_concat, "a", types=[float], match="float")


@pytest.mark.parametrize("key", [123, b"7e4a,x", None, ["a,b"]])
def test_inverse_builders_refuse_non_string_keys(key) -> None:
    """A key that is not a string is a caller error, named, never a raw TypeError."""
    expect_invalid(b.strip_hash_prefix, key, match=r"key .* must be a string")
    expect_invalid(b.strip_salt, key, 16, match=r"key .* must be a string")
    expect_invalid(b.split_concat, key, match=r"key .* must be a string")


# --- reversals -------------------------------------------------------------


def test_reverse_timestamp_golden() -> None:
    assert b.reverse_timestamp(0) == LONG_MAX
    assert b.reverse_timestamp(1425330757685) == LONG_MAX - 1425330757685
    assert b.reverse_timestamp_str(LONG_MAX) == "0" * 19
    assert b.reverse_timestamp_str(1425330757685) == "9223370611524018122"


@given(x=st.integers(0, LONG_MAX), y=st.integers(0, LONG_MAX))
def test_reverse_timestamp_reverses_order_and_is_self_inverse(x, y) -> None:
    assert b.reverse_timestamp(b.reverse_timestamp(x)) == x
    assert (b.reverse_timestamp(x) < b.reverse_timestamp(y)) == (x > y)
    sx, sy = b.reverse_timestamp_str(x), b.reverse_timestamp_str(y)
    assert len(sx) == 19 and (sx < sy) == (x > y)
    assert b.parse_reverse_timestamp_str(sx) == x


def test_reverse_timestamp_refuses_bad_values() -> None:
    for ts in (-1, 2**63, True, 1.0):
        expect_invalid(b.reverse_timestamp, ts, match="timestamp")
    for text in ("123", "9" * 19, "-" + "1" * 18, "١" * 19, 5):
        expect_invalid(b.parse_reverse_timestamp_str, text, match="reversed timestamp")


def test_reverse_digits_golden_seed_001() -> None:
    assert b.reverse_digits("13800138000") == "00083100831"


@given(digits=st.text(alphabet="0123456789", min_size=1))
def test_reverse_digits_is_self_inverse(digits) -> None:
    assert b.reverse_digits(b.reverse_digits(digits)) == digits


def test_reverse_digits_spreads_sequential_ids() -> None:
    heads = Counter(b.reverse_digits(str(i))[0] for i in range(10**6, 10**6 + 1000))
    assert heads == Counter({d: 100 for d in "0123456789"})


def test_reverse_digits_refuses_non_digit_strings() -> None:
    for value in (13800138000, "", "138-0013", "١٢٣"):
        expect_invalid(b.reverse_digits, value, match="string of digits")


def test_reverse_domain_golden_seed_004() -> None:
    assert b.reverse_domain("mail.google.com") == "com.google.mail"
    hosts = ["drive.google.com", "en.wikipedia.org", "maps.google.com"]
    assert sorted(map(b.reverse_domain, hosts)) == [
        "com.google.drive",
        "com.google.maps",
        "org.wikipedia.en",
    ]


labels = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1), min_size=1)


@given(base=labels, sub=labels)
def test_reverse_domain_self_inverse_and_groups_subdomains(base, sub) -> None:
    domain = ".".join(base)
    assert b.reverse_domain(b.reverse_domain(domain)) == domain
    host = ".".join(sub) + "." + domain
    assert b.reverse_domain(host).startswith(b.reverse_domain(domain) + ".")


def test_reverse_domain_refuses_empty_labels() -> None:
    for value in ("", ".com", "google.com.", "a..b", None):
        expect_invalid(b.reverse_domain, value, match="single dots")


def test_builders_are_exported() -> None:
    from widetable import keys

    for name in ("hash_prefix", "bucket", "salted", "concat", "split_concat", "reverse_domain"):
        assert getattr(keys, name) is getattr(b, name)
        assert name in keys.__all__
