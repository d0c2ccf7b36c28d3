"""The supporting subgraph S_q of every mode against a networkx brute force."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from factory.backtrace import (
    build_graph,
    supporting_subgraph,
)
from factory.config import BACKTRACE_MODES


def _random_case(rng: random.Random):
    names = [f"Node {c}" for c in "12345678"]
    triplets = []
    for n in range(rng.randint(3, 14)):
        s, o = rng.sample(names, 2) if rng.random() > 0.1 else (rng.choice(names),) * 2
        triplets.append(
            {
                "triplet_id": f"x{n}",
                "step_index": 1,
                "pair_id": "p",
                "subject": s,
                "relation": rng.choice(["r", "q"]),
                "object": o,
            }
        )
    initial = sorted({n.lower() for n in rng.sample(names, rng.randint(1, 2))})
    targets = sorted({n.lower() for n in rng.sample(names, rng.randint(1, 3))})
    return triplets, initial, targets


def _brute(triplets, initial, targets, mode, cutoff=4):
    edges = [
        (x["triplet_id"], x["subject"].lower(), x["object"].lower())
        for x in triplets
        if x["subject"] != x["object"]
    ]
    keep = set()
    if mode == "directed_reach":
        d = nx.DiGraph([(s, o) for _, s, o in edges])
        d.add_nodes_from(initial + targets)
        from_i = set(initial).union(*(nx.descendants(d, i) for i in initial))
        to_t = set(targets).union(*(nx.ancestors(d, x) for x in targets))
        return {tid for tid, s, o in edges if s in from_i and o in to_t}
    g = nx.Graph([(s, o) for _, s, o in edges])
    for i, x in itertools.product(initial, targets):
        if i == x or i not in g or x not in g or not nx.has_path(g, i, x):
            continue
        paths = (
            nx.all_shortest_paths(g, i, x)
            if mode == "undirected_shortest"
            else nx.all_simple_paths(g, i, x, cutoff=cutoff)
        )
        for path in paths:
            for a, b in itertools.pairwise(path):
                keep |= {tid for tid, s, o in edges if {s, o} == {a, b}}
    return keep


@pytest.mark.parametrize("mode", BACKTRACE_MODES)
def test_modes_match_networkx_brute_force_on_random_multigraphs(mode):
    rng = random.Random(7)
    for _ in range(150):
        triplets, initial, targets = _random_case(rng)
        g = build_graph(triplets, containment=False)
        assert supporting_subgraph(g, initial, targets, mode) == _brute(triplets, initial, targets, mode), (
            triplets,
            initial,
            targets,
        )
