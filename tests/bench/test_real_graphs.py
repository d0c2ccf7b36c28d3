"""The real-graph bench's scoring on a two-record fixture with hand-computed figures."""

from __future__ import annotations

import json

import pytest

from bench import real_graphs as rg
from factory.config import Params


def _record(qid, question, answers, passages, triplets, supporting):
    return {
        "question_id": qid,
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


def test_score_by_hand():
    a = ({"p0", "p1", "p2"}, {"p0", "p1"})
    b = (set(), {"p0", "p1"})
    s = rg.score([a, b])
    assert s["coverage"] == 0.5 and s["covered"] == 1
    assert s["precision"] == pytest.approx(2 / 3)  # over the covered question only
    assert s["recall"] == pytest.approx(0.5)  # (1 + 0) / 2: over all questions
    assert s["f1"] == pytest.approx(4 / 7)  # 2 * (2/3) * (1/2) / (2/3 + 1/2)
    assert rg.score([]) == {
        "questions": 0,
        "covered": 0,
        "coverage": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }


def test_naive_and_factory_on_the_fixture():
    naive, kept = rg.run_method(RECORDS, rg.naive_kept)
    assert kept[0] == {"q/a#t0", "q/a#t1", "q/a#t2", "q/a#t3"} and kept[1] == set()
    assert (naive["coverage"], naive["precision"], naive["recall"]) == (0.5, pytest.approx(2 / 3), 0.5)
    factory, kept = rg.run_method(RECORDS, rg.factory_method(Params()))
    # B: Beta Mall -> Beta Corp (p0) -> the answer through p1's triplet: predicted {p0, p1}
    assert kept[1] == {"q/b#t0", "q/b#t1"}
    assert factory["coverage"] == 1.0
    assert factory["precision"] == pytest.approx((2 / 3 + 1) / 2)
    assert factory["recall"] == pytest.approx(1.0)
    assert factory["f1"] == pytest.approx(2 * (5 / 6) / (5 / 6 + 1))
    off = Params().model_copy(deep=True)
    off.backtrace.answer_passage = False
    assert rg.run_method(RECORDS, rg.factory_method(off))[0] == naive


def test_authors_rule_on_the_fixture():
    # A: raw names; Film X is in the question, Paris is the answer: both paths, as the naive method.
    # B: the answer names no node, and the rule has no answer-passage step: nothing
    authors, kept = rg.run_method(RECORDS, rg.authors_kept)
    assert kept == [{"q/a#t0", "q/a#t1", "q/a#t2", "q/a#t3"}, set()]
    assert authors == rg.run_method(RECORDS, rg.naive_kept)[0]


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
    assert "naive (exact + shortest paths)" in text and "factory" in text and "without answer passage" in text
    assert "authors' rule (KnowTrace)" in text and "musique / development:" in text
    assert "musique / held_back:" in text
    figures = json.loads(out.read_text())
    assert figures["factory"]["coverage"] == 1.0 and figures["naive"]["coverage"] == pytest.approx(1 / 3)
    parts = figures["parts"]
    assert parts["factory"]["musique"]["development"]["questions"] == 2
    assert parts["factory"]["musique"]["held_back"]["questions"] == 1
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
