"""db.sql's result object, the plan cache, parameters, persistence of mappings, and
values that contradict their mapping."""

from __future__ import annotations

import pyarrow as pa
import pytest

import widetable
from widetable import WidetableError
from widetable.sql import statements

from .datasets import SMALL_MAPPINGS, load_small


@pytest.fixture
def small(db):
    load_small(db)
    for m in SMALL_MAPPINGS:
        db.sql(m)
    return db


def test_result_columns_rows_arrow_and_iteration(small) -> None:
    r = small.sql("SELECT CardID, OrderNumber, Amount, Refunded FROM consumption "
                  "WHERE CardID = 'c1' ORDER BY OrderNumber")
    assert r.columns == [("CardID", "MEDIUMTEXT"), ("OrderNumber", "BIGINT"),
                         ("Amount", "DOUBLE"), ("Refunded", "BOOL")]
    table = r.to_arrow()
    assert table.schema.types == [pa.string(), pa.int64(), pa.float64(), pa.bool_()]
    assert r.rows == [("c1", 1, 10.5, False), ("c1", 2, 3.0, True), ("c1", 3, 7.25, None)]
    # Plain columns of exact key ranges are read without DuckDB; an expression streams
    # from DuckDB, read once.
    assert small.sql("SELECT OrderNumber FROM consumption").rows == [(n,) for n in range(1, 8)]
    streamed = small.sql("SELECT OrderNumber + 0 FROM consumption")
    assert [row for row in streamed] == [(n,) for n in range(1, 8)]
    with pytest.raises(WidetableError, match="already read as a stream"):
        list(streamed.batches())


def test_to_pandas(small) -> None:
    r = small.sql("SELECT CardID, COUNT(*) AS n FROM consumption GROUP BY CardID ORDER BY CardID")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(WidetableError, match="pip install pandas"):
            r.to_pandas()
        return
    frame = r.to_pandas()
    assert list(frame["n"]) == [3, 2, 1, 1]


def test_parameters_and_plan_cache(small, monkeypatch) -> None:
    sql = ("SELECT Amount FROM consumption WHERE CardID = ? AND DeviceID = ? AND SellerID = ? "
           "AND OrderNumber = ?")
    assert small.sql(sql, ["c1", "d1", "s1", 2]).rows == [(3.0,)]
    calls = []
    real = statements.parse
    monkeypatch.setattr(statements, "parse", lambda text: calls.append(text) or real(text))
    assert small.sql(sql, ["c2", "d1", "s1", 4]).rows == [(12.0,)]
    assert small.sql(sql, ["c2", "d1", "s1", 99]).rows == []
    assert calls == []  # planned once, bound per call
    with pytest.raises(WidetableError, match="4 \\? parameters but 1 were given"):
        small.sql(sql, ["c1"])
    # A parameter of another type than the key column: not pushed, DuckDB decides.
    with pytest.raises(WidetableError) as info:
        small.sql(sql, ["c1", "d1", "s1", "two"]).rows
    assert info.value.code == "OTSParameterInvalid"


def test_value_contradicting_its_mapping(small) -> None:
    small.sql("ALTER TABLE consumption ADD COLUMN Note BIGINT")  # schema-less: holds 'late'
    with pytest.raises(WidetableError) as info:
        small.sql("SELECT Note FROM consumption").rows
    assert info.value.code == "OTSParameterInvalid"
    assert ("mapped as BIGINT but row ('c1', 'd2', 's2', 3) holds str 'late'"
            in info.value.message)
    with pytest.raises(WidetableError, match="holds str 'late'"):
        small.sql("SELECT Note FROM consumption WHERE CardID = 'c1' AND DeviceID = 'd2' "
                  "AND SellerID = 's2' AND OrderNumber = 3").rows
    assert small.sql("SELECT COUNT(*) FROM consumption").rows == [(7,)]


def test_mappings_persist(tmp_path) -> None:
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    load_small(db)
    db.sql(SMALL_MAPPINGS[1])
    db.sql("ALTER TABLE cards DROP COLUMN Grade")
    db.close()
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    try:
        assert db.sql("SHOW TABLES").rows == [("cards",)]
        assert [r[0] for r in db.sql("DESCRIBE cards").rows] == ["CardID", "Name"]
        assert db.sql("SELECT Name FROM cards WHERE CardID = 'c2'").rows == [("Bob",)]
    finally:
        db.close()


