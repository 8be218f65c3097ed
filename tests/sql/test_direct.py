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

from widetable import WidetableError

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
        # equality on the prefix an index counts: its count is read (index/counts.py)
        from_count = "COUNT" in sql.upper() and ("Device = ?" in sql or "Canteen = ?" in sql)
        if from_count:
            index = kind.split()[-1]
            how = "global, eventually" if index == "by_device" else "local, strongly"
            assert plan[-1][:2] == ("(no duckdb)", f"index count: {index} ({how} consistent)"), \
                (sql, plan)
        else:
            assert plan[-1][:2] == ("(no duckdb)", direct), (sql, plan)
        forced = [r[0] for r in db.sql("EXPLAIN " + sql, params, **DUCK).rows]
        assert "(duckdb)" in forced and "(no duckdb)" not in forced, sql
        ours, theirs = db.sql(sql, params), db.sql(sql, params, **DUCK)
        assert ours.columns == theirs.columns, sql
        assert ours.rows == theirs.rows, (sql, params)
        if from_count:  # no entry read
            assert ours.stats == {kind.split()[-1]: 0}, sql
        elif "LIMIT" not in sql:  # (DuckDB may stop pulling rows before the scan's end)
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


def test_a_limit_or_offset_that_is_an_expression_is_duckdbs(loaded) -> None:
    """The direct path applies only LIMIT and OFFSET it can bind (literals and ?); any
    other leaves the statement to DuckDB rather than being ignored."""
    db, _ = loaded
    for sql in ["SELECT OrderNumber FROM consumption WHERE CardID = 'card003' LIMIT 1+1",
                "SELECT OrderNumber FROM consumption WHERE CardID = 'card003' LIMIT 3 "
                "OFFSET 1+0",
                "SELECT OrderNumber FROM consumption WHERE CardID = 'card003' OFFSET 2"]:
        assert db.sql("EXPLAIN " + sql).rows[-1][0] != "(no duckdb)", sql
        for _ in range(2):
            assert db.sql(sql).rows == db.sql(sql, **DUCK).rows, sql
    assert len(db.sql("SELECT OrderNumber FROM consumption WHERE CardID = 'card003' "
                      "LIMIT 1+1").rows) == 2


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


# -- the cached key path (fastpath.KeyPath) --------------------------------------------

COVERED = {"by_device": {"Device", "CardID", "DeviceID", "SellerID", "OrderNumber"},
           "by_card_canteen": {"CardID", "Canteen", "DeviceID", "SellerID", "OrderNumber",
                               "Amount"}}


def _key_statements(rnd: random.Random, consumption: list) -> list[tuple[str, list, str]]:
    """``(sql, [params, ...], index or "")``: statements whose WHERE is equality on a key
    prefix, each with several parameter sets (missing keys included)."""
    pks = [pk for pk, _ in consumption]
    cards = sorted({pk[0] for pk in pks}) + ["card999"]
    devices = sorted({c["Device"] for _, c in consumption if "Device" in c}) + ["nope"]
    canteens = ["north", "south", "east", "West", "none"]
    columns = ["CardID", "DeviceID", "SellerID", "OrderNumber", "Amount", "Canteen",
               "Refunded", "Device"]
    shapes = [
        ("CardID = ?", lambda: [rnd.choice(cards)], ""),
        ("CardID = ? AND DeviceID = ?", lambda: list(rnd.choice(pks)[:2]), ""),
        ("DeviceID = ? AND CardID = ?",  # the ? in another order than the key's
         lambda: list(reversed(rnd.choice(pks)[:2])), ""),
        ("CardID = 'card003' AND DeviceID = ?", lambda: [rnd.choice(pks)[1]], ""),
        ("CardID = ? AND DeviceID = ? AND SellerID = ?", lambda: list(rnd.choice(pks)[:3]), ""),
        ("Device = ?", lambda: [rnd.choice(devices)], "by_device"),
        ("CardID = ? AND Canteen = ?", lambda: [rnd.choice(cards), rnd.choice(canteens)],
         "by_card_canteen"),
    ]
    out = []
    for _ in range(40):
        where, make, index = rnd.choice(shapes)
        r = rnd.random()
        if r < 0.3:
            pick, used = "COUNT(*)" if rnd.random() < 0.5 else "count(*) AS n", set()
        elif r < 0.4:
            pick, used = "*", set(columns)
        else:
            cols = rnd.sample(columns, rnd.randint(1, 4))
            if index and rnd.random() < 0.6:
                cols = rnd.sample(sorted(COVERED[index]), rnd.randint(1, 3))
            pick = ", ".join(f"{c} AS {c.lower()}_x" if rnd.random() < 0.2 else c
                             for c in cols)
            used = set(cols)
        tail, extra = "", lambda: []
        if "COUNT" not in pick.upper():
            t = rnd.random()
            if t < 0.25:
                tail = f" LIMIT {rnd.randrange(0, 6)}"
            elif t < 0.5:
                tail = " LIMIT ? OFFSET ?"
                extra = lambda: [rnd.randrange(0, 6), rnd.randrange(0, 4)]  # noqa: E731
        cached = not index or used <= COVERED[index]
        params = [make() + extra() for _ in range(4)]
        out.append((f"SELECT {pick} FROM consumption WHERE {where}{tail}", params,
                    "yes" if cached else ""))
    return out


