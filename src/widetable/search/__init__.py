"""Search indexes (Tablestore's SearchIndex) on tantivy: fields, queries, sorts, aggregations.

``db.create_search_index(table, name, fields=[...])`` defines one; ``db.search(...)``
queries it. This package is pure logic except through ``storage/tantivy_index.py``,
the one module that imports tantivy.
"""

from .aggs import (
    AvgAgg, CountAgg, DistinctCountAgg, GroupByComposite, GroupByDateHistogram, GroupByField,
    GroupByFilter, GroupByGeoDistance, GroupByGeoGrid, GroupByHistogram, GroupByRange, GroupKeySort,
    MaxAgg, MinAgg, PercentilesAgg, RowCountSort, SubAggSort, SumAgg, TopRowsAgg,
)
from .execute import (
    RETURN_ALL, RETURN_ALL_FROM_INDEX, RETURN_NONE, RETURN_SPECIFIED, SearchHit, SearchResult,
)
from .query import (
    BoolQuery, ConstScoreQuery, ExistsQuery, FieldValueFactor, FunctionScoreQuery,
    GeoBoundingBoxQuery, GeoDistanceQuery, GeoPolygonQuery, MatchAllQuery, MatchPhraseQuery,
    MatchQuery, NestedQuery, PrefixQuery, RangeQuery, TermQuery, TermsQuery, WildcardQuery,
)
from .schema import FieldSchema
from .sort import ASC, DESC, FieldSort, GeoDistanceSort, PrimaryKeySort, ScoreSort

__all__ = [
    "ASC", "DESC", "RETURN_ALL", "RETURN_ALL_FROM_INDEX", "RETURN_NONE", "RETURN_SPECIFIED",
    "AvgAgg", "BoolQuery", "ConstScoreQuery", "CountAgg", "DistinctCountAgg", "ExistsQuery",
    "FieldSchema", "FieldSort", "FieldValueFactor", "FunctionScoreQuery", "GeoBoundingBoxQuery",
    "GeoDistanceQuery", "GeoDistanceSort", "GeoPolygonQuery", "GroupByComposite",
    "GroupByDateHistogram", "GroupByField", "GroupByFilter", "GroupByGeoDistance",
    "GroupByGeoGrid", "GroupByHistogram", "GroupByRange", "GroupKeySort", "MatchAllQuery", "MatchPhraseQuery",
    "MatchQuery", "MaxAgg", "MinAgg", "NestedQuery", "PercentilesAgg", "PrefixQuery",
    "PrimaryKeySort", "RangeQuery", "RowCountSort", "ScoreSort", "SearchHit", "SearchResult",
    "SubAggSort", "SumAgg", "TermQuery", "TermsQuery", "TopRowsAgg", "WildcardQuery",
]
