"""HLL count-distinct states: golden bytes, lattice properties of merge, and accuracy."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widetable.bigtable import hll
from widetable.bigtable.hll import (
    check_hll,
    hll_add,
    hll_add_many,
    hll_count,
    hll_merge,
    hll_new,
)
from widetable.errors import ParameterInvalid


def _state(items) -> bytes:
    return hll_add_many(hll_new(), items)


# ---- golden vectors: the on-disk format, the hash and the estimator ---------------------

def test_golden_empty_and_one_item():
    assert hll_new() == bytes.fromhex("010e1900")
    # blake2b-64(b"a") = 40f89e395b66422f: index25 = 0x81f13c, rho25 = 2
    assert hll_add(hll_new(), b"a") == bytes.fromhex("010e1900207c4f02")
    # the int 7 is counted as its 8 big-endian bytes; entries stay sorted by index
    assert hll_add(hll_add(hll_new(), b"a"), 7) == bytes.fromhex("010e1900207c4f0239ba83c1")
    assert hll_add(hll_new(), 7) == hll_add(hll_new(), (7).to_bytes(8, "big"))


def test_golden_sparse_and_dense_states():
    sparse = _state(b"%d" % i for i in range(1000))
    assert sparse[3] == hll.SPARSE and len(sparse) == 4 + 4 * 1000
    assert hashlib.sha256(sparse).hexdigest() == (
        "440a132b06d9045cbc844a02970ce6f572ebf0c87eb41b351e815eeeeade9a62")
    assert hll_count(sparse) == 1000
    dense = _state(b"%d" % i for i in range(5000))
    assert dense[:4] == bytes.fromhex("010e1901") and len(dense) == 4 + 16384
    assert dense[4:20].hex() == "00000001000003000004000200000000"
    assert hashlib.sha256(dense).hexdigest() == (
        "9dd475c15033a8fb0552248a8d5ff6b3cae91ab964b5afe86013e0340520e285")
    assert hll_count(dense) == 4956


def test_sparse_becomes_dense_past_4096_entries():
    s = hll_new()
    i = 0
    while s[3] == hll.SPARSE:
        s = hll_add(s, b"k%d" % i)
        i += 1
    assert i > hll.SPARSE_MAX  # collisions of index25 keep a few items from adding entries
    assert len(s) == 4 + hll.M


# ---- properties -------------------------------------------------------------------------

items = st.one_of(st.binary(max_size=12), st.integers(-(2**63), 2**63 - 1))
item_sets = st.lists(items, max_size=60)
# big sets cross into dense mode; built from a seed so hypothesis can shrink them cheaply
big_sets = st.tuples(st.integers(0, 10**6), st.integers(0, 6000)).map(
    lambda t: [b"%d-%d" % (t[0], i) for i in range(t[1])])
any_sets = st.one_of(item_sets, big_sets)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_sets, any_sets, any_sets)
def test_merge_is_commutative_associative_idempotent(xs, ys, zs):
    a, b, c = _state(xs), _state(ys), _state(zs)
    assert hll_merge(a, b) == hll_merge(b, a)
    assert hll_merge(hll_merge(a, b), c) == hll_merge(a, hll_merge(b, c))
    assert hll_merge(a, a) == a
    assert hll_merge(a, hll_new()) == a
    # merging equals adding the union: the representation is canonical
    assert hll_merge(a, b) == _state(xs + ys)


def test_merge_across_modes_is_the_union():
    small = [b"s%d" % i for i in range(300)]
    mid = [b"m%d" % i for i in range(3000)]
    big = [b"b%d" % i for i in range(9000)]
    for xs, ys in ((small, mid), (mid, mid[:1500] + small), (small, big), (big, mid),
                   (big, big[3000:] + small)):
        a, b = _state(xs), _state(ys)
        assert hll_merge(a, b) == hll_merge(b, a) == _state(xs + ys)
    assert _state(mid)[3] == hll.SPARSE
    assert hll_merge(_state(mid), _state(big[:3000]))[3] == hll.DENSE


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_sets, st.data())
def test_adding_a_seen_item_changes_nothing(xs, data):
    s = _state(xs)
    if xs:
        seen = data.draw(st.sampled_from(xs))
        assert hll_add(s, seen) is s
    assert _state(xs + xs) == s


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_sets)
def test_add_one_by_one_equals_add_many_and_order_is_irrelevant(xs):
    one = hll_new()
    for x in xs:
        one = hll_add(one, x)
    assert one == _state(xs) == _state(list(reversed(xs)))
    check_hll(one)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=16), unique=True, max_size=300))
def test_small_counts_are_exact_in_sparse_mode(xs):
    # 2^25 sparse registers: collisions among a few hundred items are vanishingly rare
    assert hll_count(_state(xs)) == len(xs)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_relative_error_on_1e5_distinct_items(seed):
    n = 100_000
    s = _state(b"%d:%d" % (seed, i) for i in range(n))
    # standard error 1.04/sqrt(16384) = 0.81%; 3% is beyond 3.5 standard errors
    assert abs(hll_count(s) - n) / n < 0.03


def test_relative_error_across_the_range():
    for n in (10, 1000, 4500, 20_000, 300_000):
        s = _state(b"r%d" % i for i in range(n))
        assert abs(hll_count(s) - n) <= max(1, 0.03 * n), n


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([0, 1, 26, 51]))
def test_dense_register_max_is_bytewise(seed, top):
    rng = random.Random(seed)
    # values from 0..top so equal, all-zero and all-maximal lanes all occur
    a = bytes(rng.randint(0, top) for _ in range(hll.M))
    b = bytes(rng.randint(0, top) for _ in range(hll.M))
    assert hll._register_max(a, b) == bytes(map(max, a, b))
    assert hll._register_max(a, a) == a


# ---- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("state, named", [
    (b"", "header"),
    (b"\x02\x0e\x19\x00", "header 020e1900"),
    (b"\x01\x0c\x19\x00", "header"),
    (b"\x01\x0e\x19\x00\x00\x00", "2 bytes"),
    (b"\x01\x0e\x19\x01" + b"\x00" * 100, "100 bytes"),
    (b"\x01\x0e\x19\x07", "kind 7"),
])
def test_malformed_states_are_refused(state, named):
    for op in (lambda: hll_add(state, b"x"), lambda: hll_count(state),
               lambda: hll_merge(state, hll_new()), lambda: check_hll(state)):
        with pytest.raises(ParameterInvalid) as info:
            op()
        assert named in str(info.value)


def test_merge_validates_every_register_and_entry():
    dense = bytearray(_state(b"%d" % i for i in range(5000)))
    dense[100] = 52
    with pytest.raises(ParameterInvalid, match="register value 52"):
        hll_merge(hll_new(), bytes(dense))
    unsorted = hll_new() + (5 << 6 | 1).to_bytes(4, "big") + (3 << 6 | 1).to_bytes(4, "big")
    with pytest.raises(ParameterInvalid, match="sparse entry"):
        hll_merge(unsorted, hll_new())
    bad_rho = hll_new() + (5 << 6 | 41).to_bytes(4, "big")
    with pytest.raises(ParameterInvalid, match="sparse entry"):
        check_hll(bad_rho)
    with pytest.raises(ParameterInvalid, match="must be bytes"):
        check_hll("010e1900")


@pytest.mark.parametrize("item", [2**63, -(2**63) - 1, "text", 1.5, None, True])
def test_bad_items_are_refused(item):
    with pytest.raises(ParameterInvalid):
        hll_add(hll_new(), item)
