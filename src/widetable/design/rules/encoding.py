"""Rules about how key values are written: padding, separators, length, hashing, PII."""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise

from ...keys import codec
from ...keys.builders import separator_conflict
from ..findings import (
    CRITICAL,
    HASH_PREFIX,
    INFO,
    SALT_PREFIX,
    WARNING,
    Evidence,
    Finding,
    fraction,
    rounded,
    timestamp_like,
)

SEPARATORS = ":#|/;_-~,"
CONCAT_SEP = ","  # keys.concat's default
LONG_KEY = 100  # seed 001 §3.1: 总长度建议不超过100字节
VERY_LONG_KEY = 512


def _strings(ev: Evidence, i: int) -> list[str]:
    return [v for v in ev.column(i) if isinstance(v, str)]


def _fields(value: str, sep: str | None) -> list[str]:
    return value.split(sep) if sep else [value]


def detect_separator(values: list[str]) -> str | None:
    """The separator character found in at least 90% of ``values``, if any.

    Of characters found equally often, the one that cuts the values into a steady
    number of parts wins, then ``keys.concat``'s ``","``: in ``"user-7,0042"`` the
    ``"-"`` is data.
    """
    if not values:
        return None
    best = None
    for sep in SEPARATORS:
        share = fraction(values, lambda v, s=sep: s in v)
        if share < 0.9:
            continue
        counts = Counter(v.count(sep) for v in values)
        steady = counts.most_common(1)[0][1] / len(values)
        rank = (share, steady, sep == CONCAT_SEP)
        if best is None or rank > best[0]:
            best = (rank, sep)
    return best[1] if best else None


def unpadded_integers(ev: Evidence) -> list[Finding]:
    """Integers written as text without zero padding: "10" sorts before "9"."""
    out = []
    for i, (name, type_) in enumerate(ev.primary_key):
        values = _strings(ev, i)
        if type_ != "STRING" or len(values) < 20:
            continue
        sep = detect_separator(values)
        for pos in range(max((len(_fields(v, sep)) for v in values), default=0)):
            parts = [f[pos] for v in values if len(f := _fields(v, sep)) > pos]
            digits = [p for p in parts if p.isascii() and p.isdigit()]
            if len(digits) < 0.9 * len(parts) or len(digits) < 20:
                continue
            widths = Counter(len(p) for p in digits)
            if len(widths) < 2:
                continue
            out.append(Finding(
                rule="unpadded-integers",
                severity=WARNING,
                title=f"Key column {name!r} stores integers as text of {len(widths)} widths: "
                "text order is not numeric order",
                column=name,
                evidence=rounded({
                    "field": pos, "numeric_fraction": len(digits) / len(parts),
                    "min_width": min(widths), "max_width": max(widths),
                }),
                seed_rule="seed 000 §通過拼接方式使用分區鍵 (高位補 0); seed 004 §在整數前面補零",
                fix=(f"Zero-pad to {max(widths)} digits or more (keys.concat(n, widths=[{max(max(widths), 8)}])), "
                     "or store the value in an INTEGER key column."),
            ))
            break
    return out


def separator_order(ev: Evidence) -> list[Finding]:
    """A separator that sorts above some data character breaks the concatenated order."""
    out = []
    for i, (name, type_) in enumerate(ev.primary_key):
        values = _strings(ev, i)
        sep = detect_separator(values)
        if type_ != "STRING" or sep is None:
            continue
        parts = [p for v in values for p in v.split(sep)]
        bad = separator_conflict(sep, [p for p in parts if p])
        if bad is None:
            continue
        ordered = sorted(set(values))
        misordered = sum(1 for a, b in pairwise(ordered) if a.split(sep) > b.split(sep))
        conflicting = fraction(parts, lambda p, s=sep: bool(p) and min(p) <= s)
        out.append(Finding(
            rule="separator-order",
            severity=CRITICAL if misordered else WARNING,
            title=f"Separator {sep!r} (0x{ord(sep):02X}) in {name!r} sorts above data characters "
            f"such as {min(bad)!r}: concatenated keys can sort out of order",
            column=name,
            evidence=rounded({
                "separator_code": ord(sep), "conflicting_part_fraction": conflicting,
                "misordered_neighbours": misordered, "sampled_values": len(values),
            }),
            seed_rule="seed 000 §通過拼接方式使用分區鍵 (串連符應選擇 ASCII 值小於所有可用資料字元的字元)",
            fix="Join parts with a separator below every data character, e.g. ',' (0x2C) for "
            "letters and digits: keys.concat(..., sep=',') checks it (keys.check_separator).",
        ))
    return out


