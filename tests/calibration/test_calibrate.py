"""The labeller on real graphs: what each method keeps, the question-level scores, the paired
differences and the verdict."""

from __future__ import annotations

import json

import numpy as np

from factory.calibration.calibrate import calibrate
from factory.calibration.graphs import Graphs, read_graph_files
from factory.calibration.scores import per_question, score_group
from factory.config import Params
from tests.calibration.graphs import SHARED, film_record

P = Params()


def test_each_method_keeps_what_its_rule_says_on_a_graph_with_known_answers():
    result, rows = calibrate(Graphs(records=[film_record()]), P.backtrace, P.relevance)
    row = rows[0]
    assert row["gold"] == ["toy/1#p0", "toy/1#p1"]
    predicted = row["predicted"]
    assert predicted["sq"] == ["toy/1#p0", "toy/1#p1"]  # Film X -> Jane Doe -> Paris
    assert predicted["keep_all"] == ["toy/1#p0", "toy/1#p1", "toy/1#p2"]
    assert predicted["answer_entity"] == ["toy/1#p1", "toy/1#p2"]  # the triplets naming Paris
    assert row["initial_entities"] == ["film x"] and row["target_entities"] == ["paris"]
    scores = result["toy"]
    assert [scores["sq"][k] for k in ("precision", "recall", "f1", "coverage")] == [1.0, 1.0, 1.0, 1.0]
    assert scores["keep_all"]["precision"] == 2 / 3 and scores["keep_all"]["recall"] == 1.0
    assert scores["answer_entity"]["precision"] == 0.5 and scores["answer_entity"]["recall"] == 0.5
    assert set(result) >= {"all", "toy", "differences", "verdicts", "methods", "params"}
    assert result["methods"][:1] == ["sq"] and "authors_rule" in result["methods"]


def test_precision_counts_covered_questions_recall_all_and_the_random_control_averages_its_seeds():
    gold = {"a", "b"}
    assert per_question([set()], gold)[0] == 0.0 and np.isnan(per_question([set()], gold)[1])
    assert per_question([{"a", "x"}, {"a", "b"}], gold) == (1.0, 0.75, 0.75)  # two seeds, averaged
    values = {
        "sq": np.array([[1.0, 1.0, 1.0], [0.0, np.nan, 0.0]]),  # one question found whole, one not covered
        "other": np.array([[1.0, 0.5, 0.5], [1.0, 0.5, 0.5]]),
    }
    scores, differences = score_group(values, "sq", samples=200, seed=1, group="g")
    assert [scores["sq"][k] for k in ("coverage", "precision", "recall")] == [0.5, 1.0, 0.5]
    assert abs(scores["sq"]["f1"] - 2 / 3) < 1e-12 and scores["sq"]["covered"] == 1 and scores["sq"]["n"] == 2
    assert abs(differences["other"]["f1"]["value"] - (2 / 3 - 0.5)) < 1e-12
    lo, hi = differences["other"]["f1"]["ci"]
    assert lo <= differences["other"]["f1"]["value"] <= hi
    again, _ = score_group(values, "sq", samples=200, seed=1, group="g")
    assert again == scores  # the same resamples: the same intervals


def test_on_the_shared_real_graphs_s_q_beats_the_authors_rule_and_the_result_is_reproducible():
    graphs = read_graph_files([SHARED])
    result, rows = calibrate(graphs, P.backtrace, P.relevance)
    sq, authors = result["all"]["sq"], result["all"]["authors_rule"]
    assert sq["n"] == authors["n"] == 40 and len(rows) == 40
    assert sq["f1"] > authors["f1"] and result["verdicts"]["all"]["beats_authors_rule"] is True
    line = result["verdicts"]["musique"]["line"]
    assert line.startswith("musique (40 questions): S_q's paragraph F1 ") and "beats it" in line
    assert result["all"]["keep_all"]["recall"] == 1.0
    assert result["all"]["random_matched"]["coverage"] == sq["coverage"]
    again, _ = calibrate(read_graph_files([SHARED]), P.backtrace, P.relevance)
    assert json.dumps(again, sort_keys=True) == json.dumps(result, sort_keys=True)


def test_no_graph_gives_a_valid_empty_result():
    result, rows = calibrate(Graphs(missing=["absent.jsonl"]), P.backtrace, P.relevance)
    assert rows == [] and result["status"] == "no_graphs" and result["missing"] == ["absent.jsonl"]
    assert result["all"]["sq"]["n"] == 0 and result["all"]["sq"]["f1"] is None
    assert result["verdicts"]["all"]["line"] == "all: no graph to calibrate on."
