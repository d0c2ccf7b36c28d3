"""The ``factory`` command's process settings: a stage runs with the GC collecting rarely, and an
in-process caller (a notebook, a test) gets its own thresholds back, also when the stage fails."""

from __future__ import annotations

import gc

import pytest

from factory import cli
from factory.utils.errors import FactoryError


@pytest.mark.parametrize("fails", [False, True])
def test_a_stage_runs_with_few_collections_and_the_thresholds_come_back(monkeypatch, tmp_path, fails):
    import factory.stages.s17_report as report

    seen = []

    def fake_run(params):
        seen.append(gc.get_threshold())
        if fails:
            raise FactoryError("the stage failed")
        return {}

    monkeypatch.setattr(report, "run", fake_run)
    before = gc.get_threshold()
    (tmp_path / "params.yaml").write_text("{}\n")
    code = cli.main(["report", "--params", str(tmp_path / "params.yaml")])
    assert seen == [cli.GC_THRESHOLDS]
    assert code == (cli.EXIT_FAILURE if fails else 0)
    assert gc.get_threshold() == before != cli.GC_THRESHOLDS
