"""The paths that answer without DuckDB against DuckDB's own answer, over seeded data.

The direct path (plain columns of exact key or index ranges, LIMIT and OFFSET applied
in Python) and the direct count (a bare ``COUNT(*)`` of exact key or index ranges) must
return what DuckDB returns for the same statement: the same rows in the same order,
the same column names and SQL types, NULL for missing cells. ``max_scan_rows=None``
sends every statement to DuckDB (the direct paths hold rows in memory, so they only run
under a row budget); EXPLAIN names the path each one takes.
"""

from __future__ import annotations

import random

import pytest

from .datasets import CONSUMPTION_DEFINED, CONSUMPTION_PK, random_consumption

SEED = 2024
MAPPING = ("CREATE TABLE consumption (CardID VARCHAR(64), DeviceID VARCHAR(64), "
           "SellerID VARCHAR(64), OrderNumber BIGINT, Amount DOUBLE, Canteen MEDIUMTEXT, "
           "Refunded BOOL, Device MEDIUMTEXT, "
           "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))")
DUCK = {"max_scan_rows": None}


@pytest.fixture
def loaded(db):
    consumption, _ = random_consumption(SEED, 1200)
    db.create_table("consumption", CONSUMPTION_PK, defined_columns=CONSUMPTION_DEFINED,
                    split_points=["card010", "card020", "card030"])
    for i in range(0, len(consumption), 200):
        db.batch_write_row([("consumption", "put", pk, cols)
                            for pk, cols in consumption[i:i + 200]])
    db.create_index("consumption", "by_device", ["Device"], index_type="GLOBAL",
                    progress=False)
    db.create_index("consumption", "by_card_canteen", ["CardID", "Canteen"],
                    defined_columns=["Amount"], index_type="LOCAL", progress=False)
    assert db.wait_for_indexes(30)
    db.sql(MAPPING)
    return db, consumption


def _statements(rnd: random.Random, consumption: list) -> list[tuple[str, list, str]]:
    """``(sql, params, access kind)``: each a statement a direct path serves."""
    pks = [pk for pk, _ in consumption]
    cards = sorted({pk[0] for pk in pks})
    devices = sorted({c["Device"] for _, c in consumption if "Device" in c})
    canteens = ["north", "south", "east", "West"]
    columns = ["CardID", "DeviceID", "SellerID", "OrderNumber", "Amount", "Canteen",
               "Refunded", "Device"]
    out = []
    for _ in range(60):
        cols = rnd.sample(columns, rnd.randint(1, 4))
        pick = ", ".join(f"{c} AS {c.lower()}_x" if rnd.random() < 0.2 else c for c in cols)
        if rnd.random() < 0.15:
            pick = "*"
        shape = rnd.randrange(6)
        if shape == 0:
            where, params, kind = "CardID = ?", [rnd.choice(cards)], "primary-key range"
        elif shape == 1:
            pk = rnd.choice(pks)
            where, params, kind = "CardID = ? AND DeviceID = ?", list(pk[:2]), \
                "primary-key range"
        elif shape == 2:
            lo, hi = sorted(rnd.sample(cards, 2))
            where, params, kind = "CardID >= ? AND CardID < ?", [lo, hi], "primary-key range"
        elif shape == 3:
            where, params, kind = "Device = ?", [rnd.choice(devices)], "secondary index by_device"
        elif shape == 4:
            lo, hi = sorted(rnd.sample(devices, 2))
            where, params, kind = "Device > ? AND Device <= ?", [lo, hi], \
                "secondary index by_device"
        else:
            where, params, kind = "CardID = ? AND Canteen = ?", \
                [rnd.choice(cards), rnd.choice(canteens)], "secondary index by_card_canteen"
        tail = ""
        r = rnd.random()
        if r < 0.3:
            tail = f" LIMIT {rnd.randrange(0, 8)}"
        elif r < 0.5:
            tail = f" LIMIT {rnd.randrange(1, 8)} OFFSET {rnd.randrange(0, 6)}"
        elif r < 0.6:
            tail = " LIMIT ? OFFSET ?"
            params = params + [rnd.randrange(0, 5), rnd.randrange(0, 5)]
        out.append((f"SELECT {pick} FROM consumption WHERE {where}{tail}", params, kind))
        count = "COUNT(*)" if rnd.random() < 0.5 else "count(*) AS n"
        out.append((f"SELECT {count} FROM consumption WHERE {where}", params[:len(params) -
                    (2 if tail == ' LIMIT ? OFFSET ?' else 0)], kind))
    return out