def long_keys(ev: Evidence) -> Finding | None:
    """Keys past about 100 bytes cost memory, storage and time on every request."""
    sizes = []
    types = [t for _, t in ev.primary_key]
    for k in ev.keys:
        try:
            sizes.append(len(codec.encode_tuple(k, types[: len(k)])))
        except Exception:  # noqa: BLE001, S112 - a sampled key that does not fit the schema
            continue
    if not sizes:
        return None
    sizes.sort()
    p95 = sizes[min(len(sizes) - 1, int(len(sizes) * 0.95))]
    if p95 <= LONG_KEY:
        return None
    return Finding(
        rule="long-keys",
        severity=CRITICAL if sizes[-1] > VERY_LONG_KEY else WARNING,
        title=f"Primary keys are long: 95% are up to {p95} bytes, the longest {sizes[-1]}",
        evidence={"mean_bytes": round(sum(sizes) / len(sizes), 1), "p95_bytes": p95,
                  "max_bytes": sizes[-1], "advised_max_bytes": LONG_KEY},
        seed_rule="seed 000 §主鍵列長度與資料量約束 (較短的主鍵有利於提升查詢速度); seed 001 §3.1 长度控制; "
        "seed 004 §資料列索引鍵應簡短",
        fix="Shorten the key: short codes instead of names, move long descriptive values into "
        "attribute columns, hash only what must be unique.",
    )


def hashed_with_ranges(ev: Evidence) -> Finding | None:
    """A hash prefix or salt on a table whose workload reads ranges: reads fan out or break."""
    if not ev.range_scans:
        return None
    name, type_ = ev.primary_key[0]
    values = ev.column(0)
    if len(values) < 20:
        return None
    strs = [v for v in values if isinstance(v, str)]
    hashed = fraction(strs, lambda v: bool(HASH_PREFIX.match(v))) if strs else 0.0
    salted = fraction(strs, lambda v: bool(SALT_PREFIX.match(v))) if strs else 0.0
    distinct = len(set(values))
    buckets = 0
    kind = None
    digests = fraction(values, lambda v: isinstance(v, bytes) and len(v) in (16, 20, 32)) if type_ == "BINARY" else 0.0
    if digests > 0.9 or hashed >= 0.95 and fraction(strs, lambda v: bool(_HEX_LETTER.match(v))) >= 0.3:
        kind = "hashed"
    elif salted >= 0.95 and fraction(strs, timestamp_like) < 0.5:
        buckets = len({SALT_PREFIX.match(v).group(0) for v in strs if SALT_PREFIX.match(v)})  # type: ignore[union-attr]
        kind = "salted"
    elif type_ == "INTEGER" and distinct <= 256 and len(ev.primary_key) > 1 and \
            fraction(ev.column(1), timestamp_like) > 0.9:
        buckets, kind = distinct, "bucketed"
    if kind is None:
        return None
    if kind == "hashed":
        title = f"First key column {name!r} is hashed, but the workload reads ranges: ranges in the original order are gone"
        fix = ("Lead with a naturally dispersed column and keep order within it (seed 000 方法三 局部有序), "
               "or keep the hash and serve range queries from a secondary index or a search index "
               "(多元索引: db.create_search_index, then db.search with a RangeQuery and a FieldSort; "
               "seed 000: 如果需要範圍查詢，可以使用多元索引替代).")
        sev = WARNING
    else:
        title = (f"First key column {name!r} salts rows into {buckets} buckets: every range read "
                 f"fans out to {buckets} queries")
        fix = ("Keep it if writes need it, and read with BucketedTable (parallel, merged in key order); "
               "fewer buckets mean less fan-out (seed 000: 桶數越多, 讀取時需查詢的桶也越多). "
               "Or order by time or any other field with a search index (多元索引: "
               "db.create_search_index, then db.search with a FieldSort), one query over every bucket "
               "(seed 000: 通過多元索引實現按時間等欄位的有序查詢).")
        sev = INFO if buckets <= 16 else WARNING
    return Finding(
        rule="hash-prefix-with-range-scans",
        severity=sev,
        title=title,
        column=name,
        evidence=rounded({"hashed_fraction": max(hashed, salted, digests), "buckets": buckets,
                          "read_fanout": buckets or "all partitions"}),
        seed_rule="seed 000 §在分區鍵中加入雜湊首碼 (無法再使用範圍讀取); seed 004 §雜湊值",
        fix=fix,
    )


