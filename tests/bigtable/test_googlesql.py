"""GoogleSQL over Bigtable tables, embedded (``db.bigtable.execute_query``), on both
engines: the SQL view of a table, key predicates and what they read, functions,
history, parameters, prepared queries and every error."""

from __future__ import annotations

import datetime as dt
import math
import struct

import pytest

from widetable.bigtable import AddToCell, FamilySpec, SetCell
from widetable.errors import ConditionCheckFail, ObjectNotExist, ParameterInvalid
from widetable.sql.googlesql.engine import EXPIRED, PreparedQuery


def be(n: int) -> bytes:
    return (n % 2**64).to_bytes(8, "big")


@pytest.fixture
def bt(db):
    bt = db.bigtable
    bt.create_table("t", [FamilySpec("cf"), FamilySpec("n", aggregate="sum"),
                          FamilySpec("x-y")])
    t = bt.table("t")
    t.mutate_row(b"r1", [SetCell("cf", b"q", 1000, b"old"), SetCell("cf", b"q", 2000, b"v1"),
                         SetCell("cf", b"int", 1000, be(-7)), AddToCell("n", b"c", 0, 5)])
    t.mutate_row(b"r2", [SetCell("cf", b"q", 1000, b"v2"), SetCell("x-y", b"a", 1000, b"z")])
    t.mutate_row(b"r3", [SetCell("cf", b"q", 1000, b"\xff\xfe"), AddToCell("n", b"c", 0, 2)])
    t.mutate_row(b"s1", [SetCell("x-y", b"a", 1000, b"zz"), AddToCell("n", b"c", 0, 9)])
    return bt


def q(bt, sql: str, params=None, param_types=None):
    return bt.execute_query(sql, params, param_types)


def test_the_sql_view_of_a_table_is_key_and_one_map_per_family(bt) -> None:
    r = q(bt, "SELECT * FROM t WHERE _key = 'r1'")
    assert r.columns == [("_key", "BYTES"), ("cf", "MAP<BYTES, BYTES>"), ("n", "MAP<BYTES, INT64>"),
                         ("x-y", "MAP<BYTES, BYTES>")]
    assert r.rows == [(b"r1", [(b"int", be(-7)), (b"q", b"v1")], [(b"c", 5)], [])]
    assert r.to_arrow().num_rows == 1


def test_map_indexing_missing_key_is_null_and_string_literals_are_bytes(bt) -> None:
    r = q(bt, "SELECT _key, cf['q'] AS q, cf[b'nope'] AS missing, `x-y`['a'] FROM t "
              "WHERE _key IN ('r1', b'r2') ORDER BY _key")
    assert r.column_names == ["_key", "q", "missing", ""]
    assert r.rows == [(b"r1", b"v1", None, None), (b"r2", b"v2", None, b"z")]


@pytest.mark.parametrize("where, keys, read", [
    ("_key = 'r2'", [b"r2"], 1),
    ("_key IN ('r3', 'r1', 'zz')", [b"r1", b"r3"], 2),
    ("_key >= 'r2' AND _key < 's'", [b"r2", b"r3"], 2),
    ("_key > 'r1' AND _key <= 'r3'", [b"r2", b"r3"], 2),
    ("_key BETWEEN 'r2' AND 'r3'", [b"r2", b"r3"], 2),
    ("STARTS_WITH(_key, 'r')", [b"r1", b"r2", b"r3"], 3),
    ("_key LIKE 'r%'", [b"r1", b"r2", b"r3"], 3),
    ("_key LIKE 'r_'", [b"r1", b"r2", b"r3"], 3),
    ("_key = 'r1' OR _key >= 's'", [b"r1", b"s1"], 2),
    ("(_key >= 'r1' AND _key < 'r2') OR (_key >= 'r3' AND _key < 'r4')", [b"r1", b"r3"], 2),
    ("_key = 'r1' AND _key = 'r2'", [], 0),
    ("_key = NULL", [], 0),
    ("'r2' < _key", [b"r3", b"s1"], 2),
    ("ENDS_WITH(_key, '1')", [b"r1", b"s1"], 4),  # not a range: the whole table
])
def test_key_predicates_read_only_their_ranges(bt, where, keys, read) -> None:
    r = q(bt, f"SELECT _key FROM t WHERE {where}")
    assert [row[0] for row in r.rows] == keys
    assert r.stats.get("t", 0) == read


