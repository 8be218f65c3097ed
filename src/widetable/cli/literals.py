"""Typed values as text: the JSON forms the CLI reads and writes.

Attribute and key values map onto JSON one to one, except BINARY::

    STRING  -> "text"        INTEGER -> 120           DOUBLE -> 120.0
    BOOLEAN -> true / false  BINARY  -> {"$binary": "<base64>"}

A float always keeps its decimal point (``1.0``), so DOUBLE and INTEGER stay
apart through a round trip. ``NaN`` and ``Infinity`` are written as Python's
``json`` module writes them.

A *literal* is one value typed on a command line or in a CSV cell: it is read
as JSON, and text that is not JSON is taken as a bare string (``amount=120``
is an INTEGER, ``city=Hangzhou`` a STRING, ``zip="01234"`` a STRING). Text
starting with ``"``, ``[`` or ``{`` must be valid JSON, so a typo there is an
error rather than a silent string. :func:`format_literal` is the inverse of
:func:`parse_literal`: it quotes a string only when it would read back as
something else.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping

from ..keys.codec import INF_MAX, INF_MIN

BINARY_TAG = "$binary"
_INFINITIES = {"INF_MIN": INF_MIN, "INF_MAX": INF_MAX}


class CliError(Exception):
    """A failure of the command line itself (bad file, bad header); exits with code 1."""


class LiteralError(CliError, ValueError):
    """A value given as text could not be read: ``what`` names it, ``detail`` says why."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}" if what else detail)
        self.what = what
        self.detail = detail


def to_json(value: object) -> object:
    """The JSON form of an attribute or key value (bytes become ``{"$binary": ...}``)."""
    if type(value) is bytes:
        return {BINARY_TAG: base64.b64encode(value).decode("ascii")}
    return value


def from_json(obj: object, what: str = "value") -> object:
    """The value a JSON form stands for; the inverse of :func:`to_json`.

    Raises LiteralError for ``null``, arrays and objects other than a binary.
    """
    if isinstance(obj, (str, int, float)):  # bool is an int
        return obj
    if isinstance(obj, Mapping):
        if set(obj) == {BINARY_TAG} and isinstance(obj[BINARY_TAG], str):
            try:
                return base64.b64decode(obj[BINARY_TAG], validate=True)
            except (binascii.Error, ValueError):
                raise LiteralError(what, f"{obj[BINARY_TAG]!r} is not valid base64") from None
        raise LiteralError(
            what, f'a JSON object is not a value; write bytes as {{"{BINARY_TAG}": "<base64>"}}'
        )
    if obj is None:
        raise LiteralError(what, "null is not a value; leave the column out instead")
    raise LiteralError(what, f"{json.dumps(obj)[:60]} is not a single value")


def parse_json(text: str, what: str) -> object:
    """``json.loads`` with an error message that names the argument."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LiteralError(what, f"{text!r} is not valid JSON ({exc.msg})") from None


def parse_literal(text: str, what: str = "value") -> object:
    """Read one value: JSON if it parses, else the text itself as a STRING."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip()[:1] in ('"', "[", "{"):
            raise LiteralError(what, f"{text!r} is not valid JSON ({exc.msg})") from None
        return text
    return from_json(obj, what)


def format_literal(value: object) -> str:
    """Text that :func:`parse_literal` reads back as exactly ``value`` (same type)."""
    if type(value) is str:
        try:
            back = parse_literal(value)
        except LiteralError:
            back = None
        if type(back) is str and back == value and value != "":
            return value
    return json.dumps(to_json(value), ensure_ascii=False)


def parse_assignment(text: str, what: str = "--col") -> tuple[str, object]:
    """``name=literal`` as ``(name, value)``."""
    name, sep, literal = text.partition("=")
    if not sep or not name:
        raise LiteralError(what, f"expected NAME=VALUE, got {text!r}")
    return name.strip(), parse_literal(literal, f"column {name.strip()!r}")


def parse_columns_json(text: str, what: str = "--json") -> dict[str, object]:
    """A JSON object of ``{column: value}``."""
    obj = parse_json(text, what)
    if not isinstance(obj, dict):
        raise LiteralError(what, f"expected a JSON object of columns, got {text[:60]!r}")
    return {name: from_json(v, f"column {name!r}") for name, v in obj.items()}


def pk_from_json(obj: object, what: str = "primary key") -> object:
    """A primary key from its JSON form: an array in key order, an object by column, or a scalar."""
    if isinstance(obj, list):
        return tuple(from_json(v, what) for v in obj)
    if isinstance(obj, dict) and set(obj) != {BINARY_TAG}:
        return {name: from_json(v, f"column {name!r}") for name, v in obj.items()}
    return from_json(obj, what)


def parse_pk(text: str, what: str = "--pk") -> object:
    """A primary key given as JSON, e.g. ``["c1", 5]`` or ``{"CardID": "c1", "Seq": 5}``."""
    return pk_from_json(parse_json(text, what), what)


def parse_bound(text: str, what: str = "--start") -> object:
    """A range bound: a JSON array whose items may be the strings ``"INF_MIN"``/``"INF_MAX"``.

    A bare ``INF_MIN`` or ``INF_MAX`` is a one-item bound. A STRING key
    column whose value is literally ``"INF_MIN"`` cannot be named in a bound.
    """
    if text.strip() in _INFINITIES:
        return (_INFINITIES[text.strip()],)
    obj = parse_json(text, what)
    items = obj if isinstance(obj, list) else [obj]
    if isinstance(obj, dict) and set(obj) != {BINARY_TAG}:
        raise LiteralError(what, f"expected a JSON array of key values, got {text[:60]!r}")
    out = []
    for v in items:
        if isinstance(v, str) and v in _INFINITIES:
            out.append(_INFINITIES[v])
        else:
            out.append(from_json(v, what))
    return tuple(out)


def pk_to_json(pk: tuple) -> list:
    return [to_json(v) for v in pk]


def columns_to_json(columns: Mapping[str, object]) -> dict:
    return {name: to_json(v) for name, v in columns.items()}
