"""Grounding of triplets against real retrieved passages."""

from __future__ import annotations

import pytest

from factory.agent.grounding import Grounding, best_sentence, ground_trajectory, ground_triplet
from factory.params.agent_sections import AgentParams
from factory.utils.errors import FactoryError
from factory.utils.text import content_tokens

# "... university where Sergei Aleksandrovich Tokarev was a professor founded?"
TOKAREV = "hotpotqa/5ae143ed55429920d5234360"
THRESHOLD = AgentParams().grounding_threshold


def _passage(question: dict, pid: str) -> dict:
    return next(p for p in question["passages"] if p["pid"] == pid)


def test_gold_sentences_ground_to_their_passage_and_sentence(questions_by_id):
    q = questions_by_id[TOKAREV]
    by_title = {s["title"]: s for s in q["supporting"]}
    msu = by_title["Moscow State University"]
    g = ground_triplet("Moscow State University", "founded on", "January 25, 1755", q["passages"], THRESHOLD)
    assert g == Grounding(msu["pid"], msu["sent_idx"], 1.0)
    tok = by_title["Sergei Aleksandrovich Tokarev"]
    g = ground_triplet(
        "Sergei Aleksandrovich Tokarev", "professor at", "Moscow State University", q["passages"], THRESHOLD
    )
    assert (g.pid, g.sentence) == (tok["pid"], tok["sent_idx"])


def test_made_up_triplets_are_ungrounded(questions_by_id):
    pool = questions_by_id[TOKAREV]["passages"]
    assert ground_triplet("Barack Obama", "born in", "Hawaii", pool, THRESHOLD).pid is None
    # the subject is in the passages but the object is invented: still ungrounded
    half = ground_triplet("Moscow State University", "founded on", "March 3, 1901 in Kyoto", pool, THRESHOLD)
    assert half.pid is None and half.sentence is None and half.score < 0.5
    # a side with no content token can never be found
    assert ground_triplet("Moscow State University", "is", "the", pool, THRESHOLD).pid is None
    assert ground_triplet("Moscow State University", "founded", "1755", [], THRESHOLD).pid is None


def test_threshold_is_applied(questions_by_id):
    pool = questions_by_id[TOKAREV]["passages"]
    # 1 of 2 object tokens present (1755 yes, Kyoto no): score 0.5
    g = ground_triplet("Moscow State University", "founded", "1755 Kyoto", pool, threshold=0.5)
    assert g.pid is not None and g.score == pytest.approx(0.5)
    assert ground_triplet("Moscow State University", "founded", "1755 Kyoto", pool, threshold=0.6).pid is None


def test_ties_go_to_the_earlier_passage():
    a = {"pid": "a", "title": "Alpha", "sentences": ["Alpha is in Beta."]}
    b = {"pid": "b", "title": "Beta", "sentences": ["Alpha is in Beta.", "Beta is big."]}
    assert ground_triplet("Alpha", "located in", "Beta", [a, b], THRESHOLD).pid == "a"
    assert ground_triplet("Alpha", "located in", "Beta", [b, a], THRESHOLD).pid == "b"
    # sentence: best object share, then subject share, then earliest
    assert best_sentence("Beta", "big", b) == 1
    assert best_sentence("Alpha", "Beta", b) == 0


def test_subject_matched_by_title_only():
    p = {
        "pid": "p",
        "title": "Scott Derrickson",
        "sentences": ["He is an American director.", "He was born in Denver."],
    }
    g = ground_triplet("Scott Derrickson", "born in", "Denver", [p], THRESHOLD)
    assert (g.pid, g.sentence, g.score) == ("p", 1, 1.0)


def test_subject_and_object_must_be_named_in_one_sentence_not_scattered_over_the_passage():
    p = {
        "pid": "p",
        "title": "Alpha Beta",
        "sentences": ["Gamma lived in Delta.", "Epsilon was a painter.", "Zeta moved to Omega."],
    }
    # every token of both sides is in the passage (passage-wide overlap 1.0), but no sentence names
    # more than a third of the object
    scattered = ground_triplet("Gamma", "is", "Delta Epsilon Omega", [p], THRESHOLD)
    assert scattered.pid is None and scattered.score == pytest.approx(1 / 3)
    g = ground_triplet("Gamma", "lived in", "Delta", [p], THRESHOLD)
    assert (g.pid, g.sentence, g.score) == ("p", 0, 1.0)
    # a name's tokens must occur together: "Gamma ... Omega" are 8 tokens apart in one long sentence
    long = {"pid": "l", "title": "T", "sentences": ["Gamma one two three four five six seven Omega."]}
    # only one of them at a time
    assert ground_triplet("T", "is", "Gamma Omega", [long], THRESHOLD).score == 0.5
    near = {"pid": "n", "title": "T", "sentences": ["Gamma one two Omega."]}
    assert ground_triplet("T", "is", "Gamma Omega", [near], THRESHOLD).score == 1.0  # within NAME_SLACK