def test_direct_paths_match_duckdb(loaded) -> None:
    db, consumption = loaded
    rnd = random.Random(SEED)
    nulls = counted = 0
    for sql, params, kind in _statements(rnd, consumption):
        plan = db.sql("EXPLAIN " + sql, params).rows
        assert plan[0][1].startswith(kind), (sql, plan)
        direct = "rows counted directly" if "COUNT" in sql.upper() else "rows read directly"
        assert plan[-1][:2] == ("(no duckdb)", direct), (sql, plan)
        forced = [r[0] for r in db.sql("EXPLAIN " + sql, params, **DUCK).rows]
        assert "(duckdb)" in forced and "(no duckdb)" not in forced, sql
        ours, theirs = db.sql(sql, params), db.sql(sql, params, **DUCK)
        assert ours.columns == theirs.columns, sql
        assert ours.rows == theirs.rows, (sql, params)
        if "LIMIT" not in sql:  # (DuckDB may stop pulling rows before the scan's end)
            assert ours.stats == theirs.stats, sql
        nulls += sum(v is None for row in ours.rows for v in row)
        counted += "COUNT" in sql.upper() and ours.rows[0][0] > 0
    assert nulls > 20 and counted > 20  # the data exercised missing cells and real counts


def test_what_the_direct_count_leaves_to_duckdb(loaded) -> None:
    db, _ = loaded
    for sql in ["SELECT COUNT(*) FROM consumption",  # a full scan: the replica's
                "SELECT COUNT(Amount) FROM consumption WHERE CardID = 'card001'",
                "SELECT COUNT(*), 1 FROM consumption WHERE CardID = 'card001'",
                "SELECT COUNT(*) FROM consumption WHERE CardID = 'card001' LIMIT 1",
                "SELECT COUNT(*) FROM consumption WHERE CardID = 'card001' AND Amount > 3",
                "SELECT COUNT(*) + 1 FROM consumption WHERE CardID = 'card001'",
                "SELECT COUNT(DISTINCT Device) FROM consumption WHERE CardID = 'card001'",
                "SELECT COUNT(*) FROM consumption WHERE CardID = 'card001' GROUP BY Device"]:
        assert db.sql("EXPLAIN " + sql).rows[-1][0] != "(no duckdb)", sql
    # An empty range still counts: one row of 0, as DuckDB answers.
    sql = "SELECT COUNT(*) AS n FROM consumption WHERE CardID = 'zzz'"
    assert db.sql(sql).rows == db.sql(sql, **DUCK).rows == [(0,)]
    assert db.sql(sql).columns == [("n", "BIGINT")]


def test_the_direct_paths_do_not_run_duckdb(loaded, monkeypatch) -> None:
    from widetable.sql import duck
    db, _ = loaded
    statements = [("SELECT CardID, Amount, Canteen FROM consumption WHERE Device = ? LIMIT 5 "
                   "OFFSET 1", ["pos1"]),
                  ("SELECT COUNT(*) FROM consumption WHERE Device = ?", ["pos1"]),
                  ("SELECT * FROM consumption WHERE CardID = ?", ["card003"]),
                  ("SELECT COUNT(*) FROM consumption WHERE CardID = ?", ["card003"])]
    want = [db.sql(sql, params, **DUCK).rows for sql, params in statements]

    def refuse(*args, **kwargs):
        raise AssertionError("a direct path ran DuckDB")
    monkeypatch.setattr(duck.Duck, "run", refuse)
    monkeypatch.setattr(duck.Duck, "__init__", refuse)
    got = [db.sql(sql, params).rows for sql, params in statements]
    assert got == want
    assert got[1][0][0] > 0 and len(got[0]) == 5
