"""The advisor's rules. Each takes an Evidence and returns findings (none when the design is fine).

``RULES`` lists them in report order: load first, then encoding, then rows.
"""

from __future__ import annotations

from collections.abc import Callable

from ..findings import Evidence, Finding
from . import encoding, hotspots, rows

Rule = Callable[[Evidence], "Finding | list[Finding] | None"]

RULES: tuple[Rule, ...] = (
    hotspots.monotonic_first_key,
    hotspots.partition_key_skew,
    hotspots.partition_value_size,
    encoding.hashed_with_ranges,
    encoding.separator_order,
    encoding.unpadded_integers,
    encoding.long_keys,
    encoding.pii_in_keys,
    rows.wide_rows,
    rows.hot_cold_mix,
)

RULE_IDS = (
    "monotonic-first-key", "partition-key-skew", "partition-value-size",
    "hash-prefix-with-range-scans", "separator-order", "unpadded-integers", "long-keys",
    "pii-in-keys", "wide-rows", "oversized-cells", "hot-cold-mix",
)


def run_rules(ev: Evidence) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        found = rule(ev)
        if isinstance(found, Finding):
            out.append(found)
        elif found:
            out.extend(found)
    return out


__all__ = ["RULES", "RULE_IDS", "run_rules"]
