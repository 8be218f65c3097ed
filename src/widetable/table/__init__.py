"""Table semantics: rows, versions, TTL, conditions, filters, ranges and batches."""
