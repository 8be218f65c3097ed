"""Rules about rows: width, cell size, and hot and cold data in one table."""

from __future__ import annotations

from ..findings import CRITICAL, INFO, WARNING, Evidence, Finding, rounded

WIDE_ROW = 1000
VERY_WIDE_ROW = 10_000  # seed 000: 原則上不建議超過萬列
LARGE_CELL = 1 << 20  # half of Tablestore's 2 MB cell limit
DAY_MS = 86_400_000
COLD_AFTER_DAYS = 90
HOT_WITHIN_DAYS = 7


def wide_rows(ev: Evidence) -> list[Finding]:
    out = []
    if not ev.rows:
        return out
    cols = sorted(r.columns for r in ev.rows)
    widest = cols[-1]
    if widest >= WIDE_ROW:
        out.append(Finding(
            rule="wide-rows",
            severity=CRITICAL if widest >= VERY_WIDE_ROW else WARNING,
            title=f"Rows hold up to {widest} columns; reading such a row whole is slow",
            evidence={"max_columns": widest, "median_columns": cols[len(cols) // 2],
                      "sampled_rows": len(cols), "advised_max_columns": VERY_WIDE_ROW},
            seed_rule="seed 000 §屬性列設計 (控制行寬度: 不建議超過萬列); seed 004 §避免在單一資料列中使用過多資料欄",
            fix="Read with a column projection or ColumnPagination; split rarely read columns into another "
            "table (seed 000 按訪問頻率拆分表), or pack fields read together into one cell.",
        ))
    big = max(r.max_cell_bytes for r in ev.rows)
    if big >= LARGE_CELL:
        out.append(Finding(
            rule="oversized-cells",
            severity=WARNING,
            title=f"Cells reach {big / (1 << 20):.1f} MiB (the limit is 2 MB)",
            evidence={"max_cell_bytes": big, "limit_bytes": 2 << 20,
                      "rows_with_large_cells": sum(1 for r in ev.rows if r.max_cell_bytes >= LARGE_CELL)},
            seed_rule="seed 000 §屬性列設計 (單個屬性列值不超過 2 MB; 壓縮大文本); seed 004 §儲存格 (不超過 10 MB)",
            fix="Compress large text into a BINARY cell, split the value over several columns, or keep "
            "it in object storage and store its address.",
        ))
    return out


def hot_cold_mix(ev: Evidence) -> Finding | None:
    """Most rows untouched for months next to a busy recent set: separate hot and cold tables."""
    cold = hot = 0.0
    if ev.rows and ev.now_ms:
        ages = [(ev.now_ms - r.last_write_ms) / DAY_MS for r in ev.rows]
        cold = sum(1 for a in ages if a >= COLD_AFTER_DAYS) / len(ages)
        hot = sum(1 for a in ages if a <= HOT_WITHIN_DAYS) / len(ages)
    load_in_small = 0.0
    bytes_share = 1.0
    if ev.stats and len(ev.partition_bytes) > 1 and sum(ev.partition_bytes):
        ops: dict[int, int] = {}
        for b in ev.stats.get("buckets", []):
            for r in b["partitions"]:
                ops[r["id"]] = ops.get(r["id"], 0) + r["reads"] + r["writes"]
        total_ops = sum(ops.values())
        if total_ops:
            ranked = sorted(zip(ev.partition_ids, ev.partition_bytes), key=lambda x: -ops.get(x[0], 0))
            acc = taken = 0
            for pid, size in ranked:
                acc += ops.get(pid, 0)
                taken += size
                if acc >= 0.8 * total_ops:
                    break
            load_in_small, bytes_share = acc / total_ops, taken / sum(ev.partition_bytes)
    by_age = cold >= 0.3 and hot >= 0.05
    by_load = load_in_small >= 0.8 and bytes_share <= 0.2
    if not (by_age or by_load):
        return None
    return Finding(
        rule="hot-cold-mix",
        severity=INFO if not (by_age and by_load) else WARNING,
        title="Hot and cold data share one table: "
        + (f"{cold:.0%} of rows are over {COLD_AFTER_DAYS} days old" if by_age
           else f"{load_in_small:.0%} of the load hits {bytes_share:.0%} of the data"),
        evidence=rounded({"cold_row_fraction": cold, "hot_row_fraction": hot,
                          "load_share_of_hot_partitions": load_in_small,
                          "bytes_share_of_hot_partitions": bytes_share}),
        seed_rule="seed 000 §冷熱資料分離; seed 003 §垂直分区/功能分区",
        fix=f"Keep recent rows in an active table and move rows older than {COLD_AFTER_DAYS} days to a "
        "history table (TTL on the active one), each with its own reserved throughput.",
    )
