"""Key builders: pure functions that shape primary-key values before they are stored.

Each builder implements one rule from the design seeds (``/work/shared/seeds``):
seed 000 (Tablestore 表設計最佳實務), seed 001 (HBase Row-Key 设计原则) and seed 004
(Bigtable 結構定義設計最佳做法). They spread sequential writes (hash prefix, salt
buckets, reversed digits), keep several values in one ordered key (concatenation),
or make the newest rows sort first (reversed timestamps). None of them does I/O.

A table's data embeds these string forms, so they are frozen
(DO NOT CHANGE: embedded in on-disk data)::

    text          := str as is | int in decimal | bytes decoded as UTF-8
    hash_prefix   := lowerhex(md5(utf8(text)))[:n] sep text
    bucket        := int.from_bytes(md5(value bytes), "big") mod buckets
    salted        := zeropad(bucket, len(str(buckets - 1))) sep text
    concat        := part (sep part)*
    part          := zeropad(int + offset, width=20) | str
    reverse_timestamp_str := zeropad(2**63 - 1 - ts, 19)

Strings compare by code point, and UTF-8 bytes sort in code-point order, so
string order here is also the byte order of the stored key.

Privacy (seed 004, 隱私權): no builder hides a value. ``hash_prefix`` and
``salted`` keep the value in clear after the prefix, and reversals are
trivially undone. Do not put PII in keys because of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from ..errors import ParameterInvalid, describe

KeyValue = str | int | bytes
Part = str | int

LONG_MAX = 2**63 - 1  # java.lang.Long.MAX_VALUE (seed 004)
REVERSE_TIMESTAMP_WIDTH = 19  # DO NOT CHANGE: len(str(LONG_MAX)), embedded in on-disk data
DEFAULT_INT_WIDTH = 20  # DO NOT CHANGE: len(str(2**64 - 1)), fits int64 + 2**63
INT64_OFFSET = 2**63  # pass as ``offset`` to order every signed 64-bit integer
_HEX_DIGITS = frozenset("0123456789abcdef")


# --- values ----------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _value_bytes(value: KeyValue) -> bytes:
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise ParameterInvalid(f"key value {describe(value)} is not valid Unicode") from None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if _is_int(value):
        return str(value).encode("ascii")
    raise ParameterInvalid(
        f"key value {describe(value)} must be str, int or bytes, got {type(value).__name__}"
    )


def _value_text(value: KeyValue) -> str:
    if isinstance(value, str):
        _value_bytes(value)  # refuses lone surrogates, which no key can store
        return value
    raw = _value_bytes(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ParameterInvalid(
            f"bytes value {describe(value)} is not UTF-8, so it cannot go into a string key"
        ) from None


def _md5(value: KeyValue) -> bytes:
    return hashlib.md5(_value_bytes(value), usedforsecurity=False).digest()


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise ParameterInvalid(f"key {describe(key)} must be a string")
    return key


def _check_sep(sep: object) -> str:
    if not isinstance(sep, str) or len(sep) != 1:
        raise ParameterInvalid(f"separator {describe(sep)} must be a single character")
    return sep


def _check_count(value: object, what: str, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and low <= value
        and (high is None or value <= high)
    ):
        return value
    bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
    raise ParameterInvalid(f"{what} {describe(value)} must be an integer {bound}")


# --- hash prefix (seed 000) ------------------------------------------------


def hash_prefix(value: KeyValue, n: int = 4, sep: str = ",") -> str:
    """Prefix ``value`` with the first ``n`` hex digits of its MD5.

    Seed 000, 主鍵設計 方法二 (拼接 MD5 首碼) and 進階最佳化 情境二 (加入雜湊首碼):
    ``hash_prefix("10.10.0.1")`` is ``"7e4a,10.10.0.1"`` (the seed's ``a1b2`` is
    only an illustration). Sequential values land far apart, so writes spread
    over partitions, but a range read over the original order is no longer
    possible. A point read recomputes the same key.

    The MD5 is over the UTF-8 of ``str``, the decimal string of ``int``, or
    ``bytes`` as is; the key carries the value as text after ``sep``.
    Raises ParameterInvalid for another type, non-UTF-8 bytes, ``n`` outside
    [1, 32], or a separator that is not one character.
    """
    _check_count(n, "hash prefix length", 1, 32)
    _check_sep(sep)
    text = _value_text(value)
    return _md5(text).hex()[:n] + sep + text


def strip_hash_prefix(key: str, n: int = 4, sep: str = ",", verify: bool = True) -> str:
    """The value text of a :func:`hash_prefix` key; its inverse for ``str`` values.

    An ``int`` or ``bytes`` value comes back as its text. With ``verify`` the
    prefix must be the MD5 of that text. Raises ParameterInvalid naming ``key``
    when it lacks ``n`` hex digits and ``sep``, or when verification fails.
    """
    _check_key(key)
    _check_count(n, "hash prefix length", 1, 32)
    _check_sep(sep)
    head, mark, text = key[:n], key[n : n + 1], key[n + 1 :]
    if len(head) < n or not set(head) <= _HEX_DIGITS or mark != sep:
        raise ParameterInvalid(
            f"key {describe(key)} does not start with {n} hex digits and {sep!r}"
        )
    if verify and _md5(text).hex()[:n] != head:
        raise ParameterInvalid(
            f"hash prefix {head!r} of key {describe(key)} is not the MD5 of its value"
        )
    return text


# --- salt buckets (seed 000 方法三, seed 001 salting) ----------------------


def bucket(value: KeyValue, buckets: int) -> int:
    """A stable bucket number in ``[0, buckets)`` for ``value``.

    Seed 000, 方法三 分桶寫入 (``timestamp % 16``) and seed 001, 1.3 热点规避原则
    (salting, 预分区数取模). The number is the whole MD5 digest of the value
    (as for :func:`hash_prefix`) taken modulo ``buckets``, never Python's
    ``hash()``, so every process and every release agrees. Unlike a plain
    ``timestamp % 16`` it also spreads values that share a factor with the
    bucket count (millisecond timestamps of whole seconds are all multiples of 8).
    Raises ParameterInvalid for a bad value or ``buckets < 1``.
    """
    _check_count(buckets, "bucket count", 1)
    return int.from_bytes(_md5(value), "big") % buckets


def _bucket_label(number: int, buckets: int) -> str:
    return str(number).zfill(len(str(buckets - 1)))


def salted(value: KeyValue, buckets: int, sep: str = ",") -> str:
    """``value`` as text behind its zero-padded :func:`bucket` number.

    ``salted("10.10.0.1", 16)`` is ``"<bb>,10.10.0.1"`` with a two-digit bucket.
    Every bucket label has the width of ``buckets - 1``, so labels sort
    numerically. Writers call this; readers scan every prefix of
    :func:`salt_prefixes` and merge (seed 000: 讀取時並行查詢 16 個桶後合并).
    Raises as :func:`bucket` does, or for a separator that is not one character.
    """
    _check_sep(sep)
    text = _value_text(value)
    return _bucket_label(bucket(text, buckets), buckets) + sep + text


def strip_salt(key: str, buckets: int, sep: str = ",", verify: bool = True) -> str:
    """The value text of a :func:`salted` key; its inverse for ``str`` values.

    With ``verify`` the label must be the value's bucket. Raises
    ParameterInvalid naming ``key`` when the label or separator is missing
    or wrong.
    """
    _check_key(key)
    _check_count(buckets, "bucket count", 1)
    _check_sep(sep)
    width = len(str(buckets - 1))
    head, mark, text = key[:width], key[width : width + 1], key[width + 1 :]
    if not (len(head) == width and head.isascii() and head.isdigit()) or mark != sep:
        raise ParameterInvalid(
            f"key {describe(key)} does not start with a {width}-digit bucket and {sep!r}"
        )
    if int(head) >= buckets or (verify and int(head) != bucket(text, buckets)):
        raise ParameterInvalid(
            f"bucket {head!r} of key {describe(key)} is not the bucket of its value"
        )
    return text


def salt_prefixes(buckets: int, sep: str = ",") -> list[str]:
    """Every bucket prefix of :func:`salted` keys, in sort order, for a fan-out read."""
    _check_count(buckets, "bucket count", 1)
    _check_sep(sep)
    return [_bucket_label(i, buckets) + sep for i in range(buckets)]


# --- concatenation (seed 000 通過拼接方式使用分區鍵) ----------------------


def separator_conflict(sep: str, values: Iterable[Part]) -> str | None:
    """The first value holding a character that does not sort above ``sep``, else None.

    An ``int`` stands for its zero-padded digits, so it conflicts with any
    separator at or above ``"0"``. Raises ParameterInvalid for a bad separator
    or a value that is neither ``str`` nor ``int``.
    """
    _check_sep(sep)
    for value in values:
        if isinstance(value, str):
            text = value
        elif _is_int(value):
            text = "0" + str(abs(value))
        else:
            raise ParameterInvalid(f"key part {describe(value)} must be str or int")
        if text and min(text) <= sep:
            return text if isinstance(value, str) else str(value)
    return None


def check_separator(sep: str, values: Iterable[Part]) -> None:
    """Accept ``sep`` only if it sorts below every character of ``values``.

    Seed 000 (串連符應選擇 ASCII 值小於所有可用資料字元的字元): with SellerID
    values ``a100`` and ``a1001``, ``","`` (0x2C) keeps the order but ``":"``
    (0x3A, above the digits 0x30-0x39) puts ``000054:a1001`` before
    ``000054:a100:``. A character equal to ``sep`` is refused too, since
    :func:`split_concat` could not split it back. Returns None; raises
    ParameterInvalid naming the separator and the offending value.
    """
    bad = separator_conflict(sep, values)
    if bad is not None:
        low = min(bad)
        raise ParameterInvalid(
            f"separator {sep!r} (0x{ord(sep):02X}) breaks the key order: value {describe(bad)} "
            f"contains {low!r} (0x{ord(low):02X}), which does not sort above it; choose a "
            f"separator below every character of the data"
        )


def _render_part(part: Part, width: int | None, offset: int) -> str:
    if isinstance(part, str):
        if width is not None:
            raise ParameterInvalid(
                f"width {width} given for string part {describe(part)}; widths apply to ints"
            )
        return part
    if not _is_int(part):
        raise ParameterInvalid(
            f"key part {describe(part)} must be str or int, got {type(part).__name__}"
        )
    width = DEFAULT_INT_WIDTH if width is None else _check_count(width, "width", 1)
    shifted = part + offset
    if shifted < 0:
        raise ParameterInvalid(
            f"integer part {part} is negative after offset {offset}; zero padding orders only "
            f"non-negative integers (pass offset=2**63 to order any int64)"
        )
    digits = str(shifted)
    if len(digits) > width:
        raise ParameterInvalid(
            f"integer part {part} (+ offset {offset}) needs more than {width} digits"
        )
    return digits.zfill(width)


def concat(
    *parts: Part,
    widths: Sequence[int | None] | None = None,
    sep: str = ",",
    offset: int = 0,
) -> str:
    """Join key parts into one string key whose order is the parts' tuple order.

    Seed 000, 通過拼接方式使用分區鍵: integers are zero-padded (``123`` at width 8 is
    ``00000123``) so text order is numeric order; seed 004 (在整數前面補零) agrees.
    Each int is padded to its entry in ``widths`` (None: 20 digits, enough for
    any int64 plus ``offset``). Integers are written as ``value + offset`` and
    must not be negative after it: pass ``offset=INT64_OFFSET`` (2**63) to
    order signed int64 values; :func:`split_concat` needs the same offset.
    ``widths`` entries for string parts must be None.

    Raises ParameterInvalid when there are no parts, ``widths`` has another
    length, an int does not fit its width, or :func:`check_separator` refuses
    ``sep`` for the rendered parts.
    """
    if not parts:
        raise ParameterInvalid("concat needs at least one key part")
    if not _is_int(offset):
        raise ParameterInvalid(f"offset {describe(offset)} must be an integer")
    if widths is None:
        widths = [None] * len(parts)
    elif len(widths) != len(parts):
        raise ParameterInvalid(
            f"widths {describe(widths)} has {len(widths)} entries for {len(parts)} parts"
        )
    texts = [_render_part(p, w, offset) for p, w in zip(parts, widths)]
    check_separator(sep, texts)
    return sep.join(texts)


def _parse_field(field: str, type_: type, offset: int, key: str) -> Part:
    if type_ is str:
        return field
    if type_ is int:
        if not (field.isascii() and field.isdigit()):
            raise ParameterInvalid(
                f"field {field!r} of key {describe(key)} is not a zero-padded integer"
            )
        return int(field) - offset
    raise ParameterInvalid(f"field type {describe(type_)} must be str or int")


def split_concat(
    key: str,
    sep: str = ",",
    types: Sequence[type] | None = None,
    offset: int = 0,
) -> tuple[Part, ...]:
    """The parts of a :func:`concat` key; its inverse given the same ``sep`` and ``offset``.

    ``types`` lists ``str`` or ``int`` per part (None: every part is ``str``).
    Raises ParameterInvalid naming ``key`` when the field count differs from
    ``types`` or an ``int`` field is not all digits.
    """
    _check_key(key)
    _check_sep(sep)
    fields = key.split(sep)
    if types is None:
        return tuple(fields)
    if len(fields) != len(types):
        raise ParameterInvalid(
            f"key {describe(key)} has {len(fields)} parts, expected {len(types)}"
        )
    return tuple(_parse_field(f, t, offset, key) for f, t in zip(fields, types))


# --- reversals (seeds 001 and 004) -----------------------------------------


def reverse_timestamp(ts: int) -> int:
    """``Long.MAX_VALUE - ts``: newer timestamps get smaller numbers and sort first.

    Seed 004, 時間資料 (反向時間戳記: 從 java.lang.Long.MAX_VALUE 減去時間戳記).
    It is its own inverse: ``reverse_timestamp(reverse_timestamp(ts)) == ts``.
    Any unit works if a table uses one. Raises ParameterInvalid unless ``ts``
    is an int in ``[0, 2**63 - 1]``.
    """
    _check_count(ts, "timestamp", 0, LONG_MAX)
    return LONG_MAX - ts


def reverse_timestamp_str(ts: int) -> str:
    """:func:`reverse_timestamp` zero-padded to 19 digits, so text order is reversed time order.

    Raises as :func:`reverse_timestamp`. :func:`parse_reverse_timestamp_str`
    is the inverse.
    """
    return str(reverse_timestamp(ts)).zfill(REVERSE_TIMESTAMP_WIDTH)


def parse_reverse_timestamp_str(text: str) -> int:
    """The original timestamp of a :func:`reverse_timestamp_str` string.

    Raises ParameterInvalid naming ``text`` unless it is 19 ASCII digits no
    greater than ``2**63 - 1``.
    """
    if not (
        isinstance(text, str)
        and len(text) == REVERSE_TIMESTAMP_WIDTH
        and text.isascii()
        and text.isdigit()
        and int(text) <= LONG_MAX
    ):
        raise ParameterInvalid(f"reversed timestamp {describe(text)} is not 19 digits <= 2**63 - 1")
    return reverse_timestamp(int(text))


def reverse_digits(digits: str) -> str:
    """A phone number or sequential ID with its digits reversed; its own inverse.

    Seed 001, 1.3 热点规避原则 (手机号倒序存储) and seed 004 (依序數字 ID 使用反向
    版本): the fast-changing last digit leads, so sequential IDs spread out.
    ``"13800138000"`` gives ``"00083100831"`` (seed 001 prints a stray extra 0).
    Takes a string, since an int would lose the leading zeros on the way back.
    Raises ParameterInvalid unless ``digits`` is a non-empty string of 0-9.
    """
    if not (isinstance(digits, str) and digits.isascii() and digits.isdigit()):
        raise ParameterInvalid(f"value {describe(digits)} must be a non-empty string of digits 0-9")
    return digits[::-1]


def reverse_domain(domain: str) -> str:
    """The labels of a domain name in reverse order; its own inverse.

    Seed 004, 網域名稱: ``"mail.google.com"`` gives ``"com.google.mail"``, so every
    host of one domain shares the prefix ``"com.google."`` and sorts together.
    Case is kept as given. Raises ParameterInvalid naming ``domain`` when it is
    not a string or has an empty label (``""``, ``".com"``, ``"a..b"``).
    """
    labels = domain.split(".") if isinstance(domain, str) else [""]
    if "" in labels:
        raise ParameterInvalid(f"domain {describe(domain)} must be labels joined by single dots")
    return ".".join(reversed(labels))
