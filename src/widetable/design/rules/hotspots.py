"""Rules about where the load goes: the first key column, its spread, its size."""

from __future__ import annotations

import statistics

from ..findings import (
    CRITICAL,
    INFO,
    PARTITION_VALUE_LIMIT,
    WARNING,
    Evidence,
    Finding,
    as_int,
    fraction,
    leading_number,
    load_by_value,
    reversed_timestamp_like,
    rounded,
    sequential_density,
    stats_totals,
    timestamp_like,
    top_shares,
)
from ..workloads import KeyColumn

MIN_SAMPLE = 100  # keys needed before judging a distribution
MIN_LOAD_SAMPLE = 1000  # recorded requests needed before judging load shares
YEAR_DAYS = 365
MIN_GROWTH_WINDOW = 3600  # seconds of statistics before a write rate is projected
MIN_WRITE_TIMES = 32  # distinct write times a sample needs before they tell the write order
SCATTERED = 0.2  # |rank correlation| of key order and write order below which writes scattered


def _columns(ev: Evidence) -> list[KeyColumn]:
    return [KeyColumn(n, n, t) for n, t in ev.primary_key]


def dispersed_column(ev: Evidence) -> int | None:
    """The key column (other than the first) with the most distinct sampled values
    that is neither a time nor a sequence: the best candidate to lead the key."""
    best: tuple[int, int] | None = None
    for i in range(1, len(ev.primary_key)):
        values = ev.column(i)
        if (fraction(values, timestamp_like) > 0.5 or sequential_density(values) > 0.5
                or fraction(values, reversed_timestamp_like) > 0.5):
            continue
        distinct = len(set(values))
        if best is None or distinct > best[0]:
            best = (distinct, i)
    return None if best is None else best[1]


def monotonic_first_key(ev: Evidence) -> Finding | None:
    """Timestamp or auto-increment first: every write lands on the last partition (or,
    for reversed timestamps, on the first)."""
    name, _ = ev.primary_key[0]
    values = ev.column(0)
    summary = (ev.stats or {}).get("summary", {})
    tail = float(summary.get("tail_share", 0.0)) if summary.get("hot_spot") == "tail" else 0.0
    ts = fraction(values, timestamp_like)
    density = sequential_density(values, ev.total_rows)
    lead_ts, lead_density, lead_rev = _leading_parts(values, ev.total_rows)
    order = write_order(ev)
    if order is not None and abs(order) < SCATTERED:
        # Dense numbers, but the rows were not written in their order: the sequence was
        # spread (reversed digits of sequential ids fill the same span), so no end is hot.
        density = lead_density = 0.0
    rev = max(fraction(values, reversed_timestamp_like), lead_rev)
    if max(ts, lead_ts, rev) < 0.9 and max(density, lead_density) < 0.5 and not tail:
        return None
    where = "the last partition (tail hot spot)"
    if ts >= 0.9:
        kind = "timestamps"
    elif rev >= 0.9:  # before the sequence: reversed times written every tick fill their span
        kind = "reversed timestamps" if lead_rev < 0.9 else \
            "concatenated values that start with a reversed timestamp"
        where = "the first partition (head hot spot: the newest row always sorts first)"
    elif density >= 0.5:
        kind = "an increasing sequence"
    elif lead_ts >= 0.9:
        kind = "concatenated values that start with a timestamp"
    elif lead_density >= 0.5:
        kind = "concatenated values that start with an increasing sequence"
    else:
        kind = "keys"
    ts = max(ts, lead_ts)  # whole values or their leading numbers; reversed times apart
    timed = max(ts, rev)
    fix_cols = _columns(ev)
    if len(fix_cols) > 1:
        other = dispersed_column(ev) or 1
        fix_cols = [fix_cols[other]] + [c for i, c in enumerate(fix_cols) if i != other]
        fix = (
            f"Lead the key with a dispersed column: ({', '.join(c.name for c in fix_cols)}), "
            f"so rows stay in {name} order within each {fix_cols[0].name} (seed 000 方法一). If reads "
            f"need global {name} order, prefix a hash (keys.hash_prefix, 方法二) or write into N "
            f"buckets and read them in parallel (keys.salted + BucketedTable, 方法三)."
        )
    elif rev >= 0.9:
        fix_cols = [KeyColumn(name, name, "STRING", "hash_prefix", 4)]
        fix = (
            "A reversed timestamp orders rows newest first, but every write still lands at one "
            "end of the key space: put it after a dispersed part (seed 004 keeps it behind the "
            "row's entity), prefix a hash (keys.hash_prefix, seed 000 方法二), or use a "
            "BucketedTable if ranges must stay readable."
        )
    else:
        fix_cols = [KeyColumn(name, name, "STRING", "hash_prefix", 4)]
        fix = (
            f"Prefix {name} with a hash (keys.hash_prefix, seed 000 方法二) or reverse it "
            f"(keys.reverse_digits, seed 004); or use a BucketedTable if ranges must stay readable."
        )
    return Finding(
        rule="monotonic-first-key",
        severity=CRITICAL if timed >= 0.9 or tail else WARNING,
        title=f"First key column {name!r} holds {kind}: writes pile onto {where}",
        column=name,
        evidence=rounded({
            "sampled_keys": len(values), "timestamp_like_fraction": ts,
            "sequential_density": max(density, lead_density), "tail_share_of_load": tail,
            "reversed_timestamp_fraction": rev,
            **({"write_order_correlation": order} if order is not None else {}),
        }),
        seed_rule="seed 000 §主鍵設計 常見熱點問題 (尾部熱點); seed 004 §以時間戳記開頭的資料列索引鍵; "
        "seed 001 §1.3 热点规避原则",
        fix=fix,
        fix_design=tuple(fix_cols),
    )


