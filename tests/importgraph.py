"""What a module of the package imports, read with ``ast`` (for the layering tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import widetable

PACKAGE = Path(widetable.__file__).parent


def imports(path: Path) -> list[str]:
    """Every module ``path`` (a file of the package) imports, relative imports resolved;
    those under ``if TYPE_CHECKING:`` are left out (they never run). ``from a import b``
    gives both ``a`` and ``a.b`` (``b`` may be a module)."""
    # the package a relative import starts from: the folder of the file, for a package's
    # own __init__.py too (``a/b/__init__.py``'s ``from .c import x`` is ``a.b.c``)
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    tree = ast.parse(path.read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    names = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            names.append(target)
            names += [f"{target}.{a.name}" for a in node.names]
    return names


def under(name: str, *prefixes: str) -> bool:
    """Whether module ``name`` is one of ``prefixes`` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def offenders(folder: str, *prefixes: str) -> dict[str, list[str]]:
    """``{file: [imported modules under prefixes]}`` for the files of ``folder`` (a path
    inside the package) that import any."""
    bad = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        found = [name for name in imports(path) if under(name, *prefixes)]
        if found:
            bad[str(path.relative_to(PACKAGE))] = found
    return bad
