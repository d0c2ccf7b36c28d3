"""The first-party import graph of the project, read with ``ast`` (no module is imported): the reader of
``factory.utils.stage_code`` (the code each stage runs), here with bench/ counted as first party too."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from factory.utils import stage_code
from factory.utils.stage_code import ROOT, module_file, module_name, parents

FIRST_PARTY = (*stage_code.FIRST_PARTY, "bench")
imports_of = partial(stage_code.imports_of, root=ROOT, first_party=FIRST_PARTY)
closure = partial(stage_code.closure, root=ROOT, first_party=FIRST_PARTY)
__all__ = ["ROOT", "closure", "imports_of", "module_file", "module_name", "parents", "project_modules"]


def project_modules() -> list[Path]:
    return sorted(p for top in FIRST_PARTY for p in (ROOT / top).rglob("*.py"))
