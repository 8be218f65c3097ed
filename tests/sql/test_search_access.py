"""The search-index access path: predicates on non-key fields a search index indexes are
served by it (terms, ranges, IN), eventually consistent, and the answer is DuckDB's or the
direct path's over the rows it finds."""

from __future__ import annotations

import pytest

from widetable import WidetableError
from widetable.search import FieldSchema

from .datasets import SMALL_MAPPINGS, load_small


@pytest.fixture
def searched(db):
    load_small(db)
    db.sql(SMALL_MAPPINGS[0])
    db.create_search_index("consumption", "ix", [
        FieldSchema("Canteen", "KEYWORD"), FieldSchema("Amount", "DOUBLE"),
        FieldSchema("Refunded", "BOOLEAN")])
    assert db.wait_for_search_indexes("consumption", "ix")
    return db


def test_a_non_key_predicate_uses_the_search_index(searched) -> None:
    sql = "SELECT OrderNumber, Amount FROM consumption WHERE Canteen = 'north' AND Amount > 2.5"
    plan = searched.sql("EXPLAIN " + sql).rows
    assert plan[0][1] == ("search index ix (eventually consistent): query Amount > 2.5 AND "
                          "Canteen = 'north'")  # conjuncts as sqlglot's simplify orders them
    r = searched.sql(sql)
    assert r.rows == [(1, 10.5), (2, 3.0), (4, 12.0)]
    assert r.stats == {"consumption": 3}  # only what the index found


def test_in_ranges_and_aggregates_over_the_search_index(searched) -> None:
    r = searched.sql("SELECT Canteen, COUNT(*) FROM consumption WHERE Canteen IN ('east', "
                     "'south') GROUP BY Canteen ORDER BY Canteen")
    assert r.rows == [("east", 1), ("south", 1)]
    assert r.stats == {"consumption": 2}
    r = searched.sql("SELECT OrderNumber FROM consumption WHERE Refunded = true")
    assert r.rows == [(2,)]
    # A residual predicate the index does not serve is DuckDB's.
    r = searched.sql("SELECT OrderNumber FROM consumption WHERE Amount <= 3 AND CardID LIKE 'c%'")
    assert sorted(r.rows) == [(2,), (6,), (7,)]


def test_key_predicates_keep_the_primary_key(searched) -> None:
    plan = searched.sql("EXPLAIN SELECT * FROM consumption WHERE CardID = 'c1' AND "
                        "Canteen = 'north'").rows
    assert plan[0][1].startswith("primary-key range")
    plan = searched.sql("EXPLAIN SELECT * FROM consumption USE INDEX() WHERE "
                        "Canteen = 'north'").rows
    assert plan[0][1] == "full scan"
    plan = searched.sql("EXPLAIN SELECT * FROM consumption USE INDEX(ix) WHERE "
                        "CardID = 'c1'").rows
    assert plan[0][1] == "search index ix (eventually consistent): query match all"
    assert len(searched.sql("SELECT * FROM consumption USE INDEX(ix) WHERE CardID = 'c1'")
               .rows) == 3
    with pytest.raises(WidetableError, match="its indexes: \\['ix'\\]"):
        searched.sql("SELECT * FROM consumption USE INDEX(nope)")


def test_a_search_index_mapping(searched) -> None:
    searched.sql("CREATE TABLE consumption_ix (CardID VARCHAR(64), DeviceID VARCHAR(64), "
                 "SellerID VARCHAR(64), OrderNumber BIGINT, Canteen MEDIUMTEXT, Amount DOUBLE, "
                 "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber)) ENGINE='searchindex' "
                 "ENGINE_ATTRIBUTE='{\"index_name\": \"ix\", \"table_name\": \"consumption\"}'")
    assert ("consumption_ix",) in searched.sql("SHOW TABLES").rows
    plan = searched.sql("EXPLAIN SELECT OrderNumber FROM consumption_ix WHERE CardID = 'c2'").rows
    assert plan[0][1] == "search index ix (eventually consistent): query match all"
    r = searched.sql("SELECT OrderNumber, Amount FROM consumption_ix WHERE Canteen = 'north' "
                     "ORDER BY OrderNumber")
    assert r.rows == [(1, 10.5), (2, 3.0), (4, 12.0), (7, 2.5)]
    with pytest.raises(WidetableError) as info:
        searched.sql("CREATE TABLE bad (CardID VARCHAR(64), DeviceID VARCHAR(64), SellerID "
                     "VARCHAR(64), OrderNumber BIGINT, PRIMARY KEY(CardID, DeviceID, SellerID, "
                     "OrderNumber)) ENGINE='searchindex' ENGINE_ATTRIBUTE='{\"index_name\": "
                     "\"nope\", \"table_name\": \"consumption\"}'")
    assert info.value.code == "OTSObjectNotExist"
    with pytest.raises(WidetableError, match="needs ENGINE_ATTRIBUTE"):
        searched.sql("CREATE TABLE bad (CardID VARCHAR(64), PRIMARY KEY(CardID)) "
                     "ENGINE='searchindex'")
    assert ("bad",) not in searched.sql("SHOW TABLES").rows
