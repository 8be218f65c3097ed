"""Background garbage collection: which tables a purge round reads (``Background.purge_round``).

A round reads every table with a TTL, and a table without TTL only when its rows
may hold versions past max_versions: in the first round after opening, and after
update_table lowered max_versions.
"""

from __future__ import annotations

import time

import pytest

import widetable
from widetable.table import rowcodec
from widetable.table.values import now_ms


def _stored_versions(db, name: str, pk: tuple) -> int:
    """Versions of column ``x`` as stored, before any read-side trimming."""
    table = db.table(name)
    row = rowcodec.unpack(db._engine.get(table._key(pk)[1]))
    history = row[4] or {}
    return 1 + len(history.get("x", ())) // 2


def _spy_rounds(db) -> list[set[str]]:
    """Records the tables each purge round reads (the real purge still runs)."""
    rounds: list[set[str]] = []
    purge_table = db._background.purge_table

    def recording(table):
        rounds[-1].add(table.name)
        return purge_table(table)

    db._background.purge_table = recording
    real_round = db._background.purge_round

    def round_():
        rounds.append(set())
        return real_round()

    db._background.purge_round = round_
    return rounds


def test_first_round_after_open_reads_every_table(tmp_path) -> None:
    now = now_ms()
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("mv", [("k", "STRING")], max_versions=3)
        db.table("mv").put_row(("a",), [("x", i, now - 10 + i) for i in range(3)])
        db.update_table("mv", max_versions=1)  # closed before any purge ran
        assert _stored_versions(db, "mv", ("a",)) == 3
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("plain", [("k", "STRING")])
        db.create_table("ttl", [("k", "STRING")], ttl=3600)
        rounds = _spy_rounds(db)
        assert db._background.purge_round() == 1
        assert _stored_versions(db, "mv", ("a",)) == 1
        assert db.table("mv").get_row(("a",))["x"] == 2
        db._background.purge_round()
        assert rounds == [{"mv", "plain", "ttl"}, {"ttl"}]


def test_lowering_max_versions_brings_the_table_into_the_next_round(tmp_path) -> None:
    now = now_ms()
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("mv", [("k", "STRING")], max_versions=3)
        db.create_table("other", [("k", "STRING")], max_versions=3)
        rounds = _spy_rounds(db)
        db._background.purge_round()  # the first round: every table
        db.table("mv").put_row(("a",), [("x", i, now - 10 + i) for i in range(3)])
        db.update_table("other", max_versions=5)  # raised: nothing to trim
        db._background.purge_round()
        db.update_table("mv", max_versions=2)
        assert db._background.purge_round() == 1
        assert _stored_versions(db, "mv", ("a",)) == 2
        db._background.purge_round()
        assert rounds == [{"mv", "other"}, set(), {"mv"}, set()]


def test_background_thread_trims_a_lowered_max_versions(tmp_path) -> None:
    now = now_ms()
    with widetable.open(str(tmp_path), purge_interval=0.05) as db:
        db.create_table("mv", [("k", "STRING")], max_versions=3)
        time.sleep(0.2)  # the first round has run
        db.table("mv").put_row(("a",), [("x", i, now - 10 + i) for i in range(3)])
        db.update_table("mv", max_versions=1)
        deadline = time.monotonic() + 10
        while _stored_versions(db, "mv", ("a",)) != 1:
            assert time.monotonic() < deadline, "the purge thread did not trim the row"
            time.sleep(0.02)


def test_a_failed_round_is_owed_again(tmp_path) -> None:
    now = now_ms()
    with widetable.open(str(tmp_path), purge_interval=None) as db:
        db.create_table("mv", [("k", "STRING")], max_versions=3)
        db._background.purge_round()
        db.table("mv").put_row(("a",), [("x", i, now - 10 + i) for i in range(3)])
        db.update_table("mv", max_versions=1)
        purge_table = db._background.purge_table

        def failing(table):
            raise OSError("disk went away")

        db._background.purge_table = failing
        with pytest.raises(OSError, match="disk went away"):
            db._background.purge_round()
        db._background.purge_table = purge_table
        assert db._background.purge_round() == 1
        assert _stored_versions(db, "mv", ("a",)) == 1
