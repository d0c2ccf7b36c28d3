"""The labeller on real graphs: what each method keeps, the question-level scores, the paired
differences and the verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factory.calibration.calibrate import calibrate
from factory.calibration.graphs import Graphs, read_graph_files
from factory.calibration.scores import per_question, score_group
from factory.params.config import Params
from factory.utils.errors import FactoryError
from tests.calibration.graphs import SHARED, film_record

P = Params()


def test_each_method_keeps_what_its_rule_says_on_a_graph_with_known_answers():
    result, rows = calibrate(Graphs(records=[film_record()]), P.backtrace, P.relevance)
    row = rows[0]
    assert row["gold"] == ["toy/1#p0", "toy/1#p1"]
    predicted = row["predicted"]
    assert predicted["backtrace"] == ["toy/1#p0", "toy/1#p1"]  # Film X -> Jane Doe -> Paris
    assert predicted["unfiltered"] == ["toy/1#p0", "toy/1#p1", "toy/1#p2"]
    assert predicted["answer_entity"] == ["toy/1#p1", "toy/1#p2"]  # the triplets naming Paris
    assert row["initial_entities"] == ["film x"] and row["target_entities"] == ["paris"]
    scores = result["toy"]
    assert [scores["backtrace"][k] for k in ("precision", "recall", "f1", "coverage")] == [1.0, 1.0, 1.0, 1.0]
    assert scores["unfiltered"]["precision"] == 2 / 3 and scores["unfiltered"]["recall"] == 1.0
    assert scores["answer_entity"]["precision"] == 0.5 and scores["answer_entity"]["recall"] == 0.5
    assert set(result) >= {"all", "toy", "differences", "verdicts", "methods", "params"}
    assert result["methods"][:1] == ["backtrace"] and "authors_rule" in result["methods"]


def test_precision_counts_covered_questions_recall_all_and_the_random_control_averages_its_seeds():
    gold = {"a", "b"}
    assert per_question([set()], gold)[0] == 0.0 and np.isnan(per_question([set()], gold)[1])
    assert per_question([{"a", "x"}, {"a", "b"}], gold) == (1.0, 0.75, 0.75)  # two seeds, averaged
    values = {
        "backtrace": np.array(
            [[1.0, 1.0, 1.0], [0.0, np.nan, 0.0]]
        ),  # one question found whole, one not covered
        "other": np.array([[1.0, 0.5, 0.5], [1.0, 0.5, 0.5]]),
    }
    scores, differences = score_group(values, "backtrace", samples=200, seed=1, group="g")
    assert [scores["backtrace"][k] for k in ("coverage", "precision", "recall")] == [0.5, 1.0, 0.5]
    assert (
        abs(scores["backtrace"]["f1"] - 2 / 3) < 1e-12
        and scores["backtrace"]["covered"] == 1
        and scores["backtrace"]["n"] == 2
    )
    assert abs(differences["other"]["f1"]["value"] - (2 / 3 - 0.5)) < 1e-12
    lo, hi = differences["other"]["f1"]["ci"]
    assert lo <= differences["other"]["f1"]["value"] <= hi
    again, _ = score_group(values, "backtrace", samples=200, seed=1, group="g")
    assert again == scores  # the same resamples: the same intervals


def test_on_the_shared_real_graphs_s_q_beats_the_authors_rule_and_the_result_is_reproducible():
    graphs = read_graph_files([SHARED])
    result, rows = calibrate(graphs, P.backtrace, P.relevance)
    sq, authors = result["all"]["backtrace"], result["all"]["authors_rule"]
    assert sq["n"] == authors["n"] == 40 and len(rows) == 40
    assert sq["f1"] > authors["f1"] and result["verdicts"]["all"]["beats_authors_rule"] is True
    line = result["verdicts"]["musique"]["line"]
    assert line.startswith("musique (40 questions): S_q's paragraph F1 ") and "beats it" in line
    assert result["all"]["unfiltered"]["recall"] == 1.0
    assert result["all"]["random"]["coverage"] == sq["coverage"]
    again, _ = calibrate(read_graph_files([SHARED]), P.backtrace, P.relevance)
    assert json.dumps(again, sort_keys=True) == json.dumps(result, sort_keys=True)


def test_no_graph_gives_a_valid_empty_result():
    result, rows = calibrate(Graphs(missing=["absent.jsonl"]), P.backtrace, P.relevance)
    assert rows == [] and result["status"] == "no_graphs" and result["missing"] == ["absent.jsonl"]
    assert result["all"]["backtrace"]["n"] == 0 and result["all"]["backtrace"]["f1"] is None
    assert result["verdicts"]["all"]["line"] == "all: no graph to calibrate on."


def test_a_one_record_file_of_either_shape_is_read_and_one_question_gives_no_verdict(tmp_path):
    record = film_record()
    jsonl, listed, lone = tmp_path / "one.jsonl", tmp_path / "one.json", tmp_path / "lone.json"
    jsonl.write_text(json.dumps(record) + "\n")  # was refused: "one JSON object ... not records"
    listed.write_text(json.dumps([record]))
    lone.write_text(json.dumps(record, indent=2))  # one record, pretty-printed over several lines
    for path in (jsonl, listed, lone):
        graphs = read_graph_files([path])
        assert [r["question_id"] for r in graphs.records] == [record["question_id"]] and not graphs.problems
    result, _ = calibrate(read_graph_files([listed]), P.backtrace, P.relevance)  # was "S_q beats it"
    verdict = result["verdicts"]["all"]
    assert verdict["beats_authors_rule"] is None and verdict["reaches_bar"] is None
    assert verdict["line"].startswith(
        "all (1 questions): cannot tell: a verdict needs at least 20 questions (calibration.min_questions)"
    )
    assert result["params"]["min_questions"] == 20
    enough = P.calibration.model_copy(update={"min_questions": 1})
    result, _ = calibrate(read_graph_files([listed]), P.backtrace, P.relevance, None, enough)
    assert "cannot tell" not in result["verdicts"]["all"]["line"]


def test_a_wrapped_graph_file_names_calibration_graphs(tmp_path):
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"data": [film_record()]}))
    with pytest.raises(FactoryError, match=r"the list under 'data'.*list that file under calibration.graphs"):
        read_graph_files([wrapped])
