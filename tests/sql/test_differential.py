"""Differential test: seeded random tables, queries from templates, each compared with SQLite.

The tables are the seed-000 student-card consumption records (key CardID, DeviceID,
SellerID, OrderNumber, pre-split into partitions so full scans run in parallel) and a
table of cards to join with. Cells are missing at random (NULL in both engines).
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from .datasets import (
    CARDS_DEFINED,
    CARDS_PK,
    CONSUMPTION_DEFINED,
    CONSUMPTION_PK,
    random_consumption,
)

SEED = 24
CONSUMPTION_SQL = ("CREATE TABLE consumption (CardID VARCHAR(64), DeviceID VARCHAR(64), "
                   "SellerID VARCHAR(64), OrderNumber BIGINT, Amount DOUBLE, Canteen MEDIUMTEXT, "
                   "Refunded BOOL, Device MEDIUMTEXT, "
                   "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))")
CARDS_SQL = ("CREATE TABLE cards (CardID VARCHAR(64), Name MEDIUMTEXT, Grade BIGINT, "
             "PRIMARY KEY(CardID))")
KEY = "CardID, DeviceID, SellerID, OrderNumber"


def _templates(rnd: random.Random, rows: list) -> list[tuple[str, list, bool]]:
    """``(sql, params, ordered)``: each template with a few random parameter sets."""
    out = []
    cards = sorted({pk[0] for pk, _ in rows}) + ["card999"]
    for _ in range(4):
        pk = rnd.choice(rows)[0]
        miss = (pk[0], pk[1], pk[2], pk[3] + 1000)
        card = rnd.choice(cards)
        lo, hi = sorted(rnd.sample(range(1000), 2))
        out += [
            # Point lookups, hit and miss.
            (f"SELECT * FROM consumption WHERE CardID = ? AND DeviceID = ? AND SellerID = ? "
             f"AND OrderNumber = ?", list(pk), True),
            ("SELECT Amount, Canteen FROM consumption WHERE CardID = ? AND DeviceID = ? "
             "AND SellerID = ? AND OrderNumber = ?", list(miss), True),
            # A key prefix and a range on the next column.
            (f"SELECT {KEY}, Amount FROM consumption WHERE CardID = ? AND DeviceID >= ? "
             f"AND DeviceID < ? ORDER BY {KEY}", [card, "dev1", "dev4"], True),
            (f"SELECT OrderNumber, Amount FROM consumption WHERE CardID = ? AND DeviceID = ? "
             f"AND SellerID = ? AND OrderNumber BETWEEN ? AND ? ORDER BY OrderNumber",
             [pk[0], pk[1], pk[2], lo, hi], True),
            (f"SELECT {KEY} FROM consumption WHERE CardID > ? AND CardID <= ? ORDER BY {KEY}",
             [min(card, pk[0]), max(card, pk[0])], True),
            # IN.
            (f"SELECT {KEY}, Canteen FROM consumption WHERE CardID IN (?, ?, ?) ORDER BY {KEY}",
             rnd.sample(cards, 3), True),
            (f"SELECT {KEY} FROM consumption WHERE CardID = ? AND DeviceID IN (?, ?) "
             f"ORDER BY {KEY}", [card, "dev2", "dev5"], True),
            # Non-key predicates and NULLs.
            (f"SELECT {KEY}, Amount FROM consumption WHERE Amount > ? AND Canteen = ? "
             f"ORDER BY {KEY}", [round(rnd.uniform(0, 80), 1), rnd.choice(["north", "south"])],
             True),
            (f"SELECT {KEY} FROM consumption WHERE Canteen IS NULL OR Amount IS NULL "
             f"ORDER BY {KEY}", [], True),
            (f"SELECT COUNT(*), COUNT(Amount), COUNT(Refunded) FROM consumption "
             f"WHERE Refunded = ? OR Refunded IS NULL", [rnd.random() < 0.5], True),
            # LIKE (case-sensitive, as in SQLite with case_sensitive_like).
            (f"SELECT {KEY} FROM consumption WHERE Device LIKE ? ORDER BY {KEY}",
             [rnd.choice(["pos%", "%1", "ph_ne%", "%o%"])], True),
            (f"SELECT {KEY} FROM consumption WHERE Canteen NOT LIKE ? ORDER BY {KEY}",
             [rnd.choice(["%th", "W%"])], True),
            # GROUP BY with HAVING; COUNT(DISTINCT).
            ("SELECT CardID, COUNT(*), SUM(Amount), MIN(OrderNumber), MAX(Amount) "
             "FROM consumption GROUP BY CardID HAVING COUNT(*) > ? ORDER BY CardID",
             [rnd.randrange(1, 12)], True),
            ("SELECT Canteen, COUNT(DISTINCT CardID), AVG(Amount) FROM consumption "
             "GROUP BY Canteen ORDER BY Canteen", [], True),
            ("SELECT DeviceID, SellerID, COUNT(*) FROM consumption WHERE OrderNumber < ? "
             "GROUP BY DeviceID, SellerID ORDER BY DeviceID, SellerID", [rnd.randrange(1000)],
             True),
            # Joins.
            ("SELECT c.CardID, c.OrderNumber, k.Name FROM consumption c JOIN cards k "
             "ON c.CardID = k.CardID WHERE k.Grade = ? ORDER BY c.CardID, c.DeviceID, "
             "c.SellerID, c.OrderNumber", [rnd.randrange(1, 5)], True),
            ("SELECT k.CardID, COUNT(c.OrderNumber) FROM cards k LEFT JOIN consumption c "
             "ON c.CardID = k.CardID GROUP BY k.CardID ORDER BY k.CardID", [], True),
            ("SELECT c.CardID, k.Grade FROM consumption c LEFT JOIN cards k ON "
             "c.CardID = k.CardID WHERE c.CardID = ? ORDER BY c.DeviceID, c.SellerID, "
             "c.OrderNumber", [card], True),
            ("SELECT k.Grade, SUM(c.Amount), COUNT(DISTINCT c.DeviceID) FROM consumption c "
             "JOIN cards k ON c.CardID = k.CardID GROUP BY k.Grade ORDER BY k.Grade", [], True),
            # ORDER BY with LIMIT and OFFSET (ties broken by the key).
            (f"SELECT {KEY}, Amount FROM consumption ORDER BY Amount DESC, {KEY} "
             f"LIMIT ? OFFSET ?", [rnd.randrange(1, 20), rnd.randrange(0, 30)], True),
            (f"SELECT {KEY} FROM consumption WHERE CardID = ? ORDER BY OrderNumber, {KEY} "
             f"LIMIT ?", [card, rnd.randrange(1, 5)], True),
            (f"SELECT DISTINCT Canteen, Refunded FROM consumption ORDER BY Canteen, Refunded",
             [], True),
        ]
    return out


def _norm(row: tuple) -> tuple:
    out = []
    for v in row:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float):
            v = round(v, 6)
        out.append(v)
    return tuple(out)


@pytest.fixture
def loaded(db):
    consumption, cards = random_consumption(SEED, 1500)
    db.create_table("consumption", CONSUMPTION_PK, defined_columns=CONSUMPTION_DEFINED,
                    split_points=["card010", "card020", "card030"])
    db.create_table("cards", CARDS_PK, defined_columns=CARDS_DEFINED)
    for name, rows in (("consumption", consumption), ("cards", cards)):
        for i in range(0, len(rows), 200):
            db.batch_write_row([(name, "put", pk, cols) for pk, cols in rows[i:i + 200]])
    db.sql(CONSUMPTION_SQL)
    db.sql(CARDS_SQL)
    lite = sqlite3.connect(":memory:")
    lite.execute("PRAGMA case_sensitive_like = ON")
    lite.execute("CREATE TABLE consumption (CardID TEXT, DeviceID TEXT, SellerID TEXT, "
                 "OrderNumber INTEGER, Amount REAL, Canteen TEXT, Refunded INTEGER, Device TEXT)")
    lite.execute("CREATE TABLE cards (CardID TEXT, Name TEXT, Grade INTEGER)")
    for pk, c in consumption:
        lite.execute("INSERT INTO consumption VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (*pk, c.get("Amount"), c.get("Canteen"), c.get("Refunded"), c.get("Device")))
    for pk, c in cards:
        lite.execute("INSERT INTO cards VALUES (?, ?, ?)", (pk[0], c.get("Name"), c.get("Grade")))
    yield db, lite, consumption
    lite.close()


def test_queries_match_sqlite(loaded) -> None:
    db, lite, rows = loaded
    rnd = random.Random(SEED)
    checked = 0
    for sql, params, ordered in _templates(rnd, rows):
        got = [_norm(r) for r in db.sql(sql, params).rows]
        want = [_norm(r) for r in lite.execute(sql, params).fetchall()]
        if not ordered:
            got, want = sorted(got, key=repr), sorted(want, key=repr)
        assert got == want, f"{sql} {params}"
        checked += 1
    assert checked > 80


def test_full_scans_run_per_partition(loaded) -> None:
    db, _, _ = loaded
    plan = db.sql("EXPLAIN SELECT COUNT(*) FROM consumption WHERE Amount > 10").rows
    assert "full scan (4 partitions in parallel)" in plan[0][1]
    assert db.sql("SELECT COUNT(*) FROM consumption").rows[0][0] == len(loaded[2])