def test_a_prefix_query_reads_only_its_range_and_families(db, bt) -> None:
    from widetable.bigtable import RowRange, RowSet
    from widetable.bigtable import filters as F

    t = bt.table("t")
    for i in range(200):
        t.mutate_row(b"u%03d" % i, [SetCell("cf", b"q", 1000, b"v" * 50),
                                    SetCell("x-y", b"a", 1000, b"w" * 500)])

    def bytes_read() -> int:
        stats = db.table_stats("t")
        return sum(p["bytes_read"] for b in stats["buckets"] for p in b["partitions"])

    before = bytes_read()
    r = q(bt, "SELECT _key, cf['q'] FROM t WHERE STARTS_WITH(_key, 'u01')")
    assert len(r.rows) == 10 and r.stats == {"t": 10}
    by_sql = bytes_read() - before
    before = bytes_read()
    rows = list(t.read_rows(RowSet(ranges=(RowRange(b"u01", b"u02"),)), F.FamilyNameRegex("cf")))
    assert len(rows) == 10
    assert by_sql == bytes_read() - before > 0  # the same range, the same one family
    plan = bt.sql.explain(bt.prepare_query("SELECT cf FROM t WHERE STARTS_WITH(_key, 'u01')"))
    assert plan["row_set"] == RowSet(ranges=(RowRange(b"u01", b"u02"),))
    assert plan["families"] == ["cf"]


def test_casts_and_bigtable_functions(bt) -> None:
    r = q(bt, "SELECT CAST(cf['q'] AS STRING) AS s, SAFE_CAST(cf['q'] AS STRING) AS safe, "
              "TO_INT64(cf['int']) AS i, CAST('ab' AS BYTES) AS b, LENGTH(cf['q']) AS len, "
              "MAP_KEYS(cf) AS k FROM t WHERE _key = 'r1'")
    assert r.rows == [("v1", "v1", -7, b"ab", 2, [b"int", b"q"])]
    assert r.columns[2] == ("i", "INT64") and r.columns[5] == ("k", "ARRAY<BYTES>")
    assert q(bt, "SELECT SAFE_CAST(cf['q'] AS STRING) FROM t WHERE _key = 'r3'").rows == [(None,)]
    with pytest.raises(ParameterInvalid, match="bytes 0xFFFE are not valid UTF-8"):
        _ = q(bt, "SELECT CAST(cf['q'] AS STRING) FROM t WHERE _key = 'r3'").rows
    with pytest.raises(ParameterInvalid, match="TO_INT64 needs the 8 bytes"):
        _ = q(bt, "SELECT TO_INT64(cf['q']) FROM t WHERE _key = 'r1'").rows
    assert q(bt, "SELECT _key FROM t WHERE cf['q'] LIKE b'\\xff%'").rows == [(b"r3",)]
    assert q(bt, "SELECT _key FROM t WHERE STARTS_WITH(cf['q'], 'v') ORDER BY _key").rows == [
        (b"r1",), (b"r2",)]


FLOATS = [1.5, -0.0, 0.1, -123.456, 5e-324, 1e-310, 2.2250738585072014e-308,
          1.7976931348623157e308, float("inf"), float("-inf"), float("nan")]


def _same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


@pytest.mark.parametrize("fn, fmt, width, sql_type", [
    ("TO_FLOAT64", ">d", 8, "FLOAT64"), ("TO_FLOAT32", ">f", 4, "FLOAT32")])
