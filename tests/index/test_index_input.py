"""Bad create_index arguments, and index views once the store is closed."""

from __future__ import annotations

import pytest

from widetable import WidetableError
from widetable.errors import ParameterInvalid

PK = [("k", "STRING"), ("n", "INTEGER")]
DEFINED = [("s", "STRING"), ("total", "INTEGER")]


@pytest.mark.parametrize("options, message", [
    ({"primary_key": [["s"]]}, "index primary key column names must be strings"),
    ({"primary_key": [None]}, "index primary key column names must be strings"),
    ({"primary_key": ["s"], "defined_columns": [["total"]]}, "defined column names must be strings"),
    ({"primary_key": ["s"], "defined_columns": "total"}, "defined_columns must be a list"),
    ({"primary_key": ["s"], "defined_columns": 5}, "defined_columns must be a list"),
])
def test_malformed_create_index_arguments_are_parameter_errors(db, options, message):
    db.create_table("t", PK, defined_columns=DEFINED)
    with pytest.raises(WidetableError, match=message) as err:
        db.create_index("t", "i", progress=False, **options)
    assert err.value.code == "OTSParameterInvalid"
    assert db.describe_table("t").indexes == []


def test_index_views_refuse_calls_once_the_store_is_closed(open_db):
    db = open_db()
    db.create_table("t", PK, defined_columns=DEFINED)
    db.table("t").put_row(("a", 1), {"s": "p"})
    db.create_index("t", "g", ["s"], progress=False)
    db.create_index("t", "l", ["k", "s"], index_type="LOCAL", progress=False)
    assert db.wait_for_indexes(30)
    views = [db.table("g"), db.table("l")]
    db.close()
    for view in views:
        with pytest.raises(WidetableError, match="closed") as err:
            view.get_row(("p", "a", 1))
        assert err.value.code == "OTSParameterInvalid"
        with pytest.raises(WidetableError, match="closed"):
            list(view.scan())


def test_a_transaction_cannot_be_started_on_an_index(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    db.create_index("t", "l", ["k", "s"], index_type="LOCAL", progress=False)
    with pytest.raises(WidetableError, match="'l' is an index of table 't'") as err:
        db.start_local_transaction("l", "a")
    assert err.value.code == "OTSParameterInvalid"
    with db.start_local_transaction("t", "a") as txn:  # its table takes one
        txn.put_row(("a", 1), {"s": "x"})
    assert [r.primary_key for r in db.table("l").scan()] == [("a", "x", 1)]


@pytest.mark.parametrize("flag", ["false", 0, 1, None])
def test_flags_must_be_booleans(db, flag):
    """``bool("false")`` is True: a flag that is not True or False is refused, naming it."""
    db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
    if flag is not None:  # None is "unchanged" for update_table
        with pytest.raises(ParameterInvalid, match=f"stream must be True or False, got {flag!r}"):
            db.create_table("u", [("k", "STRING")], stream=flag)
        assert "u" not in db.list_tables()
        with pytest.raises(ParameterInvalid, match="stream must be True or False"):
            db.update_table("t", stream=flag)
        assert db.describe_table("t").stream is False
    with pytest.raises(ParameterInvalid, match=f"include_base_data must be True or False, got {flag!r}"):
        db.create_index("t", "ix", ["c"], include_base_data=flag)
    with pytest.raises(ParameterInvalid, match="progress must be True or False"):
        db.create_index("t", "ix", ["c"], progress=flag if flag is not None else "yes")
    assert db.describe_table("t").indexes == []


@pytest.mark.parametrize("limit", [0, -1, None, "x", 1.5, True])
def test_verify_index_limit_is_checked(db, limit):
    db.create_table("t", [("k", "STRING")], defined_columns=[("c", "STRING")])
    db.table("t").put_row(("a",), {"c": "x"})
    db.create_index("t", "ix", ["c"], include_base_data=False, progress=False)
    with pytest.raises(ParameterInvalid, match=f"limit must be a positive integer, got {limit!r}"):
        db.verify_index("t", "ix", limit=limit)
    report = db.verify_index("t", "ix", limit=1)
    assert not report.ok and len(report.missing) == 1


@pytest.mark.parametrize("timeout", ["x", -1, float("nan"), True])
def test_wait_for_indexes_timeout_is_checked(db, timeout):
    with pytest.raises(ParameterInvalid, match="timeout must be seconds >= 0 or None"):
        db.wait_for_indexes(timeout)
    assert db.wait_for_indexes(0) and db.wait_for_indexes(None)


def test_a_batch_write_to_an_index_is_refused_whatever_its_key(db):
    """A single write to an index is OTSParameterInvalid whatever the key; in a batch the
    key used to be encoded first, so a key that did not fit the index was OTSInvalidPK."""
    db.create_table("t", [("k", "STRING"), ("n", "INTEGER")], defined_columns=[("c", "INTEGER")])
    db.create_index("t", "ix", ["c"], progress=False)
    results = db.batch_write_row([("ix", "put", ("m", "x", 0), {"v": 1}),
                                  ("ix", "put", (1, "a", 0), {"v": 1}),
                                  ("t", "put", ("a", 0), {"c": 1})])
    assert [r.error.code if r.error else None for r in results] == [
        "OTSParameterInvalid", "OTSParameterInvalid", None]
    assert all("cannot write to index 'ix'" in r.error.message for r in results[:2])