def test_the_cached_key_path_matches_duckdb(loaded, monkeypatch) -> None:
    """A repeated key-prefix statement is bound into its compiled range (no parsing,
    planning or access-path choice; EXPLAIN names the cached key path) and answers as
    DuckDB does: rows in order, columns, NULLs, LIMIT/OFFSET, read counts."""
    from widetable.sql import access, duck, session
    from widetable.sql import statements as parsing
    db, consumption = loaded
    rnd = random.Random(SEED + 1)
    cases = _key_statements(rnd, consumption)
    want = []
    for sql, param_sets, cached in cases:
        note = db.sql("EXPLAIN " + sql, param_sets[0]).rows[-1][2]
        assert ("cached key path" in note) == bool(cached), (sql, note)
        want.append([(r.columns, r.rows, r.stats) for r in
                     (db.sql(sql, p, **DUCK) for p in param_sets)])
        db.sql(sql, param_sets[0]).rows  # the first call compiles the statement

    def refuse(*args, **kwargs):
        raise AssertionError("a cached key path ran the general path")
    for target, name in [(parsing, "parse"), (session, "plan_query"), (session, "choose"),
                         (access, "choose"), (duck.Duck, "run")]:
        monkeypatch.setattr(target, name, refuse)
    nulls = rows = compiled = 0
    for (sql, param_sets, cached), answers in zip(cases, want):
        if not cached:
            continue
        compiled += 1
        for p, (columns, expected, stats) in zip(param_sets, answers):
            r = db.sql(sql, p)
            assert r.columns == columns, sql
            assert r.rows == expected, (sql, p)
            if "COUNT" in sql.upper() and ("Device = ?" in sql or "Canteen = ?" in sql):
                assert r.stats == {next(iter(stats)): 0}, (sql, p)  # the index's count: read
            elif "LIMIT" not in sql:
                assert r.stats == stats, (sql, p)
            nulls += sum(v is None for row in r.rows for v in row)
            rows += len(r.rows) if "COUNT" not in sql.upper() else r.rows[0][0]
    assert compiled > 20 and nulls > 10 and rows > 200


def test_the_cached_key_path_steps_aside(loaded, monkeypatch) -> None:
    """Whatever changes the choice it repeats sends a statement back to the general path:
    a write is seen at once; a parameter of another type, an index dropped, a search
    index made all answer as the general path does; a scan past its limit fails as
    there."""
    from widetable.search import FieldSchema
    from widetable.sql import session
    db, _ = loaded
    prefix = "SELECT OrderNumber, Amount FROM consumption WHERE CardID = ?"
    count = "SELECT COUNT(*) FROM consumption WHERE Device = ?"
    for sql, p in [(prefix, ["card003"]), (count, ["pos1"])]:
        assert db.sql(sql, p).rows == db.sql(sql, p).rows == db.sql(sql, p, **DUCK).rows
    n = len(db.sql(prefix, ["card003"]).rows)
    db.table("consumption").put_row(("card003", "dev0", "seller0", 5000), {"Amount": 1.5})
    got = db.sql(prefix, ["card003"]).rows
    assert len(got) == n + 1 and (5000, 1.5) in got
    for options in ({}, DUCK):  # an INTEGER against a STRING column: DuckDB's error
        with pytest.raises(WidetableError, match="type mismatch"):
            db.sql(prefix, [3], **options).rows
    before = db.sql(count, ["pos1"], **DUCK).rows
    db.drop_index("consumption", "by_device")
    assert db.sql("EXPLAIN " + count, ["pos1"]).rows[0][1].startswith("full scan")
    assert db.sql(count, ["pos1"]).rows == before
    db.create_index("consumption", "by_device", ["Device"], index_type="GLOBAL",
                    progress=False)
    assert db.wait_for_indexes(30)
    assert db.sql(count, ["pos1"]).rows == db.sql(count, ["pos1"]).rows == before
    db.create_search_index("consumption", "ix", [FieldSchema("Device", "KEYWORD")])
    assert db.wait_for_search_indexes("consumption", "ix")
    assert db.sql("EXPLAIN " + count, ["pos1"]).rows[0][1].startswith("search index ix")
    r = db.sql(count, ["pos1"])
    assert r.rows == before and r.stats == {"consumption": before[0][0]}  # read by ix
    # A scan limit: the cached path leaves the statement to the general path, which
    # raises the limit's error.
    monkeypatch.setattr(session, "MAX_SCAN_ROWS", 3)
    small = "SELECT DeviceID FROM consumption WHERE CardID = ?"
    assert db.sql(small, ["card999"]).rows == db.sql(small, ["card999"]).rows == []
    with pytest.raises(WidetableError, match="read more than 3 rows"):
        db.sql(small, ["card003"]).rows


def test_the_cached_key_path_checks_schema_less_values(db) -> None:
    t = db.create_table("p", [("k", "STRING"), ("n", "INTEGER")])
    t.put_row(("a", 1), {"v": b"\x00\xff", "w": 1})
    t.put_row(("a", 2), {"w": 2})
    t.put_row(("b", 1), {"v": "text", "w": 2})
    db.sql("CREATE TABLE p (k VARCHAR(8), n BIGINT, v MEDIUMBLOB, w BIGINT, PRIMARY KEY(k, n))")
    for sql in ["SELECT * FROM p WHERE k = ?", "SELECT w, v FROM p WHERE k = ?"]:
        for _ in range(3):  # compiled on the first call, then the cached path
            got = db.sql(sql, ["a"]).rows
            assert got == db.sql(sql, ["a"], **DUCK).rows
            assert len(got) == 2 and (None in got[1])
            with pytest.raises(WidetableError) as info:
                db.sql(sql, ["b"]).rows
            assert "mapped as MEDIUMBLOB" in info.value.message and "('b', 1)" in \
                info.value.message