def test_to_float_reads_big_endian_ieee_bytes_exactly(bt, fn, fmt, width, sql_type) -> None:
    values = [v for v in FLOATS if fmt == ">d" or abs(v) < 3.4e38 or math.isinf(v) or math.isnan(v)]
    values = [struct.unpack(fmt, struct.pack(fmt, v))[0] for v in values]  # as the width holds it
    values += [struct.unpack(fmt, struct.pack(fmt, 1e-45 if width == 4 else 4e-320))[0]]  # subnormal
    bt.table("t").mutate_row(b"f", [SetCell("cf", b"v%02d" % i, 1000, struct.pack(fmt, v))
                                    for i, v in enumerate(values)])
    r = q(bt, "SELECT " + ", ".join(f"{fn}(cf['v{i:02d}'])" for i in range(len(values)))
              + " FROM t WHERE _key = 'f'")
    assert {t for _, t in r.columns} == {sql_type}
    assert all(_same_float(want, got) for want, got in zip(values, r.rows[0], strict=True)), \
        list(zip(values, r.rows[0]))
    with pytest.raises(ParameterInvalid, match=f"{fn} needs the {width} bytes of a big-endian "
                                               "value, got 2 bytes"):
        _ = q(bt, f"SELECT {fn}(cf['q']) FROM t WHERE _key = 'r1'").rows
    assert q(bt, f"SELECT SAFE.{fn}(cf['q']) FROM t WHERE _key = 'r1'").rows == [(None,)]
    with pytest.raises(ParameterInvalid, match=f"No matching signature for function {fn} for "
                                               "argument types: INT64"):
        q(bt, f"SELECT {fn}(7) FROM t")
    with pytest.raises(ParameterInvalid, match=f"{fn} takes one BYTES argument, got 2"):
        q(bt, f"SELECT {fn}(_key, _key) FROM t")


def test_safe_prefix_makes_errors_null(bt) -> None:
    r = q(bt, "SELECT SAFE.TO_INT64(cf['q']) AS a, SAFE.TO_INT64(cf['int']) AS b, "
              "SAFE.LENGTH(_key) AS c, TO_FLOAT64('abcdefgh') AS d FROM t WHERE _key = 'r1'")
    assert r.rows == [(None, -7, 2, struct.unpack(">d", b"abcdefgh")[0])]


def test_select_star_except_and_replace(bt) -> None:
    r = q(bt, "SELECT * EXCEPT (cf, `x-y`) FROM t WHERE _key = 's1'")
    assert r.columns == [("_key", "BYTES"), ("n", "MAP<BYTES, INT64>")]
    assert r.rows == [(b"s1", [(b"c", 9)])]
    r = q(bt, "SELECT * EXCEPT (_key) REPLACE (MAP_KEYS(cf) AS cf) FROM t WHERE _key = 'r1'")
    assert [c for c, _ in r.columns] == ["cf", "n", "x-y"]
    assert r.rows[0][0] == [b"int", b"q"]
    with pytest.raises(ParameterInvalid, match="Column nope in SELECT \\* EXCEPT/REPLACE list "
                                               "does not exist"):
        q(bt, "SELECT * EXCEPT (nope) FROM t")
    with pytest.raises(ParameterInvalid, match="must name each column once and leave at least one"):
        q(bt, "SELECT * EXCEPT (_key, cf, n, `x-y`) FROM t")


def test_aggregates_group_by_order_by_limit(bt) -> None:
    r = q(bt, "SELECT COUNT(*) AS rows_, SUM(n['c']) AS total, MAX(n['c']) AS top, "
              "AVG(n['c']) AS mean FROM t")
    assert r.rows == [(3, 16, 9, 16 / 3)]
    assert [c[1] for c in r.columns] == ["INT64", "INT64", "INT64", "FLOAT64"]
    r = q(bt, "SELECT SUBSTR(CAST(_key AS STRING), 1, 1) AS p, COUNT(*) AS c FROM t "
              "GROUP BY p ORDER BY c DESC, p LIMIT 1")
    assert r.rows == [("r", 3)]
    r = q(bt, "SELECT cf['q'] AS v FROM t ORDER BY v LIMIT 2 OFFSET 1")
    assert r.rows == [(b"v2",), (b"\xff\xfe",)]


