"""Data sets of the SQL tests: small ones written out (the behaviour files' ``load``), and
seeded random ones for the differential test (the seed-000 student-card table and a
second table of cards for joins)."""

from __future__ import annotations

import random

from widetable import Database

# Seed 000's student-card consumption records: the key CardID, DeviceID, SellerID,
# OrderNumber (the order the seed recommends), with typed attributes.
CONSUMPTION_PK = [("CardID", "STRING"), ("DeviceID", "STRING"), ("SellerID", "STRING"),
                  ("OrderNumber", "INTEGER")]
CONSUMPTION_DEFINED = [("Amount", "DOUBLE"), ("Canteen", "STRING"), ("Refunded", "BOOLEAN"),
                       ("Device", "STRING")]
CARDS_PK = [("CardID", "STRING")]
CARDS_DEFINED = [("Name", "STRING"), ("Grade", "INTEGER")]


def load_small(db: Database) -> None:
    """Seven consumption records and four cards, written out so expected rows can be read
    off by hand (behaviour files). c4 has no consumption; c5 has no card."""
    db.create_table("consumption", CONSUMPTION_PK, defined_columns=CONSUMPTION_DEFINED)
    db.create_table("cards", CARDS_PK, defined_columns=CARDS_DEFINED)
    t = db.table("consumption")
    for pk, cols in [
        (("c1", "d1", "s1", 1), {"Amount": 10.5, "Canteen": "north", "Refunded": False}),
        (("c1", "d1", "s1", 2), {"Amount": 3.0, "Canteen": "north", "Refunded": True}),
        (("c1", "d2", "s2", 3), {"Amount": 7.25, "Canteen": "south", "Note": "late"}),
        (("c2", "d1", "s1", 4), {"Amount": 12.0, "Canteen": "north", "Refunded": False}),
        (("c2", "d3", "s3", 5), {"Canteen": "east"}),
        (("c3", "d2", "s2", 6), {"Amount": 1.0}),
        (("c5", "d1", "s1", 7), {"Amount": 2.5, "Canteen": "north"}),
    ]:
        t.put_row(pk, cols)
    c = db.table("cards")
    for pk, cols in [("c1", {"Name": "Ann", "Grade": 1}), ("c2", {"Name": "Bob", "Grade": 2}),
                     ("c3", {"Name": "Cid", "Grade": 2}), ("c4", {"Grade": 3})]:
        c.put_row((pk,), cols)


SMALL_MAPPINGS = [
    "CREATE TABLE consumption (CardID VARCHAR(64), DeviceID VARCHAR(64), SellerID VARCHAR(64), "
    "OrderNumber BIGINT, Amount DOUBLE, Canteen MEDIUMTEXT, Refunded BOOL, "
    "PRIMARY KEY(CardID, DeviceID, SellerID, OrderNumber))",
    "CREATE TABLE cards (CardID VARCHAR(64), Name MEDIUMTEXT, Grade BIGINT, PRIMARY KEY(CardID))",
]

DATASETS = {"small": load_small}


def random_consumption(seed: int, rows: int) -> tuple[list, list]:
    """Seeded rows of the consumption and cards tables: ``[(pk, columns)]`` each. Cells
    are sometimes missing (NULL in SQL); some cards have no consumption and some
    consumption has no card."""
    rnd = random.Random(seed)
    cards = [f"card{i:03d}" for i in range(40)]
    devices = [f"dev{i}" for i in range(6)]
    sellers = [f"seller{i}" for i in range(5)]
    canteens = ["north", "south", "east", "West", None]
    consumption = []
    seen = set()
    for n in range(rows):
        pk = (rnd.choice(cards), rnd.choice(devices), rnd.choice(sellers), rnd.randrange(1000))
        if pk in seen:
            continue
        seen.add(pk)
        cols: dict = {}
        if rnd.random() < 0.9:
            cols["Amount"] = round(rnd.uniform(0.5, 80), 2)
        canteen = rnd.choice(canteens)
        if canteen is not None:
            cols["Canteen"] = canteen
        if rnd.random() < 0.7:
            cols["Refunded"] = rnd.random() < 0.2
        if rnd.random() < 0.8:
            cols["Device"] = rnd.choice(["pos", "phone", "kiosk"]) + str(rnd.randrange(3))
        consumption.append((pk, cols))
    card_rows = []
    for i, cid in enumerate(cards[5:] + ["card900", "card901"]):
        cols = {"Grade": rnd.randrange(1, 5)}
        if rnd.random() < 0.85:
            cols["Name"] = rnd.choice(["Ann", "Bob", "Cid", "Dee", "Eve"]) + str(i % 7)
        card_rows.append(((cid,), cols))
    return consumption, card_rows


def load_small_indexed(db: Database) -> None:
    """``small`` with a global index on Canteen (covering Amount) and a local one on
    (CardID, Canteen)."""
    load_small(db)
    db.create_index("consumption", "by_canteen", ["Canteen"], defined_columns=["Amount"],
                    index_type="GLOBAL", progress=False)
    db.create_index("consumption", "by_card_canteen", ["CardID", "Canteen"], index_type="LOCAL",
                    progress=False)
    assert db.wait_for_indexes(30)


DATASETS["small_indexed"] = load_small_indexed
