"""The ``widetable`` command: the typer app, its shared options, and the error contract.

Commands live in :mod:`.tables` (catalog and rows), :mod:`.transfer` (import
and export) and :mod:`.tools` (demo, bench); each parses its arguments, calls
the library, and formats the result. Every :class:`~widetable.WidetableError`
prints ``Error [CODE]: message`` on stderr and exits with 1; an argument that
cannot be read is a usage error and exits with 2.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

import typer

from .. import db as _db
from ..errors import WidetableError
from ..table.filters import Condition, RowExistence, parse_filter
from . import render
from .literals import CliError, LiteralError, parse_assignment, parse_columns_json

DEFAULT_DATA = "./data"
F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="widetable",
    help="A wide-column table store with Tablestore semantics, on RocksDB.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Expect(str, enum.Enum):
    exist = "exist"
    not_exist = "not-exist"
    ignore = "ignore"


class RowFormat(str, enum.Enum):
    table = "table"
    jsonl = "jsonl"


class FileFormat(str, enum.Enum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"
    arrow = "arrow"


_EXPECT = {
    Expect.exist: RowExistence.EXPECT_EXIST,
    Expect.not_exist: RowExistence.EXPECT_NOT_EXIST,
    Expect.ignore: RowExistence.IGNORE,
}

DataOpt = Annotated[
    str | None,
    typer.Option(
        "--data", help="Store directory (overrides the global --data).", show_default=False
    ),
]
EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint", show_default=False,
        help="A running server (http://host:port or unix:///path) instead of a store, with "
             "its access key in WIDETABLE_ACCESS_KEY_ID and WIDETABLE_ACCESS_KEY_SECRET "
             "(and WIDETABLE_INSTANCE if not 'widetable'); a served store is locked by its server.",
    ),
]
PkOpt = Annotated[str, typer.Option("--pk", help="Primary key as JSON, e.g. '[\"c1\", 5]'.")]
ExpectOpt = Annotated[
    Expect, typer.Option("--expect", help="Row existence the write requires.", case_sensitive=False)
]
ConditionOpt = Annotated[
    str | None,
    typer.Option("--condition", help='Column condition the row must meet, e.g. "amount > 3".'),
]
ColsOpt = Annotated[
    list[str] | None,
    typer.Option("--col", help="Column as NAME=VALUE; VALUE is a JSON literal or a bare string."),
]
JsonOpt = Annotated[
    str | None, typer.Option("--json", help="Columns as a JSON object, e.g. '{\"amount\": 120}'.")
]
ColumnsOpt = Annotated[
    str | None, typer.Option("--columns", help="Comma-separated columns to return.")
]


# -- plumbing -----------------------------------------------------------------


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with library errors printed as ``Error [CODE]: ...`` and exit code 1."""

    @functools.wraps(fn)
    def run(*args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except WidetableError as exc:
            render.print_error(exc.code, exc.message)
        except (CliError, OSError) as exc:
            render.print_error(None, str(exc))
        except UnicodeError as exc:  # a non-UTF-8 argument (Python reads it as surrogates)
            render.print_error(None, f"an argument is not valid Unicode text: {exc.object!r}"
                               if isinstance(exc, UnicodeEncodeError) else str(exc))
        raise typer.Exit(1)

    return run


def command(name: str, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose library errors print as ``Error [CODE]: ...`` with exit 1."""

    def register(fn: F) -> F:
        app.command(name, **kwargs)(guarded(fn))
        return fn

    return register


def arg(parse: Callable[..., Any], text: str, option: str) -> Any:
    """Parse one argument; a bad one is a usage error naming the option."""
    try:
        return parse(text, option)
    except LiteralError as exc:
        message = exc.detail if exc.what == option else str(exc)
        raise typer.BadParameter(message, param_hint=f"'{option}'") from None


@app.callback()
def _root(
    ctx: typer.Context,
    data: Annotated[
        str, typer.Option("--data", envvar="WIDETABLE_DATA", help="Store directory.")
    ] = DEFAULT_DATA,
) -> None:
    ctx.ensure_object(dict)["data"] = data


def is_store(path: str) -> bool:
    """Whether ``path`` holds a store (RocksDB's ``CURRENT`` file)."""
    return os.path.isfile(os.path.join(path, "CURRENT"))


def store_path(ctx: typer.Context, data: str | None) -> str:
    return data or (ctx.obj or {}).get("data") or DEFAULT_DATA


# The files a store directory holds: RocksDB's own, and rocksdict's settings file.
_STORE_FILE = re.compile(
    r"(CURRENT|IDENTITY|LOCK|LOG(\.old\.\d+)?|(MANIFEST|OPTIONS)-\d+|\d+\.(log|sst|blob|dbtmp)"
    r"|rocksdict-config\.json)(\.dbtmp)?"
)


class NewStore:
    """Where a command that may create a store is about to open one. It refuses a path
    that is not a directory, or a directory that holds files but no store (the store's
    files would mix with them); and it remembers what opening will create, so that a
    command that fails before writing anything leaves the path as it was:
    ``discard(db)`` removes the store's files (only those) and the directories made
    for it, if the store still holds no table."""

    def __init__(self, path: str) -> None:
        self.path = path
        if os.path.lexists(path) and not os.path.isdir(path):
            raise CliError(f"{path!r} is not a directory; pass a directory for the store")
        if os.path.isdir(path) and not is_store(path) and os.listdir(path):
            raise CliError(f"{path!r} holds files but no widetable store; pass a new or empty "
                           "directory for a new store")
        self.fresh = not is_store(path)
        made = []  # the directories opening will make, deepest first
        head = os.path.abspath(path)
        while not os.path.exists(head):
            made.append(head)
            head = os.path.dirname(head)
        self.made = made

    def discard(self, database: _db.Database) -> None:
        """Close ``database``; if the store is new and still holds no table, remove it."""
        try:
            empty = self.fresh and not database.list_tables()
        except WidetableError:
            empty = False
        database.close()
        if not empty:
            return
        with os.scandir(self.path) as entries:
            for entry in entries:  # the store's files only: anything else stays
                if _STORE_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        for directory in self.made:
            try:
                os.rmdir(directory)  # only if empty: a file put there meanwhile keeps it
            except OSError:
                return


@contextlib.contextmanager
def open_db(ctx: typer.Context, data: str | None, create: bool = False) -> Iterator[_db.Database]:
    """The store at ``--data``. Only commands that write may create a new one, and one
    that fails before any table exists leaves none behind."""
    path = store_path(ctx, data)
    if not create and not is_store(path):
        what = "no store" if not os.path.exists(path) else "not a widetable store"
        raise CliError(f"{what} at {path!r}; create a table first or pass --data DIR")
    new = NewStore(path)
    database = _db.open(path, purge_interval=None)
    try:
        yield database
    except BaseException:
        new.discard(database)
        raise
    database.close()


@contextlib.contextmanager
def open_target(ctx: typer.Context, data: str | None, endpoint: str | None) -> Iterator[Any]:
    """The server at ``--endpoint`` (``widetable.connect``, with the access key from the
    environment), or else the store at ``--data``. Not both."""
    if endpoint is None:
        with open_db(ctx, data) as database:
            yield database
        return
    if data is not None:
        raise CliError("pass --data (a store) or --endpoint (a server), not both")
    from ..client import connect
    from ..server.core.auth import ENV_ID, ENV_SECRET

    key_id, secret = os.environ.get(ENV_ID), os.environ.get(ENV_SECRET)
    if not key_id or not secret:
        raise CliError(f"set {ENV_ID} and {ENV_SECRET} to the server's access key to use --endpoint")
    instance = os.environ.get("WIDETABLE_INSTANCE") or "widetable"
    remote = connect(endpoint, access_key_id=key_id, access_key_secret=secret, instance=instance)
    try:
        yield remote
    finally:
        remote.close()


def columns_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [c.strip() for c in text.split(",") if c.strip()]


def condition_of(expect: Expect, condition: str | None) -> Condition | None:
    column_condition = parse_filter(condition) if condition is not None else None
    if expect is Expect.ignore and column_condition is None:
        return None
    return Condition(_EXPECT[expect], column_condition)


def write_columns(cols: list[str] | None, json_text: str | None) -> dict[str, object]:
    columns = arg(parse_columns_json, json_text, "--json") if json_text is not None else {}
    for text in cols or []:
        name, value = arg(parse_assignment, text, "--col")
        if name in columns:
            raise typer.BadParameter(f"column {name!r} is given twice", param_hint="'--col'")
        columns[name] = value
    return columns


def main(argv: list[str] | None = None) -> None:
    """The console-script entry point. Exits the process with the command's code."""
    app(args=argv, prog_name="widetable")
