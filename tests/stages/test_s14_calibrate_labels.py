"""Stage calibrate-labels: metrics/calibration.json and the per-question rows from the graph files; an
empty result, said in a sentence, without them; the relevance report's first section from it."""

from __future__ import annotations

import json
import logging

from factory.calibration.report import render_calibration
from factory.cli import main
from factory.utils import paths
from factory.utils.io import read_json, read_jsonl
from tests.calibration.graphs import SHARED, film_record, write_jsonl


def test_the_stage_scores_every_file_and_the_report_opens_with_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    toy = write_jsonl(tmp_path / "toy.jsonl", [film_record("toy/1"), film_record("toy/2")])
    assert main(["calibrate-labels", "--set", f"calibration.graphs=[{SHARED}, {toy}]"]) == 0
    result = read_json(paths.CALIBRATION)
    assert result["status"] == "ok" and result["records"] == 42
    for group in ("all", "musique", "toy"):
        for method in ("backtrace", "authors_rule", "answer_entity", "random", "unfiltered"):
            assert {"precision", "recall", "f1", "coverage", "n"} <= set(result[group][method])
    assert result["musique"]["backtrace"]["n"] == 40 and result["toy"]["backtrace"]["n"] == 2
    rows = list(read_jsonl(paths.CALIBRATION_QUESTIONS))
    assert [r["question_id"] for r in rows][-2:] == ["toy/1", "toy/2"] and len(rows) == 42
    section = render_calibration(result)
    assert section.startswith("## The labeller on real LLM noise\n\n- all (42 questions): S_q's paragraph F1")
    assert "| S_q (undirected_shortest) | " in section and "### toy (2 questions)" in section
    assert "| KnowTrace authors' rule | " in section


def test_without_the_files_it_writes_an_empty_result_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert main(["calibrate-labels", "--set", "calibration.graphs=[nowhere/graphs.jsonl]"]) == 0
    result = json.loads(paths.CALIBRATION.read_text())
    assert result["status"] == "no_graphs" and result["missing"] == ["nowhere/graphs.jsonl"]
    assert paths.CALIBRATION_QUESTIONS.read_text() == ""
    said = [r.getMessage() for r in caplog.records if "no calibration graph was found" in r.getMessage()]
    assert said == [
        "calibrate-labels: no calibration graph was found (nowhere/graphs.jsonl), so the labeller is not "
        "calibrated on real graphs in this run; an empty result is written."
    ]
    assert "No calibration graph was found (nowhere/graphs.jsonl)" in render_calibration(result)
    assert "calibrate-labels has not run" in render_calibration(None)
