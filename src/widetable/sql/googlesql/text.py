"""GoogleSQL's string and bytes literals, decoded before sqlglot parses the statement.

sqlglot's BigQuery tokenizer keeps ``\\x``, octal and ``\\u`` escapes undecoded and
decodes ``\\\\``, so ``'\\xff'`` and ``'\\\\xff'`` reach the tree as the same text. This
pre-pass finds every literal (skipping comments and backquoted names), decodes it by
GoogleSQL's rules and puts a placeholder parameter ``@__wt_lit_<n>`` in its place; the
planner swaps each placeholder for its value (a ``str`` or ``bytes``).

Literal grammar (GoogleSQL's lexical structure)::

    literal  := [prefix] quoted
    prefix   := r | b | rb | br            (case-insensitive)
    quoted   := '...' | "..." | '''...''' | \"\"\"...\"\"\"
    escape   := \\a \\b \\f \\n \\r \\t \\v \\\\ \\? \\" \\' \\` | \\ooo (3 octal digits)
              | \\xhh | \\Xhh | \\uhhhh | \\Uhhhhhhhh     (not in raw literals)

In a bytes literal ``\\x``/octal escapes are bytes and other characters are UTF-8; in a
string literal they are code points. A newline ends a one-quote literal.
"""

from __future__ import annotations

import re

from ...errors import ParameterInvalid

PLACEHOLDER = "__wt_lit_"

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`"}
_TYPED = {"DATE", "TIMESTAMP", "DATETIME", "TIME", "NUMERIC", "BIGNUMERIC", "JSON", "INTERVAL"}
_WORD_AT_END = re.compile(r"(?:^|[^A-Za-z0-9_])([A-Za-z]+)$")
_HEX = set("0123456789abcdefABCDEF")


def extract_literals(text: str) -> tuple[str, list[str | bytes]]:
    """``text`` with every string/bytes literal replaced by ``@__wt_lit_<n>``, and the
    decoded values in order. ParameterInvalid naming the literal if one is malformed."""
    out: list[str] = []
    values: list[str | bytes] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i) or c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ParameterInvalid(f"Syntax error: unclosed comment at offset {i}")
            out.append(text[i:j + 2])
            i = j + 2
            continue
        if c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise ParameterInvalid(f"Syntax error: unclosed identifier quote at offset {i}")
            out.append(text[i:j + 1])
            i = j + 1
            continue
        start, prefix = i, ""
        if c in "rRbB" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = i
            while j < n and j - i < 2 and text[j] in "rRbB":
                j += 1
            if j < n and text[j] in "'\"" and text[i:j].lower() in ("r", "b", "rb", "br"):
                prefix, i = text[i:j].lower(), j
                c = text[i]
        if c in "'\"":
            value, i = _literal(text, i, start, "r" in prefix, "b" in prefix)
            if not prefix and _typed(out):
                # DATE '2024-01-02', TIMESTAMP '...': sqlglot reads these itself
                out.append(text[start:i])
                continue
            out.append(f"@{PLACEHOLDER}{len(values)}")
            values.append(value)
            continue
        i = start + 1 if not prefix else start + len(prefix)
        out.append(text[start:i])
    return "".join(out), values


def _typed(out: list[str]) -> bool:
    """Whether the text so far ends with a typed literal's keyword (``DATE '...'``)."""
    m = _WORD_AT_END.search("".join(out[-16:]).rstrip())
    return m is not None and m.group(1).upper() in _TYPED


def _literal(text: str, i: int, start: int, raw: bool, is_bytes: bool) -> tuple[str | bytes, int]:
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(quote)
    parts: list[str] = []
    chunks: list[bytes] = []

    def flush() -> None:
        if parts:
            chunks.append("".join(parts).encode("utf-8"))
            parts.clear()
    while True:
        if j >= len(text):
            raise ParameterInvalid(f"Syntax error: unclosed string literal at offset {start}: "
                                   f"{text[start:start + 40]!r}")
        if text.startswith(quote, j):
            j += len(quote)
            break
        ch = text[j]
        if ch == "\n" and len(quote) == 1:
            raise ParameterInvalid(f"Syntax error: unclosed string literal at offset {start}")
        if ch != "\\":
            parts.append(ch)
            j += 1
            continue
        if j + 1 >= len(text):
            raise ParameterInvalid(f"Syntax error: illegal escape at the end of {text[start:]!r}")
        if raw:
            parts.append(text[j:j + 2])
            j += 2
            continue
        e = text[j + 1]
        if e in _SIMPLE:
            parts.append(_SIMPLE[e])
            j += 2
        elif e in "xX":
            h = text[j + 2:j + 4]
            if len(h) != 2 or not set(h) <= _HEX:
                raise ParameterInvalid(f"Illegal escape sequence: \\{e}{h} in {text[start:j + 4]!r}")
            if is_bytes:
                flush()
                chunks.append(bytes([int(h, 16)]))
            else:
                parts.append(chr(int(h, 16)))
            j += 4
        elif e in "01234567":
            o = text[j + 1:j + 4]
            if len(o) != 3 or not set(o) <= set("01234567") or int(o, 8) > 255:
                raise ParameterInvalid(f"Illegal escape sequence: \\{o} in {text[start:j + 4]!r}")
            if is_bytes:
                flush()
                chunks.append(bytes([int(o, 8)]))
            else:
                parts.append(chr(int(o, 8)))
            j += 4
        elif e in "uU":
            width = 4 if e == "u" else 8
            h = text[j + 2:j + 2 + width]
            if len(h) != width or not set(h) <= _HEX or int(h, 16) > 0x10FFFF \
                    or 0xD800 <= int(h, 16) <= 0xDFFF:
                raise ParameterInvalid(f"Illegal escape sequence: \\{e}{h} in {text[start:j + 2 + width]!r}")
            parts.append(chr(int(h, 16)))
            j += 2 + width
        else:
            raise ParameterInvalid(f"Illegal escape sequence: \\{e} in {text[start:j + 2]!r}")
    if is_bytes:
        flush()
        return b"".join(chunks), j
    return "".join(parts), j


__all__ = ["PLACEHOLDER", "extract_literals"]
