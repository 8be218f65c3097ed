"""The peers of ``bench.search``: SQLite (FTS5, B-tree indexes) and PostgreSQL (tsvector
with GIN, B-tree indexes), on the same rows, answering the same queries.

Every query returns ``(card, seller, amount)`` rows, 10 at most, in the order the
search index uses: the primary key (``card``), or ``amount`` descending then
``card`` for the sorted range. The geo query is a bounding box on a B-tree over
``(lat, lon)`` plus the exact haversine test in SQL (the same sphere as
widetable's). The group-by is a terms group-by with a sum: the 10 sellers with
the most rows, with the sum of their amounts.

PostgreSQL runs in a throwaway instance (``bench/postgres.py``); when it cannot
start, :func:`open_peers` says why and the run goes on without it.
"""

from __future__ import annotations

import os
import sqlite3

from .systems.base import SystemUnavailable

EARTH = 6371008.8
COLUMNS = ("card", "seller", "device", "ts", "amount", "note", "lat", "lon")


def _haversine_sql(ph: str) -> str:
    """A haversine distance in metres from (``ph`` lat, ``ph`` lon) to (lat, lon)."""
    return (f"2 * {EARTH} * asin(sqrt(power(sin((radians(lat) - radians({ph})) / 2), 2) + "
            f"cos(radians({ph})) * cos(radians(lat)) * power(sin((radians(lon) - radians({ph})) / 2), 2)))")


def box(lat: float, lon: float, d: float) -> tuple[float, float, float, float]:
    import math
    dlat = math.degrees(d / EARTH) * 1.0001
    dlon = dlat / math.cos(math.radians(lat))
    return lat - dlat, lat + dlat, lon - dlon, lon + dlon


def flat(rows):
    for pk, c in rows:
        lat, lon = map(float, c["loc"].split(","))
        yield (pk[0], c["seller"], c["device"], c["ts"], c["amount"], c["note"], lat, lon)


class SqlitePeer:
    name = "SQLite"

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA cache_size=-262144")  # 256 MB, as widetable's block cache

    def load(self, rows) -> None:
        c = self.conn
        c.execute("CREATE TABLE card (card TEXT PRIMARY KEY, seller TEXT, device TEXT, ts INTEGER, "
                  "amount INTEGER, note TEXT, lat REAL, lon REAL)")
        c.executemany("INSERT INTO card VALUES (?,?,?,?,?,?,?,?)", flat(rows))
        for col in ("seller", "device", "amount", "ts", "lat, lon"):
            c.execute(f"CREATE INDEX card_{col.replace(', ', '_')} ON card ({col})")
        c.execute("CREATE VIRTUAL TABLE note_fts USING fts5(note, content='card', content_rowid='rowid')")
        c.execute("INSERT INTO note_fts(note_fts) VALUES ('rebuild')")
        c.commit()
        c.execute("ANALYZE")

    def _q(self, sql: str, args: tuple = ()) -> list:
        return self.conn.execute(sql, args).fetchall()

    def queries(self) -> dict:
        la0, la1, lo0, lo1 = box(30.5, 120.5, 1000)
        hv = _haversine_sql("?")
        return {
            "term": lambda: self._q("SELECT card, seller, amount FROM card WHERE seller = ? "
                                    "ORDER BY card LIMIT 10", ("S042",)),
            "range+sort": lambda: self._q("SELECT card, seller, amount FROM card WHERE amount BETWEEN "
                                          "? AND ? ORDER BY amount DESC, card LIMIT 10", (100, 200)),
            "bool of 3": lambda: self._q("SELECT card, seller, amount FROM card WHERE seller = ? AND "
                                         "amount BETWEEN ? AND ? AND device != ? ORDER BY card LIMIT 10",
                                         ("S042", 1, 5000, "D0001")),
            "match": lambda: self._q("SELECT card, seller, amount FROM card WHERE rowid IN (SELECT rowid "
                                     "FROM note_fts WHERE note_fts MATCH ?) ORDER BY card LIMIT 10",
                                     ("canteen",)),
            "geo distance": lambda: self._q(
                f"SELECT card, seller, amount FROM card WHERE lat BETWEEN ? AND ? AND lon BETWEEN ? AND ? "
                f"AND {hv} <= ? ORDER BY card LIMIT 10", (la0, la1, lo0, lo1, 30.5, 30.5, 120.5, 1000)),
            "group by+sum": lambda: self._q("SELECT seller, COUNT(*) AS n, SUM(amount) FROM card GROUP BY "
                                            "seller ORDER BY n DESC, seller LIMIT 10"),
        }

    def close(self) -> None:
        self.conn.close()


