"""The code each stage runs, as one digest file per stage module (the ``stage_code`` DVC stage).

A stage's code deps used to be listed in dvc.yaml path by path (its import closure, by package room).
DVC parses and rewrites the whole dvc.lock with ruamel.yaml's round-trip loader after every stage, and
those entries were more than half of its lines: about 2 s of every stage on a 2-core machine. Now the
``stage_code`` stage, which depends on the whole code tree, writes ``data/code/<module>.json`` for every
stage module: each file of its import closure with its sha256. A stage depends on its own digest file,
one dep instead of a dozen, and re-runs exactly when a file it runs changes (more precisely than a
room folder: an edit to a module no stage imports re-runs no stage).

The closure is read with ``ast`` (no module is imported): every ``import`` and ``from ... import``, at
module level or inside a function (a lazy import runs when its function does), with the packages whose
``__init__`` runs first, and the import by name no statement shows (``factory.corpora.corpus(name)``
imports the dataset modules ``CORPORA`` names). A package's data files (its templates) count with its
modules. Files that decide none of a stage's outputs are left out, each with its reason
(``NOT_OUTPUT_DECIDING``).
"""

from __future__ import annotations

import ast
import hashlib
import json
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder holding factory/, schemas/, validators/
FIRST_PARTY = ("factory", "schemas", "validators")
REGISTRY = "factory.corpora"  # its corpus(name) imports the modules its CORPORA names

# Files in a stage's import closure that decide none of its outputs, with the reason. Package __init__
# files without code (a docstring only) are left out by rule.
NOT_OUTPUT_DECIDING = {
    "factory/__init__.py": "the version string",
    "factory/utils/errors.py": "exception classes: a failure changes no output, it stops the stage",
    "factory/stages/__init__.py": "the shared command-line options of the round stages",
    "factory/utils/progress.py": "progress bars and the LLM meter: stderr, never what a stage writes",
    # Where a stage's shards run, never what they hold (tests/execution/test_cluster.py compares the bytes
    # of both engines). What the Ray engine imports for itself (its response cache's actor) is not
    # followed either: a stage that calls an LLM runs factory/llm anyway.
    "factory/execution/engine.py": "the engine that runs the shards (local or Ray)",
    "factory/execution/cluster.py": "the Ray engine",
}
NOT_FOLLOWED = ("factory/execution/engine.py", "factory/execution/cluster.py")


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """factory.backtrace.graph -> factory/backtrace/graph.py (or the package's __init__.py)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def registry_modules(root: Path = ROOT) -> frozenset[str]:
    """The dataset modules ``factory.corpora.CORPORA`` names, read from its source (a dict literal)."""
    for node in ast.parse(module_file(REGISTRY, root).read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "CORPORA" and node.value is not None:
            return frozenset(ast.literal_eval(node.value).values())
    raise RuntimeError(f"{REGISTRY} defines no CORPORA = {{...}} literal: the import reader cannot see it")


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@cache
def imports_of(path: Path, root: Path = ROOT, first_party: tuple[str, ...] = FIRST_PARTY) -> frozenset[str]:
    """First-party modules that ``path`` imports (``from a import b`` counts as a.b when that is a module)."""
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if module_file(n, root) else node.module for n in names]
            if node.module == REGISTRY and any(alias.name == "corpus" for alias in node.names):
                names += sorted(registry_modules(root))
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in first_party and module_file(n, root))
    return frozenset(found)


def parents(name: str) -> list[str]:
    """The packages whose __init__ runs before ``name`` is imported."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(
    path: Path,
    leaves: frozenset[Path] = frozenset(),
    root: Path = ROOT,
    first_party: tuple[str, ...] = FIRST_PARTY,
) -> set[Path]:
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
        for name in imports_of(current, root, first_party) | set(parents(module_name(current, root))):
            file = module_file(name, root)
            if file is not None and file not in seen:
                todo.append(file)
    return seen


def without_code(path: Path) -> bool:
    """A package __init__ with a docstring only."""
    body = _tree(path).body
    return path.name == "__init__.py" and all(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body
    )


@cache
def data_files(package: Path) -> tuple[Path, ...]:
    """A package folder's files that are not Python (templates), its sub-packages' excepted."""
    found = []
    for path in sorted(package.rglob("*")):
        folders = path.relative_to(package).parts[:-1]
        nested = (package.joinpath(*folders[: i + 1]) / "__init__.py" for i in range(len(folders)))
        if path.is_file() and path.suffix not in (".py", ".pyc") and not any(f.is_file() for f in nested):
            found.append(path)
    return tuple(found)


def stage_files(stage_module: Path, root: Path = ROOT) -> list[str]:
    """The files (relative to ``root``) that decide a stage module's outputs: its import closure and the
    data files of the packages it runs, less ``NOT_OUTPUT_DECIDING`` and code-less __init__ files."""
    leaves = frozenset(root / f for f in NOT_FOLLOWED)
    modules = closure(stage_module, leaves, root)
    files = {f for f in modules if not without_code(f)}
    files |= {d for f in modules if f.name == "__init__.py" for d in data_files(f.parent)}
    return sorted(rel for f in files if (rel := f.relative_to(root).as_posix()) not in NOT_OUTPUT_DECIDING)


def digest_text(found: dict) -> str:
    """The text of ``data/code/<module>.json``: a ``digest`` as sorted JSON, one line per file, so that its
    bytes change only when a file of the closure does (dvc.lock records their md5)."""
    return json.dumps(found, indent=1, sort_keys=True) + "\n"


def digest(stage_module: Path, root: Path = ROOT) -> dict:
    """``{"module": ..., "files": {path: sha256}}``: what ``data/code/<module>.json`` holds."""
    files = {
        rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in stage_files(stage_module, root)
    }
    return {"module": module_name(stage_module, root), "files": files}