_HEX_LETTER = re.compile(r"^[0-9]*[a-f]")
_PII_NAME = re.compile(
    r"(e-?mail|phone|mobile|tel(ephone)?$|ssn|passport|id_?card|identity|national_?id|"
    r"full_?name|first_?name|last_?name|birth|address|身份证|身份證|手机|手機|姓名|住址)", re.IGNORECASE)
_EMAIL = re.compile(r"[^@\s,]+@[^@\s,]+\.[a-z]{2,}", re.IGNORECASE)
_PHONE = re.compile(r"(^|\D)(\+?\d{1,3}[ -]?)?1[3-9]\d{9}($|\D)|(^|\D)\+\d{9,15}($|\D)")
_CN_ID = re.compile(r"(^|\D)\d{17}[\dXx]($|\D)")
_DIGIT_RUN = re.compile(r"(?<![\d+])\d{10,19}(?!\d)")


def _without_times(value: str) -> str:
    """``value`` with bare digit runs that read as epoch times blanked out: a millisecond
    time such as 1713000123456 would otherwise pass for a phone number behind a country code."""
    return _DIGIT_RUN.sub(lambda m: "#" if timestamp_like(m.group(0)) else m.group(0), value)


def _looks_personal(value: str) -> bool:
    if _EMAIL.search(value):
        return True
    digits = _without_times(value)
    return bool(_PHONE.search(digits) or _CN_ID.search(digits))


def pii_in_keys(ev: Evidence) -> Finding | None:
    """Personal data in keys: keys end up in logs, metrics and tools (Key Visualizer labels)."""
    hits = []
    evidence: dict = {}
    for i, (name, _) in enumerate(ev.primary_key):
        values = [v for v in ev.column(i) if isinstance(v, str)]
        share = fraction(values, _looks_personal)
        named = bool(_PII_NAME.search(name))
        if share >= 0.3 or named:
            hits.append(name)
            evidence[f"{name}_pii_value_fraction"] = round(share, 4)
            evidence[f"{name}_pii_name"] = int(named)
    if not hits:
        return None
    value_hit = any(v >= 0.3 for k, v in evidence.items() if k.endswith("fraction"))
    return Finding(
        rule="pii-in-keys",
        severity=CRITICAL if value_hit else WARNING,
        title=f"Key column{'s' if len(hits) > 1 else ''} {', '.join(map(repr, hits))} "
        "look like personal data (e-mail, phone, ID number, name)",
        column=hits[0],
        evidence=evidence,
        seed_rule="seed 004 §隱私權 (避免在資料列索引鍵中使用個人識別資訊)",
        fix="Key rows by a surrogate id (a random or sequence-derived user id, reversed or hashed) "
        "and keep the personal value in an attribute column. A hash prefix does not hide the value "
        "(keys.hash_prefix keeps it in clear); an HMAC with a secret does.",
    )
