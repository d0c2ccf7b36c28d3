"""The supporting subgraph S_q of every mode against a networkx brute force."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from factory.backtrace.graph import build_graph, supporting_subgraph
from factory.backtrace.nodes import node_key
from factory.params.label_sections import BacktraceParams
from factory.params.vocab import BACKTRACE_MODES


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
        g = build_graph(triplets, BacktraceParams(containment=False))
        assert supporting_subgraph(g, initial, targets, mode=mode) == _brute(
            triplets, initial, targets, mode
        ), (
            triplets,
            initial,
            targets,
        )


def _triplets(*rows):
    return [
        {"triplet_id": f"x{n}", "step_index": 1, "pair_id": "p", "subject": s, "relation": r, "object": o}
        for n, (s, r, o) in enumerate(rows)
    ]


def test_containment_links_join_names_that_stay_apart_and_are_never_labelled():
    # 'cincinnati' is inside two names (ambiguous: no merge), yet each of them mentions it
    triplets = _triplets(
        ("Southwest Ohio including Cincinnati", "area code", "513"),
        ("937", "region", "areas north of Cincinnati"),
        ("Hamilton County", "contains", "Cincinnati"),
    )
    g = build_graph(triplets)
    assert g.linker.node_of["cincinnati"] == "cincinnati"  # not merged
    assert g.links == [
        ("areas north of cincinnati", "cincinnati"),
        ("cincinnati", "southwest ohio including cincinnati"),
    ]
    for mode in BACKTRACE_MODES:
        kept = supporting_subgraph(g, ["hamilton county"], ["513"], mode=mode)
        assert kept == {"x0", "x2"}, mode  # the path runs through a link; only triplets are kept
    assert build_graph(triplets, BacktraceParams(containment_links=False)).links == []
    assert build_graph(triplets, BacktraceParams(containment=False)).links == []  # no containment at all
    assert (
        supporting_subgraph(
            build_graph(triplets, BacktraceParams(containment_links=False)), ["hamilton county"], ["513"]
        )
        == set()
    )


def test_containment_links_skip_weak_names_and_hubs():
    triplets = _triplets(
        ("Event", "date", "March 8, 1975"),
        ("Other", "count", "8"),
        ("Film", "is", "film"),
        ("Red (film series)", "stars", "Bruce Willis"),
        *[(f"Place {c}", "in", f"County {c}, United States") for c in "XYZ"],
        ("United States", "capital", "Washington"),
    )
    g = build_graph(triplets, BacktraceParams(link_max_containers=2))
    linked = {n for pair in g.links for n in pair}
    assert "8" not in linked and "film" not in linked  # a number and a common word never link
    assert "united states" not in linked  # inside three names: a hub (cap 2)
    assert ("county x united states", "united states") in build_graph(triplets).links  # default cap 8


def test_title_case_names_of_common_words_link():
    triplets = _triplets(
        ("Knott", "is a mountain in", "English Lake District"), ("Lake District", "in", "Cumbria")
    )
    g = build_graph(triplets)
    assert ("english lake district", "lake district") in g.links  # 'lake' and 'district' are common words
    assert supporting_subgraph(g, ["knott"], ["cumbria"]) == {"x0", "x1"}
    lower = _triplets(
        ("Knott", "is a mountain in", "english lake district"), ("lake district", "in", "Cumbria")
    )
    assert build_graph(lower).links == []  # written in lower case: a common noun phrase


def _triplets(*rows):
    return [
        {"triplet_id": f"x{n}", "step_index": 1, "pair_id": "p", "subject": s, "relation": r, "object": o}
        for n, (s, r, o) in enumerate(rows)
    ]


@pytest.mark.parametrize("mode", BACKTRACE_MODES)
def test_names_differing_by_an_article_are_one_node_and_their_triplet_rides_with_it(mode):
    triplets = _triplets(
        ("The Jewel of the Nile", "characters search for", "Jewel of the Nile"),  # x0: one node, two names
        ("The Jewel of the Nile", "produced by", "Michael Douglas"),  # x1
        ("Michael Douglas", "stars in", "Last Vegas"),  # x2
        ("Paris", "twinned with", "Paris"),  # x3: the same name twice states nothing
        ("Jewel of the Nile", "genre", "comedy"),  # x4: off the path
    )
    g = build_graph(triplets)
    assert g.loops == {"jewel of nile": ["x0"]}
    assert supporting_subgraph(g, ["jewel of nile"], ["last vegas"], mode=mode) == {"x0", "x1", "x2"}
    # an initial entity that is itself the target: no path, but the triplet naming it twice is kept
    assert supporting_subgraph(g, ["jewel of nile"], ["jewel of nile"], mode=mode) == {"x0"}
    assert supporting_subgraph(g, ["paris"], ["paris"], mode=mode) == set()
    assert supporting_subgraph(g, ["michael douglas"], ["last vegas"], mode=mode) == {"x2"}  # not on the path


def test_nothing_merges_into_a_sentence_length_name():
    long = "Tysons Galleria is an upscale shopping mall in McLean Virginia owned by Brookfield Properties"
    triplets = _triplets(
        ("Tysons Galleria", "located in", "McLean"),
        ("Brookfield Properties", "describes", long),
        ("Tysons Galleria mall", "opened in", "1988"),
    )
    g = build_graph(triplets)
    # the six-word container at most: "tysons galleria" joins "tysons galleria mall", not the description
    assert g.linker.node_of["tysons galleria"] == "tysons galleria mall"
    assert g.linker.link("Tysons Galleria") == ["tysons galleria mall"]
    description = node_key(long)
    assert g.linker.node_of[description] == description  # the description is its own node
    # paths may still cross it through a containment link (never labelled)
    assert tuple(sorted(("tysons galleria mall", description))) in g.links
    alone = build_graph(_triplets(("Tysons Galleria", "in", "McLean"), ("Brookfield", "describes", long)))
    assert alone.linker.node_of["tysons galleria"] == "tysons galleria"  # without the mall: stays apart
    # a long name written as a title is a name: "We Talk About When We Talk About Love" joins it
    title = "What We Talk About When We Talk About Love"
    rows = _triplets(
        (title, "author", "Raymond Carver"),
        ("Raymond Carver", "wrote", "We Talk About When We Talk About Love"),
    )
    assert build_graph(rows).linker.node_of[node_key(title[5:])] == node_key(title)
    # without the bound, the name became the description (what the real graphs showed)
    rows = _triplets(("Tysons Galleria", "opened in", "1988"), ("Brookfield", "describes", long))
    assert (
        build_graph(rows, BacktraceParams(merge_max_words=20)).linker.node_of["tysons galleria"]
        == description
    )
