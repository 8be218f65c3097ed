"""Keys: the order-preserving key codec, the keyspace layout, and key builders.

This package is pure: it does no I/O. Everything else builds key bytes through it.
"""

from .codec import (
    BINARY,
    INF_MAX,
    INF_MIN,
    INTEGER,
    STRING,
    decode_tuple,
    encode_tuple,
    prefix_end,
)
from .layout import pretty

__all__ = [
    "BINARY",
    "INF_MAX",
    "INF_MIN",
    "INTEGER",
    "STRING",
    "decode_tuple",
    "encode_tuple",
    "prefix_end",
    "pretty",
]

from .builders import (
    bucket,
    check_separator,
    concat,
    hash_prefix,
    parse_reverse_timestamp_str,
    reverse_digits,
    reverse_domain,
    reverse_timestamp,
    reverse_timestamp_str,
    salt_prefixes,
    salted,
    separator_conflict,
    split_concat,
    strip_hash_prefix,
    strip_salt,
)

__all__ += [
    "bucket",
    "check_separator",
    "concat",
    "hash_prefix",
    "parse_reverse_timestamp_str",
    "reverse_digits",
    "reverse_domain",
    "reverse_timestamp",
    "reverse_timestamp_str",
    "salt_prefixes",
    "salted",
    "separator_conflict",
    "split_concat",
    "strip_hash_prefix",
    "strip_salt",
]
