"""The digest of the code a stage runs: what is in it, and that it changes exactly when that code does."""

from __future__ import annotations

import json
from pathlib import Path

from factory.utils.stage_code import ROOT, digest, stage_files


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _project(root: Path) -> Path:
    return _tree(
        root,
        {
            "factory/__init__.py": '"""The package."""\n',
            "factory/stages/__init__.py": '"""Stages."""\n',
            "factory/stages/s01_a.py": "from factory.report.render import render\n",
            # a lazy import runs with its function: it counts
            "factory/stages/s02_b.py": "def run():\n    from factory.stats import mean\n",
            "factory/report/__init__.py": "TEMPLATES = 'templates'\n",
            "factory/report/render.py": "def render(): ...\n",
            "factory/report/templates/page.md.j2": "{{ x }}\n",
            "factory/report/deep/__init__.py": '"""A sub-package: its files are its own."""\n',
            "factory/report/deep/other.txt": "not run by s01_a\n",
            "factory/stats.py": "def mean(): ...\n",
        },
    )


def test_a_stage_runs_its_imports_their_packages_and_their_templates(tmp_path):
    root = _project(tmp_path)
    assert stage_files(root / "factory/stages/s01_a.py", root) == [
        "factory/report/__init__.py",
        "factory/report/render.py",
        "factory/report/templates/page.md.j2",
        "factory/stages/s01_a.py",
    ]  # docstring-only __init__ files decide nothing; a sub-package's files are not the package's
    lazy = stage_files(root / "factory/stages/s02_b.py", root)
    assert lazy == ["factory/stages/s02_b.py", "factory/stats.py"]


def test_the_digest_changes_with_the_code_the_stage_runs_and_nothing_else(tmp_path):
    root = _project(tmp_path)
    a, b = root / "factory/stages/s01_a.py", root / "factory/stages/s02_b.py"
    before = {s: json.dumps(digest(s, root)) for s in (a, b)}
    (root / "factory/report/templates/page.md.j2").write_text("{{ y }}\n")
    (root / "factory/report/deep/other.txt").write_text("edited\n")
    after = {s: json.dumps(digest(s, root)) for s in (a, b)}
    assert after[a] != before[a] and after[b] == before[b]


def test_what_decides_no_output_is_left_out_of_a_real_stage():
    files = stage_files(ROOT / "factory/stages/s05_trajectories.py")
    assert "factory/stages/s05_trajectories.py" in files and "factory/agent/loop.py" in files
    assert "factory/llm/local.py" in files  # the local backend, imported where the params choose it
    assert "factory/utils/progress.py" not in files and "factory/execution/engine.py" not in files
