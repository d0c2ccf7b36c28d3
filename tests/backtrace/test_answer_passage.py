"""The answer's passage as a target when the answer names no node of G."""

from __future__ import annotations

from factory.backtrace.answer_passage import answer_node, answer_passage_edges
from factory.backtrace.graph import build_graph
from factory.backtrace.labels import backtrace
from factory.params.label_sections import BacktraceParams

QUESTION = "What is the population of the state where Dodge City Regional Airport is located?"


def trajectory():
    rows = [
        ("Dodge City Regional Airport", "located in", "Ford County, Kansas", "p0"),
        ("Kansas", "has capital", "Topeka", "p1"),
        ("Kansas", "has largest city", "Wichita", "p1"),
        ("Kansas", "has largest metro", "Greater Kansas City Area", "p1"),
        ("Wichita", "has", "museums", "p2"),
    ]
    triplets = [
        {
            "triplet_id": f"x{n}",
            "step_index": 0,
            "pair_id": None,
            "subject": s,
            "relation": r,
            "object": o,
            "source_pid": pid,
        }
        for n, (s, r, o, pid) in enumerate(rows)
    ]
    return {
        "trajectory_id": "t",
        "question": QUESTION,
        "answers": ["2,913,123"],
        "answer": "2,913,123",
        "final_thought": "",
        "correct": True,
        "steps": [{"index": 0, "kind": "complete", "output": "", "pairs": [], "triplet_ids": []}],
        "triplets": triplets,
    }


PASSAGES = {
    "p0": ["Dodge City Regional Airport is in Ford County, Kansas."],
    "p1": ["Kansas is a U.S. state.", "Its capital is Topeka.", "Population Total 2,913,123 (2017 est.)"],
    "p2": ["Wichita has museums."],
}


def test_without_passages_an_answer_that_names_no_node_has_no_path():
    row = backtrace(trajectory(), BacktraceParams(target_mode="gold_answer"))
    assert row["target_entities"] == [] and not row["path_found"]


def test_the_passage_stating_the_answer_is_the_target():
    row = backtrace(trajectory(), BacktraceParams(target_mode="gold_answer"), passages=PASSAGES)
    assert row["target_entities"] == [answer_node("p1")]
    # airport -> 'ford county kansas' ~ 'kansas' (containment link) -> answer through Kansas's triplets
    assert row["kept_triplet_ids"] == ["x0", "x1", "x2", "x3"]
    for mode in ("directed_reach", "undirected_simple"):
        assert backtrace(
            trajectory(), BacktraceParams(mode=mode, target_mode="gold_answer"), passages=PASSAGES
        )["kept_triplet_ids"] == [
            "x0",
            "x1",
            "x2",
            "x3",
        ]
    # the predicted answer in the answer modes too
    assert backtrace(trajectory(), BacktraceParams(target_mode="answer_only"), passages=PASSAGES)[
        "path_found"
    ]


def test_anchors_are_the_nodes_the_answer_sentence_names():
    traj = trajectory()
    g = build_graph(traj["triplets"])
    source = {t["triplet_id"]: t["source_pid"] for t in traj["triplets"]}
    passages = {**PASSAGES, "p1": ["Topeka is the capital; population 2,913,123."]}
    edges = answer_passage_edges(["2,913,123"], g, source, passages)
    assert edges == [("x1", "topeka", answer_node("p1"))]  # only 'topeka' is named where the answer is
    # no sentence names a node of the passage: every node of its triplets is an anchor
    edges = answer_passage_edges(["2,913,123"], g, source, PASSAGES)
    assert {n for _, n, _ in edges} == {"kansas", "topeka", "wichita", "greater kansas city area"}


def test_yes_no_and_answers_that_are_nodes_never_use_a_passage():
    traj = trajectory()
    g = build_graph(traj["triplets"])
    source = {t["triplet_id"]: t["source_pid"] for t in traj["triplets"]}
    assert answer_passage_edges(["yes"], g, source, {"p1": ["yes, it is."]}) == []
    traj["answers"] = ["Wichita"]
    row = backtrace(traj, BacktraceParams(target_mode="gold_answer"), passages=PASSAGES)
    assert row["target_entities"] == ["wichita"] and row["kept_triplet_ids"] == ["x0", "x2"]
    assert answer_passage_edges(["1,000,000"], g, source, PASSAGES) == []  # stated nowhere
