"""Structure checks read the code with ``ast``: layers below ``db`` never reach into a Database.

The layers below ``db`` (keys, storage, table, partition, stream, index, search, and
the leaf modules beside them) get what they need from the store context they are
given (``widetable.context.StoreContext``). They must not import ``widetable.db``
(not even for type hints), and must not touch a private attribute of ``Database``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import widetable

ROOT = Path(widetable.__file__).parent
BELOW_DB_PACKAGES = ("keys", "storage", "table", "partition", "stream", "index", "search", "sql",
                     "bigtable")
BELOW_DB_MODULES = ("context.py", "errors.py", "descriptions.py", "health.py")
DB_RECEIVERS = {"db", "database", "_db", "store"}  # names a Database was passed under


def below_db_files() -> list[Path]:
    files = [ROOT / name for name in BELOW_DB_MODULES if (ROOT / name).exists()]
    for package in BELOW_DB_PACKAGES:
        if (ROOT / package).is_dir():
            files += sorted((ROOT / package).rglob("*.py"))
    return files


def _database_source() -> Path:
    package = ROOT / "db" / "database.py"
    return package if package.exists() else ROOT / "db.py"


def database_private_names() -> set[str]:
    """Private attributes and methods of ``Database``: ``self._x = ...`` and ``def _x``."""
    tree = ast.parse(_database_source().read_text(encoding="utf-8"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Database")
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_") \
                and not node.name.startswith("__"):
            names.add(node.name)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            names.add(node.attr)
    return names


def _names_defined(trees: list[ast.Module]) -> set[str]:
    """Attribute names the lower layers define themselves (on their own classes)."""
    out: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                out.add(node.attr)
            elif isinstance(node, ast.Assign):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    return out


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _imports_db(path: Path, tree: ast.Module) -> list[str]:
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]  # e.g. widetable, table
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target + "." + a.name for a in node.names] if target == "widetable" else [target]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {n}" for n in names
                  if n == "widetable.db" or n.startswith("widetable.db.")]
    return found


def violations() -> list[str]:
    private = database_private_names()
    files = below_db_files()
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in files}
    only_database = private - _names_defined(list(trees.values()))
    found: list[str] = []
    for path, tree in trees.items():
        found += _imports_db(path, tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in private:
                continue
            receiver = _receiver_name(node.value)
            if node.attr in only_database or receiver in DB_RECEIVERS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                             f"{ast.unparse(node)} is a private attribute of Database")
    return found


def test_the_checks_see_the_code() -> None:
    assert {"_engine", "_tables", "_check_open"} <= database_private_names()
    assert any(p.name == "table.py" for p in below_db_files())


def test_no_module_below_db_touches_a_private_attribute_of_database() -> None:
    found = violations()
    assert not found, "layers below db reach into Database:\n" + "\n".join(found)