def test_with_history_and_latest_n(bt) -> None:
    r = q(bt, "SELECT cf FROM t(with_history => TRUE) WHERE _key = 'r1'")
    assert r.columns == [("cf", "MAP<BYTES, ARRAY<STRUCT<timestamp TIMESTAMP, value BYTES>>>")]
    (history,), = r.rows
    as_dict = {k: [(v["timestamp"], v["value"]) for v in versions] for k, versions in history}
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert as_dict == {b"int": [(epoch + dt.timedelta(microseconds=1000), be(-7))],
                       b"q": [(epoch + dt.timedelta(microseconds=2000), b"v1"),
                              (epoch + dt.timedelta(microseconds=1000), b"old")]}
    r = q(bt, "SELECT cf['q'] FROM t(with_history => TRUE, latest_n => 1) WHERE _key = 'r1'")
    assert [v["value"] for v in r.rows[0][0]] == [b"v1"]
    with pytest.raises(ParameterInvalid, match="latest_n needs with_history"):
        q(bt, "SELECT cf FROM t(latest_n => 2)")
    with pytest.raises(ParameterInvalid, match="table option 'as_of'"):
        q(bt, "SELECT cf FROM t(as_of => 2)")


def test_parameters_of_every_type(bt) -> None:
    r = q(bt, "SELECT _key, @s AS s, @i + 1 AS i, @f AS f, @b AS b, @ts AS ts, @d AS d, "
              "@arr AS arr FROM t WHERE _key = @k",
          {"k": b"r2", "s": "x", "i": 41, "f": 0.5, "b": True,
           "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
           "d": dt.date(2024, 5, 6), "arr": [1, None, 3]}, {"arr": ("ARRAY", "INT64")})
    assert r.rows == [(b"r2", "x", 42, 0.5, True,
                       dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
                       dt.date(2024, 5, 6), [1, None, 3])]
    assert [t for _, t in r.columns] == ["BYTES", "STRING", "INT64", "FLOAT64", "BOOL",
                                         "TIMESTAMP", "DATE", "ARRAY<INT64>"]
    assert q(bt, "SELECT _key FROM t WHERE _key = @k", {"k": None}, {"k": "BYTES"}).rows == []


def test_parameter_errors(bt) -> None:
    with pytest.raises(ParameterInvalid, match="No matching signature for operator = .*@k"):
        q(bt, "SELECT _key FROM t WHERE _key = @k", {"k": "r1"})
    with pytest.raises(ParameterInvalid, match="@k has no type"):
        bt.prepare_query("SELECT _key FROM t WHERE _key = @k")
    prepared = bt.prepare_query("SELECT _key FROM t WHERE _key = @k", {"k": "BYTES"})
    with pytest.raises(ParameterInvalid, match="@k has no value"):
        bt.sql.execute(prepared, {})
    with pytest.raises(ParameterInvalid, match="@k: value 'r1' is not of its declared type BYTES"):
        bt.sql.execute(prepared, {"k": "r1"})
    with pytest.raises(ParameterInvalid, match="@other was not declared"):
        bt.sql.execute(prepared, {"k": b"r1", "other": 1})
    with pytest.raises(ParameterInvalid, match="cannot infer the type of parameter @x"):
        q(bt, "SELECT @x FROM t", {"x": None})


@pytest.mark.parametrize("sql, match", [
    ("SELEC * FROM t", "Syntax error"),
    ("SELECT _key FROM t WHERE", "Syntax error"),
    ("SELECT 'unclosed FROM t", "unclosed string literal"),
    ("SELECT '\\q' FROM t", "Illegal escape sequence"),
    ("SELECT nope FROM t", "Unrecognized name: nope"),
    ("SELECT x.cf FROM t", "Unrecognized name: x"),
    ("SELECT _key FROM t JOIN t AS u ON TRUE", "JOIN is not supported"),
    ("SELECT _key FROM (SELECT _key FROM t)", "subqueries are not supported"),
    ("SELECT 1", "must read a table"),
    ("SELECT _key FROM t; SELECT _key FROM t", "one statement"),
    ("SELECT _key FROM p.t", "FROM must name one table"),
    ("", "empty"),
])
def test_invalid_queries_are_rejected_naming_the_problem(bt, sql, match) -> None:
    with pytest.raises(ParameterInvalid, match=match):
        bt.prepare_query(sql)


def test_unknown_table_is_not_found(bt) -> None:
    with pytest.raises(ObjectNotExist, match="'nope'"):
        bt.prepare_query("SELECT _key FROM nope")


