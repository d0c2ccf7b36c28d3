"""The KnowTrace authors' rule (a control): first lines, raw names, substring entities, reverse edges."""

from __future__ import annotations

import itertools
import random

import networkx as nx

from factory.backtrace.authors_rule import authors_rule, completion_triplets, lookup_text
from tests.backtrace.cases import make, t


def rule(traj, **kw):
    return authors_rule(traj, **kw)


def test_reads_only_the_first_triplet_of_each_completion(cycle):
    # completions: [director Jane Doe, genre Drama, shot in Paris] and [born in Paris, capital of France]
    assert [x["triplet_id"] for x in completion_triplets(cycle)] == t(0, 3)
    out = rule(cycle)
    assert out["initial_entities"] == ["Film X"]  # "Film X director" is the lookup text
    assert out["target_entities"] == ["Film X", "Jane Doe", "Paris"]  # named in the thought + answer
    # Film X - Jane Doe - Paris through the two first lines only
    assert out["kept_triplet_ids"] == set(t(0, 3))
    # with every line: Film X -shot in-> Paris is the shorter path to Paris
    assert rule(cycle, first_line_only=False)["kept_triplet_ids"] == set(t(0, 2))


def test_raw_names_are_nodes_as_written():
    # an article or a letter case makes another node for the authors' rule (no normalisation, no linking)
    traj = make(
        "Who directed The Jewel of the Nile?",
        [
            [
                (
                    "The Jewel of the Nile",
                    "director",
                    [("The Jewel of the Nile", "directed by", "Lewis Teague")],
                )
            ],
            [("Lewis Teague", "films", [("lewis teague", "directed", "Jewel of the Nile")])],
        ],
        "Lewis Teague directed it.",
        "Lewis Teague",
    )
    out = rule(traj)
    assert out["initial_entities"] == [
        "Jewel of the Nile",
        "The Jewel of the Nile",
    ]  # substrings of the lookup
    assert "lewis teague" not in out["target_entities"] and "Lewis Teague" in out["target_entities"]
    assert out["kept_triplet_ids"] == set(t(0))


def test_targets_consume_their_match_and_include_names_containing_the_answer():
    traj = make(
        "Where is Beta Mall?",
        [
            [("Beta Mall", "location", [("Beta Mall", "in", "New York City"), ("Beta Mall", "x", "y")])],
            [("York", "county", [("York", "county", "Yorkshire")])],
            [("Beta Mall", "area", [("Beta Mall", "located in", "Greater New York City area")])],
        ],
        "It is in New York City.",
        "New York City",
    )
    out = rule(traj)
    # "New York City" consumes its spans, so "York" is not found; the wider area contains the answer
    assert out["target_entities"] == ["Greater New York City area", "New York City"]
    assert out["kept_triplet_ids"] == set(t(0, 3))  # the second line (Beta Mall ; x ; y) is no edge


def test_a_reverse_edge_only_where_no_forward_edge_joins_the_two_nodes():
    traj = make(
        "Who founded the owner of Alpha?",
        [
            [("Alpha", "owner", [("Alpha", "owned by", "Beta")])],
            [("Beta", "founder", [("Zed", "founded", "Beta")])],
            [("Beta", "parent", [("Beta", "subsidiary of", "Zed")])],
            [("Beta", "rival", [("Zed", "rival of", "Beta")])],
        ],
        "Zed.",
        "Zed",
    )
    out = rule(traj)
    assert out["initial_entities"] == ["Alpha"]
    # walked Alpha -> Beta -> Zed: Beta -> Zed is written once forward, so the reverse ones are left out
    assert out["kept_triplet_ids"] == set(t(0, 2))
    without_forward = make(
        "Who founded the owner of Alpha?",
        [
            [("Alpha", "owner", [("Alpha", "owned by", "Beta")])],
            [("Beta", "founder", [("Zed", "founded", "Beta")])],
        ],
        "Zed.",
        "Zed",
    )
    assert rule(without_forward)["kept_triplet_ids"] == set(t(0, 1))


def test_without_pairs_the_question_is_the_lookup_text():
    traj = {
        "trajectory_id": "g",
        "question": "Who owns Beta Mall?",
        "answer": "Zed",
        "final_thought": "",
        "steps": [{"index": 0, "kind": "complete", "pairs": []}],
        "triplets": [
            {
                "triplet_id": "a",
                "step_index": 0,
                "subject": "Beta Mall",
                "relation": "owned by",
                "object": "Zed",
            }
        ],
    }
    assert lookup_text(traj) == "Who owns Beta Mall?"
    assert rule(traj, first_line_only=False)["kept_triplet_ids"] == {"a"}


def _enumerated(edges, initial, targets):
    """Reference: networkx's all_shortest_paths, forward triplets per step, else reverse ones."""
    g = nx.Graph()
    forward = {}
    for tid, s, o in edges:
        forward.setdefault((s, o), []).append(tid)
        if s != o:
            g.add_edge(s, o)
    kept = set()
    for i, x in itertools.product(initial, targets):
        if i == x or i not in g or x not in g or not nx.has_path(g, i, x):
            continue
        for path in nx.all_shortest_paths(g, i, x):
            for a, b in itertools.pairwise(path):
                kept.update(forward.get((a, b)) or forward.get((b, a)) or ())
    return kept


def test_paths_match_an_enumeration_of_all_shortest_paths():
    rng = random.Random(7)
    for case in range(60):
        names = [f"N{k}" for k in range(rng.randint(3, 9))]
        edges = [(f"e{k}", rng.choice(names), rng.choice(names)) for k in range(rng.randint(2, 16))]
        traj = {
            "trajectory_id": f"r{case}",
            "question": "",
            "answer": "",
            "final_thought": " ".join(rng.sample(names, 2)),
            "steps": [
                {"index": 0, "kind": "explore", "pairs": [{"entity": rng.choice(names), "relation": "r"}]}
            ],
            "triplets": [
                {"triplet_id": tid, "step_index": n, "subject": s, "relation": "r", "object": o}
                for n, (tid, s, o) in enumerate(edges)
            ],
        }
        out = rule(traj)
        assert out["kept_triplet_ids"] == _enumerated(edges, out["initial_entities"], out["target_entities"])