def test_the_subject_may_be_named_earlier_and_the_object_in_the_title():
    p = {
        "pid": "p",
        "title": "Tucson, Arizona",
        "sentences": ["Jane Roe founded the Desert Museum.", "She was born in Phoenix."],
    }
    # named in sentence 0, "She" in sentence 1
    g = ground_triplet("Jane Roe", "born in", "Phoenix", [p], THRESHOLD)
    assert (g.pid, g.sentence) == ("p", 1)
    assert ground_triplet("Tucson", "located in", "Arizona", [p], THRESHOLD).pid == "p"  # the title states it
    # but the object must be in the stating sentence (or title), not only in an earlier one
    assert ground_triplet("Phoenix", "home of", "Desert Museum", [p], THRESHOLD).pid is None


@pytest.mark.parametrize("dataset", ["hotpotqa", "2wikimultihopqa"])
def test_gold_facts_ground_at_sentence_level_on_real_questions(ingested, dataset):
    """Triplets (title ; says ; words only the gold sentence has) ground to the gold passage and sentence."""
    total = hits = 0
    questions = [q for q in ingested.questions if q["dataset"] == dataset][:150]
    for q in questions:
        pool = {p["pid"]: p for p in q["passages"]}
        for s in q["supporting"]:
            p = pool[s["pid"]]
            others = set(content_tokens(p["title"]))
            for j, sent in enumerate(p["sentences"]):
                if j != s["sent_idx"]:
                    others |= set(content_tokens(sent))
            own = [
                t for t in dict.fromkeys(content_tokens(p["sentences"][s["sent_idx"]])) if t not in others
            ][-3:]
            if not own:
                continue
            g = ground_triplet(p["title"], "says", " ".join(own), q["passages"], THRESHOLD)
            total += 1
            hits += (g.pid, g.sentence) == (p["pid"], s["sent_idx"])
    assert total > 200
    assert hits / total >= 0.9


def test_musique_supporting_paragraph_grounds(ingested):
    q = next(q for q in ingested.questions if q["dataset"] == "musique")
    pool = {p["pid"]: p for p in q["passages"]}
    for s in q["supporting"]:
        p = pool[s["pid"]]
        words = content_tokens(p["sentences"][0])
        g = ground_triplet(p["title"], "mentions", " ".join(words[-4:]), q["passages"], THRESHOLD)
        assert g.pid == p["pid"]


def _trajectory(retrieved: list[str], triplets: list[tuple[str, str, str]]) -> dict:
    return {
        "trajectory_id": "t1",
        "steps": [
            {"index": 0, "kind": "explore", "retrieved": []},
            {"index": 1, "kind": "complete", "retrieved": retrieved},
        ],
        "triplets": [
            {
                "triplet_id": f"t1#t{i}",
                "step_index": 1,
                "pair_id": "t1#p0",
                "subject": s,
                "relation": r,
                "object": o,
                "source_pid": None,
                "source_sentence": None,
                "grounding_score": None,
            }
            for i, (s, r, o) in enumerate(triplets)
        ],
    }


def test_ground_trajectory_uses_each_steps_retrieved_passages(questions_by_id):
    q = questions_by_id[TOKAREV]
    by_pid = {p["pid"]: p for p in q["passages"]}
    msu = next(s for s in q["supporting"] if s["title"] == "Moscow State University")
    others = [pid for pid in by_pid if pid != msu["pid"]][:2]
    traj = _trajectory(
        others + [msu["pid"]],
        [("Moscow State University", "founded", "1755"), ("Barack Obama", "born in", "Hawaii")],
    )
    out = ground_trajectory(traj, by_pid, 0.5)
    assert traj["triplets"][0]["source_pid"] is None  # input untouched
    t0, t1 = out["triplets"]
    assert (t0["source_pid"], t0["source_sentence"], t0["grounding_score"]) == (
        msu["pid"],
        msu["sent_idx"],
        1.0,
    )
    assert t1["source_pid"] is None and t1["source_sentence"] is None
    # the same triplet is ungrounded when its step did not retrieve the passage
    out = ground_trajectory(
        _trajectory(others, [("Moscow State University", "founded", "1755")]), by_pid, 0.5
    )
    assert out["triplets"][0]["source_pid"] is None


def test_ground_trajectory_names_missing_passages():
    traj = _trajectory(["nowhere:1"], [("A", "r", "B")])
    with pytest.raises(FactoryError, match="nowhere:1"):
        ground_trajectory(traj, {}, 0.5)
