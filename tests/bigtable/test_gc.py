"""GC rules: Bigtable's GcRule semantics per column, validation, and the catalog's JSON form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from widetable.bigtable.gc import (
    Intersection,
    MaxAge,
    MaxVersions,
    Union,
    check_gc,
    describe_gc,
    gc_expired,
    gc_from_dict,
    gc_to_dict,
)
from widetable.errors import ParameterInvalid

DAY = 86_400_000_000
NOW = 100 * DAY


def test_none_keeps_everything():
    assert gc_expired(None, [NOW, 1000, 0], NOW) == [False, False, False]
    assert gc_expired(MaxVersions(1), [], NOW) == []


def test_max_versions_deletes_after_the_n_newest():
    assert gc_expired(MaxVersions(2), [5000, 4000, 3000, 2000], NOW) == [False, False, True, True]
    assert gc_expired(MaxVersions(9), [5000, 4000], NOW) == [False, False]


def test_max_age_deletes_cells_older_than_now_minus_age():
    versions = [NOW, NOW - DAY, NOW - DAY - 1000, 0]
    # exactly `age` old is not older than the age: kept
    assert gc_expired(MaxAge(DAY), versions, NOW) == [False, False, True, True]


def test_union_deletes_what_any_rule_deletes():
    rule = Union((MaxVersions(2), MaxAge(DAY)))
    versions = [NOW, NOW - 2 * DAY, NOW - 3 * DAY]   # the second is too old, the third both
    assert gc_expired(rule, versions, NOW) == [False, True, True]


def test_intersection_deletes_only_what_every_rule_deletes():
    rule = Intersection((MaxVersions(1), MaxAge(DAY)))
    versions = [NOW - 5 * DAY, NOW - 1000, NOW - 2 * DAY]
    # the newest is old but within max_versions; the second is recent; the third is both
    assert gc_expired(rule, versions, NOW) == [False, False, True]


def test_nesting_evaluates_each_rule_on_the_whole_column():
    # keep 3 versions, but anything beyond the newest goes once older than a day
    rule = Union((MaxVersions(3), Intersection((MaxVersions(1), MaxAge(DAY)))))
    versions = [NOW - 3 * DAY, NOW - 1000, NOW - 2 * DAY, NOW - 2000]
    assert gc_expired(rule, versions, NOW) == [False, False, True, True]


def test_lists_become_tuples():
    assert Union([MaxVersions(1)]) == Union((MaxVersions(1),))
    assert hash(Intersection([MaxAge(1000)]))


@pytest.mark.parametrize("rule, named", [
    (MaxVersions(0), "0"),
    (MaxVersions(-3), "-3"),
    (MaxVersions(True), "True"),
    (MaxAge(-1000), "-1000"),
    (MaxAge(0), "0"),
    (MaxAge(1500), "1500"),
    (Union(()), "()"),
    (Intersection(()), "()"),
    (Union((MaxVersions(1), MaxVersions(0))), "0"),
    (Intersection((None,)), "None"),
    ("max_versions", "max_versions"),
])
def test_check_gc_names_the_bad_value(rule, named):
    with pytest.raises(ParameterInvalid) as info:
        check_gc(rule)
    assert named in str(info.value)


def test_check_gc_refuses_deep_nesting():
    rule = MaxVersions(1)
    for _ in range(25):
        rule = Union((rule,))
    with pytest.raises(ParameterInvalid, match="deeper"):
        check_gc(rule)


def test_valid_rules_pass():
    for rule in (None, MaxVersions(1), MaxAge(1000),
                 Union((MaxVersions(1), Intersection((MaxAge(DAY), MaxVersions(5)))))):
        check_gc(rule)


def test_dict_form_is_the_catalogs_json():
    rule = Union((MaxVersions(2), Intersection((MaxAge(DAY), MaxVersions(1)))))
    d = gc_to_dict(rule)
    assert d == {"union": [{"max_versions": 2},
                           {"intersection": [{"max_age_micros": DAY}, {"max_versions": 1}]}]}
    assert gc_from_dict(json.loads(json.dumps(d))) == rule
    assert gc_to_dict(None) is None and gc_from_dict(None) is None


@pytest.mark.parametrize("d", [{"max_versions": 0}, {"max_age": 5}, {}, [1],
                               {"union": []}, {"union": {"max_versions": 1}},
                               {"max_versions": 1, "max_age_micros": 1000}])
def test_from_dict_refuses_bad_forms(d):
    with pytest.raises(ParameterInvalid):
        gc_from_dict(d)


def test_describe_gc():
    assert describe_gc(None) == "(keep all)"
    assert describe_gc(Union((MaxVersions(2), MaxAge(DAY)))) == "(maxversions=2 || maxage=1d)"
    assert describe_gc(Intersection((MaxAge(90_000),))) == "maxage=90ms"


# ---- properties against a direct reading of the definitions ---------------------------

rules = st.recursive(
    st.one_of(st.builds(MaxVersions, st.integers(1, 6)),
              st.builds(MaxAge, st.integers(1, 10).map(lambda d: d * DAY // 4))),
    lambda sub: st.one_of(st.builds(Union, st.lists(sub, min_size=1, max_size=3).map(tuple)),
                          st.builds(Intersection,
                                    st.lists(sub, min_size=1, max_size=3).map(tuple))),
    max_leaves=8)
columns = st.lists(st.integers(0, 4 * DAY // 1000).map(lambda ms: NOW - ms * 1000),
                   unique=True, max_size=10).map(lambda v: sorted(v, reverse=True))


def _deletes(rule, index, ts, now):
    """One cell, by the definitions: position among the column's versions and age."""
    if isinstance(rule, MaxVersions):
        return index >= rule.n
    if isinstance(rule, MaxAge):
        return ts < now - rule.micros
    subs = [_deletes(r, index, ts, now) for r in rule.rules]
    return any(subs) if isinstance(rule, Union) else all(subs)


@settings(max_examples=300, deadline=None)
@given(rules, columns)
def test_gc_expired_matches_the_definitions(rule, versions):
    check_gc(rule)
    assert gc_expired(rule, versions, NOW) == [
        _deletes(rule, i, ts, NOW) for i, ts in enumerate(versions)]
    assert gc_from_dict(gc_to_dict(rule)) == rule


@settings(max_examples=200, deadline=None)
@given(rules, columns)
def test_gc_is_stable_under_its_own_purge(rule, versions):
    """A second pass at the same time deletes nothing more, so the background purge and
    read-time hiding agree however often the purge runs."""
    flags = gc_expired(rule, versions, NOW)
    kept = [ts for ts, dead in zip(versions, flags) if not dead]
    again = gc_expired(rule, kept, NOW)
    # cells survive a second pass whenever the first pass left them: deletion is monotone
    # (removing cells only lowers the positions of the others, and ages do not change)
    assert not any(again)
