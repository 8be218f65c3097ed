"""Compiled key encoders: Python source generated from a key's column types, which makes the
same bytes as ``codec``'s encoders (escaped strings and binaries, offset integers) for
values already checked, in one expression. ``tests/index/test_compiled_codec.py``
checks them against ``codec`` byte for byte. Values off the fast path (over the
length limit, out of range, not UTF-8) raise :class:`Slow` inside the generated code,
which then calls the reference encoder. Used by global indexes (``compile_key_encoder``:
a base row's key) and index entries (``index.schema.compile_entry``)."""

from __future__ import annotations

from . import codec


class Slow(Exception):
    """A key value the compiled encoder leaves to the reference one."""


def tuple_code(exprs: list[tuple[str, str, bool]], out: list[str],
                indent: str) -> list[bytes | str]:
    """Code lines encoding ``(python expression, key type, checked)`` triples into locals;
    returns the parts of the encoding in order: constant bytes, or the name of a local
    holding bytes. Values must already have their Python type; ``checked`` ones have
    passed ``keys.codec``'s limits already (values of a base row's key)."""
    parts: list[bytes | str] = []
    for i, (expr, kind, checked) in enumerate(exprs):
        b = f"_k{i}"
        if kind == codec.STRING or kind == codec.BINARY:
            out.append(f"{indent}{b} = {expr}" + (".encode()" if kind == codec.STRING else ""))
            if not checked:
                out.append(f"{indent}if len({b}) > {codec.MAX_KEY_VALUE_BYTES}: raise _Slow")
            # ``0 in b`` (an int) is memchr; ``b"\0" in b`` costs ten times more.
            out.append(f"{indent}if 0 in {b}: {b} = {b}.replace(b'\\x00', b'\\x00\\xff')")
            head = codec.CODE_STRING if kind == codec.STRING else codec.CODE_BINARY
            parts += [bytes([head]), b, codec.TERMINATOR]
        else:
            if not checked:
                out.append(
                    f"{indent}if not {codec.INT64_MIN} <= {expr} <= {codec.INT64_MAX}: raise _Slow")
            out.append(f"{indent}{b} = ({expr} + {codec.INT_OFFSET}).to_bytes(8, 'big')")
            parts += [bytes([codec.CODE_INTEGER]), b]
    return parts


def join_code(parts: list[bytes | str]) -> str:
    """An expression joining ``parts`` (see :func:`tuple_code`), adjacent constants merged."""
    merged: list[bytes | str] = []
    for part in parts:
        if type(part) is bytes and merged and type(merged[-1]) is bytes:
            merged[-1] += part  # type: ignore[operator]
        else:
            merged.append(part)
    return "b''.join((" + "".join(
        f"{p!r}, " if type(p) is bytes else f"{p}, " for p in merged) + "))"


def compile_key_encoder(types: tuple[str, ...]):
    """``encode(pk tuple) -> bytes`` for key tuples already validated against ``types``
    (decoded from stored rows); the same bytes as ``keys.codec``'s encoders."""
    lines = ["def encode(pk):", "    try:"]
    body: list[str] = []
    parts = tuple_code([(f"pk[{i}]", t, False) for i, t in enumerate(types)], body, "        ")
    lines += body + [f"        return {join_code(parts)}",
                     "    except (_Slow, UnicodeEncodeError):",
                     "        return _slow(pk, _types)"]
    ns = {"_Slow": Slow, "_slow": codec.encode_tuple, "_types": types}
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the schema's types only
    return ns["encode"]
