"""The first-party import graph of the project, read with ``ast`` (no module is imported).

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy import
runs when its function does), ``if TYPE_CHECKING:`` blocks included. So does the import by name that no
statement shows: ``factory.corpora.corpus(name)`` imports the dataset modules ``CORPORA`` names, so a
module that imports ``corpus`` from ``factory.corpora`` imports them all.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("factory", "schemas", "validators", "bench")
REGISTRY = "factory.corpora"  # its corpus(name) imports the modules its CORPORA names


def module_file(name: str) -> Path | None:
    """factory.backtrace.graph -> factory/backtrace/graph.py (or the package's __init__.py)."""
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def registry_modules() -> frozenset[str]:
    """The dataset modules ``factory.corpora.CORPORA`` names, read from its source (a dict literal)."""
    for node in ast.parse(module_file(REGISTRY).read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "CORPORA" and node.value is not None:
            return frozenset(ast.literal_eval(node.value).values())
    raise AssertionError(f"{REGISTRY} defines no CORPORA = {{...}} literal: the import reader cannot see it")


@cache
def imports_of(path: Path) -> frozenset[str]:
    """First-party modules that ``path`` imports (``from a import b`` counts as a.b when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if module_file(n) else node.module for n in names]
            if node.module == REGISTRY and any(alias.name == "corpus" for alias in node.names):
                names += sorted(registry_modules())
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in FIRST_PARTY and module_file(n))
    return frozenset(found)


def project_modules() -> list[Path]:
    return sorted(p for top in FIRST_PARTY for p in (ROOT / top).rglob("*.py"))


def parents(name: str) -> list[str]:
    """The packages whose __init__ runs before ``name`` is imported."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(path: Path, leaves: frozenset[Path] = frozenset()) -> set[Path]:
    """Every first-party file that runs when ``path`` runs: its imports, recursively, with their packages
    (the imports of ``leaves`` are not followed)."""
    seen: set[Path] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in leaves:
            continue
        for name in imports_of(current) | set(parents(module_name(current))):
            file = module_file(name)
            if file is not None and file not in seen:
                todo.append(file)
    return seen