def _ranks(values: list) -> list[float]:
    """Each value's rank in sorted order, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def write_order(ev: Evidence) -> float | None:
    """Spearman's rank correlation of the sampled rows' first key values and their last
    writes: near 1 (or -1) when rows were written in key order, rising (or falling), as
    a sequence writes them; near 0 when the key order says nothing of the write order.
    None when the sample does not tell: no write times, or fewer than MIN_WRITE_TIMES
    distinct ones (a bulk load in a few milliseconds), or values that do not sort."""
    rows = ev.rows
    if not rows or len(rows) != len(ev.keys):
        return None
    times = [r.last_write_ms for r in rows]
    if len(set(times)) < MIN_WRITE_TIMES:
        return None
    try:
        by_key = _ranks([k[0] for k in ev.keys])
    except TypeError:  # values of mixed types
        return None
    by_time = _ranks(times)
    try:
        return statistics.correlation(by_key, by_time)
    except statistics.StatisticsError:  # every key value the same
        return None


def _leading_parts(values: list, population: int | None) -> tuple[float, float, float]:
    """Of string keys that concatenate parts, most starting with a number: the shares
    whose leading number is a time and a reversed time, and how densely the leading
    numbers fill their span (zeros when they do not, and no density when the numbers
    repeat, as a bucket or an id shared by many rows does: only a new number for
    nearly every row is a sequence)."""
    leads = [n for n in map(leading_number, values) if n is not None]
    if not values or len(leads) < 0.9 * len(values):
        return 0.0, 0.0, 0.0
    lead_ts = fraction(leads, timestamp_like)
    lead_rev = fraction(leads, reversed_timestamp_like)
    distinct = len(set(leads))
    density = sequential_density(leads, population) if distinct >= 0.9 * len(leads) else 0.0
    return lead_ts, density, lead_rev


def partition_key_skew(ev: Evidence) -> Finding | None:
    """Few partition-key values, or a few carrying most rows or load (SellerID)."""
    name, _ = ev.primary_key[0]
    values = ev.column(0)
    load = load_by_value(ev.stats)
    # Hot keys are a top-k sample: a value's share is of every recorded request,
    # not of the sampled ones, or the busiest sampled key would always look dominant.
    load_total = stats_totals(ev.stats)["operations"]
    load_top = (
        load.most_common(1)[0][1] / load_total if load and load_total >= MIN_LOAD_SAMPLE else 0.0
    )
    if len(values) < MIN_SAMPLE and not load_top:
        return None
    distinct, top1, top5, tops = top_shares(values)
    if fraction(values, timestamp_like) > 0.5 or _leading_parts(values, None)[0] > 0.5:
        return None  # a time column is the monotonic rule's business
    low_cardinality = bool(values) and distinct < 64 and len(values) >= 10 * distinct
    skewed = top1 >= 0.2 or load_top >= 0.3
    if not (low_cardinality or skewed):
        return None
    cols = _columns(ev)
    other = dispersed_column(ev)
    fix_cols: list[KeyColumn] = []
    if other is not None:
        fix_cols = [cols[other]] + [c for i, c in enumerate(cols) if i != other]
        fix = (
            f"Lead with {cols[other].name} ({len(set(ev.column(other)))} distinct in the sample): "
            f"primary key ({', '.join(c.name for c in fix_cols)}), as seed 000 picks CardID over "
            f"SellerID. If reads must go by {name}, concatenate it with a dispersed column "
            f"(keys.concat) or add a secondary index."
        )
    else:
        fix = (f"Concatenate {name} with a dispersed column into the partition key (keys.concat), "
               f"or salt it into buckets (keys.salted).")
    uniform = not skewed and top1 <= 1.5 / max(distinct, 1)
    if uniform:  # evenly used buckets (seed 000 方法三): only the partition count is capped
        severity = INFO
    elif top1 >= 0.25 or load_top >= 0.3 or distinct < 16:
        severity = CRITICAL
    else:
        severity = WARNING
    return Finding(
        rule="partition-key-skew",
        severity=severity,
        title=f"Partition key {name!r} is {'low-cardinality' if low_cardinality else 'skewed'}: "
        f"{distinct} values, the top one holds {top1:.0%} of rows"
        + (f"; the table can never use more than {distinct} partitions" if uniform else ""),
        column=name,
        evidence=rounded({
            "sampled_keys": len(values), "distinct_values": distinct,
            "top1_row_share": top1, "top5_row_share": top5, "top1_load_share": load_top,
            "top_value": str(tops[0][0]) if tops else None,
        }),
        seed_rule="seed 000 §設計案例 學生卡消費記錄 (SellerID 為分區鍵: 不推薦); seed 003 §水平分区 (热分区)",
        fix=fix,
        fix_design=tuple(fix_cols),
    )


def partition_value_size(ev: Evidence) -> Finding | None:
    """One partition-key value projected past 10 GB: rows of one value never split."""
    name, _ = ev.primary_key[0]
    values = ev.column(0)
    if not values:
        return None
    _, top1, _, tops = top_shares(values)
    total = max(ev.total_bytes, ev.expected_bytes or 0)
    now = total * top1
    t = stats_totals(ev.stats)
    # A growth rate needs a long enough window: a burst of test writes is not a trend.
    rate = t["bytes_written"] / t["seconds"] if t["seconds"] >= MIN_GROWTH_WINDOW else 0.0
    projected = now + rate * top1 * YEAR_DAYS * 86400
    if projected < PARTITION_VALUE_LIMIT:
        return None
    return Finding(
        rule="partition-value-size",
        severity=CRITICAL,
        title=f"One {name} value ({tops[0][0]!s}) is projected to hold {projected / (1 << 30):.1f} GiB "
        "within a year; a partition-key value never splits",
        column=name,
        evidence=rounded({
            "top1_row_share": top1, "table_bytes": total, "top_value_bytes": int(now),
            "write_bytes_per_sec": rate, "projected_bytes_1y": int(projected),
            "limit_bytes": PARTITION_VALUE_LIMIT,
        }),
        seed_rule="seed 000 §主鍵列長度與資料量約束 (10 GB); §進階最佳化 情境一 拼接多列為分區鍵",
        fix=(f"Concatenate {name} with the next key columns into one partition key, e.g. "
             f"keys.concat(DeviceID, SellerID, CardID) as seed 000 情境一 does, so one {name} spreads "
             f"over many partition-key values."),
    )


def first_is_integer_sequence(values: list) -> bool:
    return all(as_int(v) is not None for v in values) and sequential_density(values) >= 0.5
