"""widetable search-index ... and widetable search: the CLI over the library's search index."""

from __future__ import annotations

import json

import pytest

from widetable.errors import ParameterInvalid
from widetable.search import BoolQuery, GeoDistanceQuery, MatchPhraseQuery, MatchQuery, PrefixQuery
from widetable.search import RangeQuery, TermQuery, WildcardQuery, ExistsQuery, MatchAllQuery
from widetable.search.querystring import parse_query
from widetable.search.schema import FieldSchema, IndexMeta

META = IndexMeta("t", "i", 1, (FieldSchema("city", "KEYWORD"), FieldSchema("price", "LONG"),
                               FieldSchema("w", "DOUBLE"), FieldSchema("ok", "BOOLEAN"),
                               FieldSchema("title", "TEXT"), FieldSchema("loc", "GEO_POINT")))


def test_query_strings():
    assert parse_query("city:hangzhou AND price:[10 TO 20} AND NOT status:x".replace(
        " AND NOT status:x", " AND NOT ok:true"), META) == BoolQuery(
        must_queries=[TermQuery("city", "hangzhou"), RangeQuery("price", 10, 20, True, False)],
        must_not_queries=[TermQuery("ok", True)])
    assert parse_query("city:a OR city:b *", META) == BoolQuery(should_queries=[
        TermQuery("city", "a"), BoolQuery(must_queries=[TermQuery("city", "b"), MatchAllQuery()])])
    assert parse_query("city:ha*", META) == PrefixQuery("city", "ha")
    assert parse_query("city:h?n*", META) == WildcardQuery("city", "h?n*")
    assert parse_query('title:"西湖 边"', META) == MatchPhraseQuery("title", "西湖 边")
    assert parse_query("title:西湖", META) == MatchQuery("title", "西湖")
    assert parse_query("w:{* TO 2.5]", META) == RangeQuery("w", None, 2.5, False, True)
    assert parse_query("city:*", META) == ExistsQuery("city")
    assert parse_query('loc:"30.1,120.2,500"', META) == GeoDistanceQuery("loc", "30.1,120.2", 500.0)
    assert parse_query("(city:a OR city:b) price:3", META) == BoolQuery(must_queries=[
        BoolQuery(should_queries=[TermQuery("city", "a"), TermQuery("city", "b")]), TermQuery("price", 3)])
    for bad in ["", "price:abc", "nofield:1", "city:", "(city:a", "city:[1 2]", "ok:maybe"]:
        with pytest.raises(ParameterInvalid):
            parse_query(bad, META)


def test_search_index_commands(cli):
    cli("create-table", "sale", "--pk", "id:INTEGER")
    for i in range(1, 6):
        cli("put", "sale", "--pk", f"[{i}]", "--json", json.dumps(
            {"city": "hangzhou", "price": i * 7, "status": "ok", "title": "我们在杭州西湖边上卖学生卡"}))
    cli("put", "sale", "--pk", "[9]", "--json", json.dumps({"city": "beijing", "price": 15,
                                                          "status": "refunded"}))
    cli("search-index", "create", "sale", "ix", "--field", "city:keyword", "--field", "price:long",
        "--field", "status:keyword", "--field", "title:text:analyzer=max_word")
    assert cli("search-index", "list").stdout.strip() == "sale\tix"
    out = cli("search-index", "describe", "sale", "ix").stdout
    assert "max_word" in out and "phase INCR" in out and "rows 6" in out
    out = cli("search", "sale", "ix", "city:hangzhou AND price:[10 TO 30} AND NOT status:refunded",
              "--sort", "price:desc", "--columns", "city,price", "--agg", "sum:price",
              "--group-by", "city").stdout
    assert "total 3" in out and "sum:price = 63" in out
    lines = cli("search", "sale", "ix", "title:西湖 OR city:beijing", "--limit", "2", "--all",
                "--format", "jsonl").stdout.splitlines()
    assert [json.loads(x)["pk"] for x in lines[:-1]] == [[1], [2], [3], [4], [5], [9]]
    r = cli("search", "sale", "ix", "price:[x TO 3]", code=1)
    assert "OTSParameterInvalid" in r.output and "'x'" in r.output
    cli("search-index", "update", "sale", "ix", "--add-field", "other:keyword:array")
    cli("search-index", "create", "sale", "ix", "--field", "city:keyword", code=1)
    cli("search-index", "delete", "sale", "ix")
    assert cli("search-index", "list").stdout.strip() == ""
