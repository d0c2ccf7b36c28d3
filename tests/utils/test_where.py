"""The end of `make demo` lists where the run's results are and says which the run did not produce."""

from __future__ import annotations

import os
import subprocess
import sys

from factory.utils import where
from tests.imports import ROOT
from tests.test_dvc_yaml import DVC


def _lines(out: str) -> dict[str, str]:
    """Each listed result's line, by its path."""
    assert "TraceFactory run finished. Results:" in out
    return {path: line for line in out.splitlines() for _, path in where.ITEMS if path in line.split()}


def test_a_finished_run_lists_each_result_by_its_path(tmp_path):
    for _, path in where.ITEMS:
        target = tmp_path / path
        if target.suffix:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")
        else:
            target.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(  # as the Makefile runs it
        [sys.executable, "-m", "factory.utils.where"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    lines = _lines(run.stdout)
    assert run.returncode == 0 and len(lines) == len(where.ITEMS)
    assert not [line for line in lines.values() if "not produced" in line]
    assert lines["reports/bootstrap.md"].split() == ["bootstrap", "report", "reports/bootstrap.md"]


def test_what_the_run_did_not_produce_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "bootstrap.md").write_text("# report")
    (tmp_path / "data" / "published").mkdir(parents=True)
    where.main()
    missing = {
        path for path, line in _lines(capsys.readouterr().out).items() if line.endswith("(not produced)")
    }
    assert missing == {path for _, path in where.ITEMS} - {"reports/bootstrap.md", "data/published"}


def test_every_listed_result_is_an_output_of_the_pipeline():
    outs = [
        out if isinstance(out, str) else next(iter(out))
        for stage in DVC.values()
        for kind in ("outs", "metrics", "plots")
        for out in stage.get("do", stage).get(kind, [])
    ]
    for _, path in where.ITEMS:
        assert any(out == path or out.startswith(f"{path}/") for out in outs), f"no stage writes {path}"