def test_a_prepared_query_expires_when_its_table_changes(bt) -> None:
    prepared = bt.prepare_query("SELECT * FROM t WHERE _key = 'r1'")
    again = bt.sql.from_token(prepared.token())
    assert (again.query, again.fingerprint, again.table) == (prepared.query, prepared.fingerprint, "t")
    assert len(bt.sql.execute(again).rows) == 1
    bt.modify_families("t", create=[FamilySpec("new")])
    with pytest.raises(ConditionCheckFail, match=EXPIRED):
        bt.sql.execute(prepared)
    fresh = bt.prepare_query("SELECT * FROM t WHERE _key = 'r1'")
    assert [c for c, _ in fresh.columns] == ["_key", "cf", "n", "new", "x-y"]
    past = PreparedQuery(fresh.query, {}, fresh.columns, "t", fresh.fingerprint, 0.0)
    with pytest.raises(ConditionCheckFail, match=EXPIRED):
        bt.sql.execute(past)
    with pytest.raises(ParameterInvalid, match="prepared_query"):
        bt.sql.from_token(b"not a token")


def test_rows_without_the_families_read_are_not_rows_of_the_answer(bt) -> None:
    # s1 has no cell in cf: a query reading cf alone does not see it; one reading no
    # family (COUNT(*), _key) sees every row
    assert [r[0] for r in q(bt, "SELECT _key, cf FROM t").rows] == [b"r1", b"r2", b"r3"]
    assert q(bt, "SELECT COUNT(*) FROM t").rows == [(4,)]
    assert len(q(bt, "SELECT _key FROM t").rows) == 4


def test_more_of_the_language(bt) -> None:
    r = q(bt, "-- a comment first\n/* and another */ SELECT SUBSTR(CAST(_key AS STRING), 1, 1) AS p, "
              "COUNT(DISTINCT cf['q']) AS d FROM t GROUP BY p HAVING COUNT(*) > 1 ;")
    assert r.rows == [("r", 3)]
    assert q(bt, "select _key from t order by _key desc limit @n", {"n": 2}).rows == [(b"s1",), (b"r3",)]
    r = q(bt, "SELECT _key, IF(cf['q'] IS NULL, 'none', 'some') AS has, COALESCE(cf['q'], b'-') AS v "
              "FROM t WHERE cf['q'] IN ('v1', 'v2') OR _key = 's1' ORDER BY _key")
    assert r.rows == [(b"r1", "some", b"v1"), (b"r2", "some", b"v2")]  # s1 has no cf cell
    r = q(bt, "SELECT _key, MAP_CONTAINS_KEY(`x-y`, 'a') AS has FROM t WHERE _key >= 'r2' ORDER BY _key")
    assert r.rows == [(b"r2", True), (b"s1", True)]
    r = q(bt, "SELECT _key AS k, _key FROM t WHERE _key = 'r1'")
    assert r.column_names == ["k", "_key"] and r.rows == [(b"r1", b"r1")]


@pytest.mark.parametrize("sql, direct", [
    ("SELECT _key, cf['q'] AS q, n FROM t WHERE _key = @k", True),
    ("SELECT * FROM t WHERE STARTS_WITH(_key, 'r') ORDER BY _key DESC LIMIT 2 OFFSET @k2", True),
    ("SELECT _key FROM t WHERE _key LIKE 'r%'", True),
    ("SELECT _key FROM t WHERE _key LIKE 'r_'", False),  # a range wider than the rows kept
    ("SELECT _key FROM t WHERE cf['q'] = 'v1'", False),
    ("SELECT COUNT(*) FROM t", False),
    ("SELECT CAST(_key AS STRING) FROM t", False),
    ("SELECT _key FROM t ORDER BY cf['q']", False),
    ("SELECT cf FROM t(with_history => TRUE)", False),
])
def test_the_direct_path_takes_plain_key_reads(bt, sql, direct) -> None:
    types = {"k": "BYTES", "k2": "INT64"}
    prepared = bt.prepare_query(sql, {p: types[p] for p in types if f"@{p}" in sql})
    params = {p: v for p, v in (("k", b"r1"), ("k2", 1)) if f"@{p}" in sql}
    assert bt.sql.explain(prepared, params)["path"] == ("direct" if direct else "duckdb")
    assert bt.sql.execute(prepared, params).rows == bt.sql.execute(prepared, params, direct=False).rows