def test_mapping_of_a_dropped_table(small) -> None:
    small.delete_table("cards")
    with pytest.raises(WidetableError) as info:
        small.sql("SELECT * FROM cards").rows
    assert info.value.code == "OTSObjectNotExist"
    assert "maps table 'cards', which does not exist" in info.value.message


def test_copy_to_parquet(small, tmp_path) -> None:
    import pyarrow.parquet as pq
    out = tmp_path / "c.parquet"
    r = small.sql(f"COPY (SELECT CardID, SUM(Amount) AS total FROM consumption GROUP BY CardID "
                  f"ORDER BY CardID) TO '{out}'")
    assert r.rows == [(4,)]
    assert pq.read_table(out).to_pylist()[0] == {"CardID": "c1", "total": 20.75}


def test_a_cached_point_select_skips_the_planner_and_duckdb(small, monkeypatch) -> None:
    """A plan-cache hit of a point SELECT binds the key and reads one stored row: no
    sqlglot, no planning, no access-path choice, no DuckDB."""
    from widetable.sql import access, duck, session
    sql = ("SELECT OrderNumber, Amount, Canteen FROM consumption WHERE CardID = ? AND "
           "DeviceID = ? AND SellerID = ? AND OrderNumber = ?")
    assert small.sql(sql, ["c1", "d1", "s1", 2]).rows == [(2, 3.0, "north")]

    def refuse(*args, **kwargs):
        raise AssertionError("the cached point path ran the general path")
    monkeypatch.setattr(statements, "parse", refuse)
    monkeypatch.setattr(session, "plan_query", refuse)
    monkeypatch.setattr(session, "choose", refuse)
    monkeypatch.setattr(access, "choose", refuse)
    monkeypatch.setattr(duck.Duck, "run", refuse)
    assert small.sql(sql, ("c2", "d1", "s1", 4)).rows == [(4, 12.0, "north")]
    r = small.sql(sql, ["c2", "d1", "s1", 99])
    assert r.rows == [] and r.stats == {"consumption": 0}
    assert r.columns == [("OrderNumber", "BIGINT"), ("Amount", "DOUBLE"),
                         ("Canteen", "MEDIUMTEXT")]
    monkeypatch.undo()
    # A value not of its key column's type leaves the fast path: the general one decides.
    with pytest.raises(WidetableError) as info:
        small.sql(sql, ["c1", "d1", "s1", "two"]).rows
    assert info.value.code == "OTSParameterInvalid"
    # A write is seen at once, and so is a table dropped and made again under its name.
    small.table("consumption").put_row(("c1", "d1", "s1", 2), {"Amount": 1.0})
    assert small.sql(sql, ["c1", "d1", "s1", 2]).rows == [(2, 1.0, None)]
    schema = small.describe_table("consumption")
    small.delete_table("consumption")
    small.create_table("consumption", [(c["name"], c["type"]) for c in schema["primary_key"]]
                       if isinstance(schema, dict) else schema.primary_key)
    assert small.sql(sql, ["c1", "d1", "s1", 2]).rows == []
    small.table("consumption").put_row(("c1", "d1", "s1", 2), {"Amount": 5.0})
    assert small.sql(sql, ["c1", "d1", "s1", 2]).rows == [(2, 5.0, None)]


def test_the_point_path_checks_schema_less_values(db) -> None:
    t = db.create_table("p", [("k", "STRING")])
    t.put_row(("a",), {"v": b"\x00\xff", "w": 1})
    t.put_row(("b",), {"v": "text", "w": 2})
    db.sql("CREATE TABLE p (k VARCHAR(8), v MEDIUMBLOB, w BIGINT, PRIMARY KEY(k))")
    sql = "SELECT * FROM p WHERE k = ?"
    for _ in range(2):  # compiled on the first call, then the cached path
        assert db.sql(sql, ["a"]).rows == [("a", b"\x00\xff", 1)]
        with pytest.raises(WidetableError) as info:
            db.sql(sql, ["b"]).rows
        assert "mapped as MEDIUMBLOB" in info.value.message and "'b'" in info.value.message
