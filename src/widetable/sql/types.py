"""SQL types of mapping tables and how they map to widetable's attribute types.

Tablestore's SQL dialect names each column with a MySQL type; each SQL type
stands for one widetable type::

    BIGINT (INT, INTEGER, ...)            <-> INTEGER   int64
    DOUBLE (FLOAT, DECIMAL, ...)          <-> DOUBLE    float64
    BOOL / BOOLEAN / TINYINT(1)           <-> BOOLEAN   bool
    MEDIUMTEXT / VARCHAR / TEXT / CHAR    <-> STRING    utf-8 string
    MEDIUMBLOB / VARBINARY / BLOB / BINARY<-> BINARY    bytes

A result column's SQL type is one of the canonical names (``BIGINT``,
``DOUBLE``, ``BOOL``, ``MEDIUMTEXT``, ``MEDIUMBLOB``), or the engine's name for
anything else (``DATE``, ``TIMESTAMP``, ...).
"""

from __future__ import annotations

from ..errors import ParameterInvalid, describe

INTEGER, DOUBLE, BOOLEAN, STRING, BINARY = "INTEGER", "DOUBLE", "BOOLEAN", "STRING", "BINARY"

# The canonical SQL name of each widetable type (what DESCRIBE shows).
SQL_NAME = {INTEGER: "BIGINT", DOUBLE: "DOUBLE", BOOLEAN: "BOOL", STRING: "MEDIUMTEXT",
            BINARY: "MEDIUMBLOB"}

_BY_SQL = {
    "BIGINT": INTEGER, "INT": INTEGER, "INTEGER": INTEGER, "SMALLINT": INTEGER,
    "MEDIUMINT": INTEGER, "TINYINT": INTEGER, "UBIGINT": INTEGER, "UINT": INTEGER,
    "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "DECIMAL": DOUBLE, "REAL": DOUBLE,
    "BOOLEAN": BOOLEAN, "BOOL": BOOLEAN, "BIT": BOOLEAN,
    "MEDIUMTEXT": STRING, "VARCHAR": STRING, "TEXT": STRING, "CHAR": STRING,
    "LONGTEXT": STRING, "TINYTEXT": STRING, "NVARCHAR": STRING, "NCHAR": STRING,
    "MEDIUMBLOB": BINARY, "VARBINARY": BINARY, "BLOB": BINARY, "BINARY": BINARY,
    "LONGBLOB": BINARY, "TINYBLOB": BINARY,
}

_PY = {INTEGER: int, DOUBLE: float, BOOLEAN: bool, STRING: str, BINARY: bytes}


def widetable_type(sql_type: str, column: str = "") -> str:
    """The widetable type a declared SQL type stands for; OTSParameterInvalid if none."""
    name = sql_type.upper().split("(")[0].strip()
    if name == "TINYINT" and sql_type.replace(" ", "").upper() == "TINYINT(1)":
        return BOOLEAN  # MySQL's spelling of a boolean
    try:
        return _BY_SQL[name]
    except KeyError:
        where = f" of column {column!r}" if column else ""
        raise ParameterInvalid(
            f"SQL type {describe(sql_type)}{where} is not supported; use BIGINT, DOUBLE, BOOL, "
            "MEDIUMTEXT (VARCHAR) or MEDIUMBLOB (VARBINARY)") from None


def fits(value: object, wtype: str) -> bool:
    """Whether a stored value reads as a column of ``wtype`` (bool is not an integer here)."""
    return type(value) is _PY[wtype]