class PostgresPeer:
    name = "PostgreSQL"

    def __init__(self, instance) -> None:
        self.pg = instance
        self.conn = instance.connect()

    def load(self, rows) -> None:
        c = self.conn
        c.execute("CREATE TABLE card (card TEXT PRIMARY KEY, seller TEXT, device TEXT, ts BIGINT, "
                  "amount BIGINT, note TEXT, lat DOUBLE PRECISION, lon DOUBLE PRECISION)")
        with c.cursor() as cur, cur.copy(f"COPY card ({', '.join(COLUMNS)}) FROM STDIN") as cp:
            for r in flat(rows):
                cp.write_row(r)
        for col in ("seller", "device", "amount", "ts", "lat, lon"):
            c.execute(f"CREATE INDEX card_{col.replace(', ', '_')} ON card ({col})")
        c.execute("CREATE INDEX card_note ON card USING GIN (to_tsvector('simple', note))")
        c.execute("VACUUM ANALYZE card")

    def _q(self, sql: str, args: tuple = ()) -> list:
        return self.conn.execute(sql, args).fetchall()

    def queries(self) -> dict:
        la0, la1, lo0, lo1 = box(30.5, 120.5, 1000)
        hv = _haversine_sql("%s")
        return {
            "term": lambda: self._q("SELECT card, seller, amount FROM card WHERE seller = %s "
                                    "ORDER BY card LIMIT 10", ("S042",)),
            "range+sort": lambda: self._q("SELECT card, seller, amount FROM card WHERE amount BETWEEN "
                                          "%s AND %s ORDER BY amount DESC, card LIMIT 10", (100, 200)),
            "bool of 3": lambda: self._q("SELECT card, seller, amount FROM card WHERE seller = %s AND "
                                         "amount BETWEEN %s AND %s AND device != %s ORDER BY card LIMIT 10",
                                         ("S042", 1, 5000, "D0001")),
            "match": lambda: self._q("SELECT card, seller, amount FROM card WHERE to_tsvector('simple', "
                                     "note) @@ to_tsquery('simple', %s) ORDER BY card LIMIT 10",
                                     ("canteen",)),
            "geo distance": lambda: self._q(
                f"SELECT card, seller, amount FROM card WHERE lat BETWEEN %s AND %s AND lon BETWEEN %s "
                f"AND %s AND {hv} <= %s ORDER BY card LIMIT 10",
                (la0, la1, lo0, lo1, 30.5, 30.5, 120.5, 1000)),
            "group by+sum": lambda: self._q("SELECT seller, COUNT(*) AS n, SUM(amount) FROM card GROUP BY "
                                            "seller ORDER BY n DESC, seller LIMIT 10"),
        }

    def close(self) -> None:
        self.conn.close()
        self.pg.stop()


def open_peers(root: str, rows_fn, n: int, wanted: list[str], say=print) -> list:
    """The peers in ``wanted`` ("sqlite", "postgres"), loaded with ``rows_fn(n)``; a peer that
    cannot run is reported and left out."""
    peers = []
    if "sqlite" in wanted:
        p = SqlitePeer(os.path.join(root, "peer.sqlite"))
        p.load(rows_fn(n))
        peers.append(p)
    if "postgres" in wanted:
        from .postgres import PostgresInstance
        inst = PostgresInstance(say=say)
        try:
            inst.start()
            p = PostgresPeer(inst)
            p.load(rows_fn(n))
            peers.append(p)
        except (SystemUnavailable, ImportError) as exc:
            inst.stop()
            say(f"PostgreSQL is unavailable: {exc}")
    return peers
