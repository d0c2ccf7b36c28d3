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


@pytest.mark.parametrize("shown", ["--cost", "--explain"])
def test_params_writes_the_cost_or_the_table_to_output_as_it_prints_it(tmp_path, capsys, shown):
    argv = ["params", "--profile", "full", shown]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert cli.main([*argv, "--output", str(tmp_path / "out.txt")]) == 0
    out = capsys.readouterr()
    assert out.out == "" and f"wrote {tmp_path / 'out.txt'}" in out.err
    assert (tmp_path / "out.txt").read_text() == printed and printed.strip()
