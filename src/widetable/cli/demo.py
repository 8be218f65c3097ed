"""``widetable demo``: the student-card consumption table of seed 000's design case.

The primary key is ``CardID, DeviceID, SellerID, OrderNumber``. CardID leads,
so it is the partition key: tens of thousands of cards, each swiped a few times
a day, spread writes evenly, while a few popular sellers would take most
writes if SellerID led. OrderNumber grows per device, so leading with it would
put every new write at the tail. Money is an INTEGER in fen (cents), as the
seed advises, so no amount is ever rounded.

The data are synthetic and deterministic for a given seed. A previous demo
table in the same store is dropped and rebuilt, so the demo can run again and
again in one directory.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable
from rich.text import Text

from ..db import Database
from ..errors import ConditionCheckFail, WidetableError
from ..keys.codec import INF_MAX, INF_MIN
from ..table.batch import MAX_BATCH_WRITE
from ..table.filters import Condition, RowExistence, col
from . import render

TABLE = "consumption"
PRIMARY_KEY = [
    ("CardID", "STRING"),
    ("DeviceID", "STRING"),
    ("SellerID", "STRING"),
    ("OrderNumber", "INTEGER"),
]
# (SellerID, canteen, share of swipes, terminals): a few sellers take most swipes.
SELLERS = [
    ("S01", "North", 30, 5),
    ("S02", "North", 18, 3),
    ("S03", "South", 14, 3),
    ("S04", "South", 10, 2),
    ("S05", "Library", 9, 2),
    ("S06", "Library", 8, 2),
    ("S07", "Gym", 6, 1),
    ("S08", "Market", 5, 1),
]
# What a swipe bought, by canteen: Chinese text for the search index's word segmentation.
NOTES = {
    "North": ("早餐 豆漿 油條", "午餐 紅燒牛肉 米飯", "晚餐 牛肉麵"),
    "South": ("午餐 番茄炒蛋 米飯", "晚餐 水餃", "早餐 包子 豆漿"),
    "Library": ("咖啡 拿鐵", "文具 筆記本", "列印 講義"),
    "Gym": ("運動飲料", "游泳 門票"),
    "Market": ("水果 蘋果", "牛奶 麵包"),
}
SEARCH_INDEX = "consumption_search"
START_MS = int(datetime(2024, 9, 1, 23, 0, tzinfo=UTC).timestamp() * 1000)  # 07:00 UTC+8
ROWS_PER_CARD = 12

Record = tuple[tuple[str, str, str, int], dict[str, object]]


def generate(rows: int, seed: int) -> list[Record]:
    """``rows`` swipes in time order; OrderNumber counts up per terminal from 1."""
    rng = random.Random(seed)
    cards = max(1, rows // ROWS_PER_CARD)
    terminals: list[tuple[str, str, str]] = []
    weights: list[float] = []
    for seller, canteen, share, count in SELLERS:
        for _ in range(count):
            terminals.append((f"D{len(terminals) + 1:04d}", seller, canteen))
            weights.append(share / count)
    orders = dict.fromkeys((d for d, _, _ in terminals), 0)
    picks = rng.choices(terminals, weights=weights, k=rows)
    now = START_MS
    out: list[Record] = []
    for device, seller, canteen in picks:
        now += rng.randint(2_000, 60_000)
        orders[device] += 1
        card = f"card{rng.randrange(cards):05d}"
        columns = {
            "amount": rng.randint(6, 50) * 50,  # fen: 3.00 to 25.00 yuan
            "time": now,
            "canteen": canteen,
            "paid": rng.random() > 0.03,  # a few offline swipes await settlement
            "note": rng.choice(NOTES[canteen]),
        }
        out.append(((card, device, seller, orders[device]), columns))
    return out


def load(db: Database, records: list[Record]) -> None:
    """(Re)create the table and write the records in batches of 200."""
    if TABLE in db.list_tables():
        say(f"Table {TABLE!r} exists from a previous run; dropping and rebuilding it.")
        db.delete_table(TABLE)
    db.create_table(TABLE, PRIMARY_KEY)
    columns = (
        TextColumn("load {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=render.err_console) as progress:
        task = progress.add_task(TABLE, total=len(records))
        for i in range(0, len(records), MAX_BATCH_WRITE):
            batch = [(TABLE, "put", pk, cols) for pk, cols in records[i : i + MAX_BATCH_WRITE]]
            for result in db.batch_write_row(batch):
                if not result.ok:
                    raise result.error  # type: ignore[misc]
            progress.advance(task, len(batch))


def run(db: Database, rows: int = 3000, seed: int = 42) -> None:
    """Build the table and show each kind of read and write on it."""
    started = time.perf_counter()
    records = generate(rows, seed)
    load(db, records)
    t = db.table(TABLE)
    per_card = Counter(pk[0] for pk, _ in records)
    card = min(per_card, key=lambda c: (-per_card[c], c))  # the busiest card
    heading("Table design (seed 000: student-card consumption records)")
    say(
        f"Primary key {', '.join(n for n, _ in PRIMARY_KEY)}; amount is INTEGER fen, as money "
        "should be (no floating-point rounding)."
    )
    show_partition_choice(records)

    lo, hi = (card, INF_MIN, INF_MIN, INF_MIN), (card, INF_MAX, INF_MAX, INF_MAX)
    mine = [(pk, c) for pk, c in records if pk[0] == card]
    latest_pk = max(mine, key=lambda r: r[1]["time"])[0]
    heading("Point read: get_row")
    say(f"t.get_row({latest_pk!r}) reads one row by its full key.")
    row = t.get_row(latest_pk)
    render.console.print(render.row_detail_table(row, t.schema.pk_names))  # type: ignore[arg-type]
    missing = (card, "D9999", "S99", 1)
    say(f"t.get_row({missing!r}) -> {t.get_row(missing)!r}: a miss is None, not an error.")

    shown = ["amount", "canteen", "paid"]
    heading("Range read: get_range, forward")
    say(
        f"Every record of {card} sits together because CardID leads the key; INF_MIN/INF_MAX "
        f"stand in for the other key columns. columns={shown} projects."
    )
    forward = t.get_range(lo, hi, columns=shown)
    show_rows(forward.rows, t, f"t.get_range(({card!r}, INF_MIN, ...), ({card!r}, INF_MAX, ...))")

    heading("Range read: get_range, backward")
    say("Backward walks down from the start bound (the higher key) to the end bound; limit=3.")
    backward = t.get_range(hi, lo, direction="backward", limit=3, columns=shown)
    show_rows(backward.rows, t, "t.get_range(hi, lo, direction='backward', limit=3)")

    heading("Filtered read: col('amount') >= 1500")
    say("The filter runs inside the store, so only rows that pass come back.")
    big = t.get_range(lo, hi, columns=shown, filter=col("amount") >= 1500)
    show_rows(
        big.rows,
        t,
        f"{len(big.rows)} of {len(forward.rows)} records of {card} cost 15.00 yuan or more",
    )

    heading("Conditional writes")
    show_conditional_writes(t, latest_pk, records)

    heading("Atomic increment: update_row(increment=...)")
    say(
        "Two refunds of 1.50 yuan; a missing column counts as 0, and concurrent increments never "
        "lose an update."
    )
    for _ in range(2):
        result = t.update_row(latest_pk, increment={"refunded": 150})
        say(f"t.update_row({latest_pk!r}, increment={{'refunded': 150}}) -> {result.increments}")

    heading("Pagination: next_start_primary_key")
    show_pages(t, card, lo, hi)

    heading("Search index (seed 000 多元索引): queries the primary key cannot serve")
    show_search(db, records)

    elapsed = time.perf_counter() - started
    heading("Done")
    say(
        f"{len(records)} records of {len(per_card)} cards in {TABLE!r} at {db.path} "
        f"({elapsed:.2f} s). Try:"
    )
    render.out(
        f"  widetable --data {db.path} scan {TABLE} --start '[\"{card}\"]' "
        f'--end \'["{card}", "INF_MAX"]\' --filter "amount >= 1500"'
    )


def show_search(db: Database, records: list[Record]) -> None:
    """A search index on the table: a seller's swipes in a time range, newest first (the
    order CardID-first keys lose), a sum per seller, and a Chinese full-text match."""
    from .. import search as S

    say(
        f"db.create_search_index({TABLE!r}, {SEARCH_INDEX!r}, ...) indexes SellerID, time, amount, "
        "canteen and note (TEXT, max_word: Chinese word segmentation); the full sync runs now, "
        "then the change log keeps it current."
    )
    db.create_search_index(TABLE, SEARCH_INDEX, fields=[
        S.FieldSchema("SellerID", "KEYWORD"), S.FieldSchema("time", "DATE"),
        S.FieldSchema("amount", "LONG"), S.FieldSchema("canteen", "KEYWORD"),
        S.FieldSchema("note", "TEXT", analyzer="max_word"),
    ])
    if not db.wait_for_search_indexes(TABLE, SEARCH_INDEX, timeout=60):
        raise WidetableError(f"search index {SEARCH_INDEX!r} did not finish its full sync in 60 s",
                             "OTSTimeout")
    seller = "S03"
    times = sorted(c["time"] for pk, c in records if pk[2] == seller)
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    query = S.BoolQuery(must_queries=(S.TermQuery("SellerID", seller), S.RangeQuery("time", lo, hi)))
    found = db.search(TABLE, SEARCH_INDEX, query, sort=[S.FieldSort("time", S.DESC)], limit=5,
                      columns=["amount", "time", "note"], get_total_count=True)
    show_rows(found.rows, db.table(TABLE),
              f"SellerID = {seller!r} AND time in [{lo}, {hi}), newest first: "
              f"5 of {found.total_count}")
    by_seller = S.GroupByField("sellers", "SellerID", size=8, sub_aggs=(S.SumAgg("fen", "amount"),))
    grouped = db.search(TABLE, SEARCH_INDEX, S.MatchAllQuery(), limit=0, group_bys=[by_seller])
    table = RichTable(title="GroupByField(SellerID) with SumAgg(amount): every card, one query",
                      box=box.SIMPLE_HEAVY)
    for name in ("SellerID", "swipes", "yuan"):
        table.add_column(name, justify="right" if name != "SellerID" else "left")
    for group in grouped.group_bys["sellers"]:
        table.add_row(str(group.key), str(group.row_count), f"{group.aggs['fen'] / 100:.2f}")
    render.console.print(table)
    beef = db.search(TABLE, SEARCH_INDEX, S.MatchQuery("note", "牛肉"), limit=3,
                     columns=["canteen", "note"], get_total_count=True)
    show_rows(beef.rows, db.table(TABLE),
              f"MatchQuery('note', '牛肉') (Chinese full text): 3 of {beef.total_count}")


def show_partition_choice(records: list[Record]) -> None:
    """How evenly each candidate partition key spreads the writes."""
    table = RichTable(
        title="If this column were the partition key", title_justify="left", box=box.SIMPLE_HEAD
    )
    for heading_ in ("column", "values", "busiest", "its writes", "verdict"):
        table.add_column(heading_)
    verdicts = {
        0: "recommended: spread over many cards",
        1: "local hot spots at busy terminals",
        2: "hot: a few sellers take most writes",
    }
    for index in (0, 2, 1):
        counts = Counter(pk[index] for pk, _ in records)
        value, n = counts.most_common(1)[0]
        table.add_row(
            PRIMARY_KEY[index][0],
            str(len(counts)),
            value,
            f"{100 * n / len(records):.1f}%",
            verdicts[index],
        )
    table.add_row("OrderNumber", "", "", "", "tail hot spot: grows per terminal")
    render.console.print(table)


def show_conditional_writes(t, pk: tuple, records: list[Record]) -> None:
    say("A terminal that retries an OrderNumber it already wrote must not charge the card twice:")
    try_write(
        f"t.put_row({pk!r}, ..., condition=Condition(EXPECT_NOT_EXIST))",
        lambda: t.put_row(pk, {"amount": 999}, condition=Condition(RowExistence.EXPECT_NOT_EXIST)),
    )
    unpaid = next((p for p, c in records if not c["paid"]), None)
    if unpaid is None:
        return
    say(f"Settle the offline swipe {unpaid!r} only while it is still unpaid:")
    settle = Condition(RowExistence.EXPECT_EXIST, col("paid").eq(False))
    for _ in range(2):
        try_write(
            "t.update_row(pk, put={'paid': True}, "
            "condition=Condition(EXPECT_EXIST, col('paid').eq(False)))",
            lambda: t.update_row(unpaid, put={"paid": True}, condition=settle),
        )


def try_write(code: str, write: Callable[[], object]) -> None:
    try:
        write()
    except ConditionCheckFail as exc:
        render.console.print(Text(f"  {code}\n    -> {exc.code}: {exc.message}", style="yellow"))
    except WidetableError as exc:  # pragma: no cover - a library bug; show it, do not hide it
        render.console.print(Text(f"  {code}\n    -> unexpected {exc}", style="red"))
        raise
    else:
        render.console.print(Text(f"  {code}\n    -> ok", style="green"))


def show_pages(t, card: str, lo: tuple, hi: tuple) -> None:
    say(
        "Each call returns at most `limit` rows (never more than 5000 rows or 4 MB); "
        "next_start_primary_key says where the next call starts, None at the end."
    )
    start, page = lo, 1
    while True:
        result = t.get_range(start, hi, limit=5)
        keys = ", ".join(f"{pk[1]}/{pk[3]}" for pk in (r.primary_key for r in result.rows))
        render.console.print(Text(f"  page {page} (DeviceID/OrderNumber): {keys}"))
        render.console.print(
            Text(f"    next_start_primary_key = {result.next_start_primary_key!r}")
        )
        if result.next_start_primary_key is None:
            return
        start, page = result.next_start_primary_key, page + 1


def show_rows(rows: list, t, title: str) -> None:
    render.console.print(render.rows_table(rows, t.schema.pk_names, title=title))


def heading(text: str) -> None:
    render.console.rule(Text(text, style="bold"))


def say(text: str) -> None:
    render.console.print(Text(text, style="italic"))
