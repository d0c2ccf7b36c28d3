"""The real-graph bench on a two-record fixture with hand-computed figures: the calibration's methods and
scores per part, beside the bench's naive baseline."""

from __future__ import annotations

import json

import pytest

from bench import real_graphs as rg
from factory.params.config import Params


def _record(qid, question, answers, passages, triplets, supporting):
    return {
        "question_id": qid,
        "dataset": "musique",
        "question": question,
        "answers": answers,
        "passages": [
            {"passage_index": i, "title": title, "text": text, "is_supporting": i in supporting}
            for i, (title, text) in enumerate(passages)
        ],
        "supporting_passage_indices": supporting,
        "triplets": [
            {"triplet_id": f"t{n}", "subject": s, "relation": r, "object": o, "passage_index": p}
            for n, (s, r, o, p) in enumerate(triplets)
        ],
    }


# A: two shortest paths Film X -> Paris, one through a distractor passage (p2): predicted {p0, p1, p2},
# gold {p0, p1}. B: the answer 'Zed' is no node; passage p1 states it.
RECORDS = [
    _record(
        "q/a",
        "Where was the director of Film X born?",
        ["Paris"],
        [
            ("Film X", "Film X is directed by Jane Doe."),
            ("Jane Doe", "Jane Doe was born in Paris."),
            ("Cannes", "Film X premiered in Cannes, near Paris."),
        ],
        [
            ("Film X", "directed by", "Jane Doe", 0),
            ("Jane Doe", "born in", "Paris", 1),
            ("Film X", "premiered in", "Cannes", 2),
            ("Cannes", "is near", "Paris", 2),
        ],
        [0, 1],
    ),
    _record(
        "q/b",
        "Who founded the company that owns Beta Mall?",
        ["Zed"],
        [
            ("Beta Mall", "Beta Mall is owned by Beta Corp."),
            ("Beta Corp", "Beta Corp was founded by Zed in 1990."),
        ],
        [("Beta Mall", "owned by", "Beta Corp", 0), ("Beta Corp", "founded in", "1990", 1)],
        [0, 1],
    ),
]


def test_naive_and_factory_on_the_fixture():
    from factory.calibration.graphs import to_trajectory

    assert rg.naive_kept(to_trajectory(RECORDS[0])) == {"q/a#t0", "q/a#t1", "q/a#t2", "q/a#t3"}
    assert rg.naive_kept(to_trajectory(RECORDS[1])) == set()
    f = rg.figures(RECORDS, Params())
    naive, factory = f["naive"], f["factory"]
    # A: predicted {p0, p1, p2} of gold {p0, p1}; B: nothing
    assert (naive["coverage"], naive["precision"], naive["recall"]) == (0.5, pytest.approx(2 / 3), 0.5)
    assert naive["f1"] == pytest.approx(4 / 7)  # 2 * (2/3) * (1/2) / (2/3 + 1/2)
    # B: Beta Mall -> Beta Corp (p0) -> the answer through p1's triplet: predicted {p0, p1}
    assert factory["coverage"] == 1.0
    assert factory["precision"] == pytest.approx((2 / 3 + 1) / 2)
    assert factory["recall"] == pytest.approx(1.0)
    assert factory["f1"] == pytest.approx(2 * (5 / 6) / (5 / 6 + 1))
    off = Params().model_copy(deep=True)
    off.backtrace.answer_passage = False
    without = rg.figures(RECORDS, off)["factory"]
    assert {k: without[k] for k in ("coverage", "precision", "recall")} == {
        k: naive[k] for k in ("coverage", "precision", "recall")
    }


def test_authors_rule_on_the_fixture():
    # A: raw names; Film X is in the question, Paris is the answer: both paths, as the naive method.
    # B: the answer names no node, and the rule has no answer-passage step: nothing
    f = rg.figures(RECORDS, Params())
    assert {k: f["authors_rule"][k] for k in ("coverage", "precision", "recall", "f1")} == {
        k: f["naive"][k] for k in ("coverage", "precision", "recall", "f1")
    }


def test_the_held_back_part_is_a_fixed_hash_of_the_question_id():
    assert [rg.part_of(q) for q in ("q/a", "q/b", "q/c", "q/d")] == [
        "development",
        "development",
        "held_back",
        "development",
    ]


def test_main_prints_the_methods_side_by_side_per_part_and_writes_json(tmp_path, capsys):
    held = dict(RECORDS[1], question_id="q/c")  # B's graph under a held-back id
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(dict(r, dataset="musique")) + "\n" for r in [*RECORDS, held]))
    out = tmp_path / "figures.json"
    assert rg.main(["--data", str(data), "--json", str(out), "--ablate"]) == 0
    text = capsys.readouterr().out
    assert "naive (exact + shortest paths)" in text and "factory (S_q)" in text
    assert "without answer passage" in text
    assert "authors' rule (KnowTrace)" in text and "musique / development:" in text
    assert "musique / held_back:" in text
    figures = json.loads(out.read_text())
    assert figures["factory"]["coverage"] == 1.0 and figures["naive"]["coverage"] == pytest.approx(1 / 3)
    parts = figures["parts"]
    assert parts["factory"]["musique"]["development"]["n"] == 2
    assert parts["factory"]["musique"]["held_back"]["n"] == 1
    assert parts["authors_rule"]["musique"]["development"]["coverage"] == 0.5
    assert parts["authors_rule"]["musique"]["held_back"]["coverage"] == 0.0
    assert parts["factory"]["musique"]["held_back"]["coverage"] == 1.0
    assert figures["ablation"]["answer passage"]["coverage"] == pytest.approx(1 / 3)


def test_grounding_attributes_each_extracted_triplet_to_its_passage():
    g = rg.grounding_attribution(RECORDS, 0.5)
    assert g["all"]["triplets"] == 6 and g["all"]["own_passage"] == 1.0 and g["all"]["ungrounded"] == 0.0
    assert g["all"]["gold_triplets"] == 4 and g["all"]["gold_own_passage"] == 1.0
    # a triplet whose object its passage never states is ungrounded, not attributed elsewhere
    bad = dict(RECORDS[1], triplets=[dict(RECORDS[1]["triplets"][1], object="2024")])
    assert rg.grounding_attribution([bad], 0.5)["all"]["ungrounded"] == 1.0
