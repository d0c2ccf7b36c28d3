"""Knowledge backtracing labels on hand-built graphs with a known S_q for every mode and target mode."""

from __future__ import annotations

import copy

import pytest

from factory.agent.format import render_complete, render_explore
from factory.backtrace.checks import BadTrajectory
from factory.backtrace.graph import build_graph, is_admin_relation, link, supporting_subgraph
from factory.backtrace.labels import backtrace, backtrace_modes
from factory.backtrace.targets import initial_entities, target_entities
from factory.params.config import load_params
from factory.params.label_sections import BacktraceParams
from factory.params.vocab import BACKTRACE_MODES, TARGET_MODES
from factory.utils.errors import FactoryError
from schemas import LABELS, to_table
from tests.backtrace.cases import fake_embedder, kept, make, p, t, words

ALL_MODES = BacktraceParams(modes=list(BACKTRACE_MODES), target_modes=list(TARGET_MODES))

# ---------------------------------------------------------------------- modes


def test_each_mode_on_a_cycle(cycle):
    r = backtrace(cycle)
    assert r["initial_entities"] == ["film x"] and r["target_entities"] == ["film x", "jane doe", "paris"]
    # shortest: film x-jane doe (1 hop) and film x-paris (1 hop, via 'shot in'); born-in is a detour
    assert r["kept_triplet_ids"] == t(0, 2)
    # directed: born in (jane doe reachable, paris a target) is kept too; drama/france lead to no target
    assert kept(cycle, "directed_reach") == t(0, 2, 3)
    # simple paths up to 4 triplets: both routes around the cycle
    assert kept(cycle, "undirected_simple") == t(0, 2, 3)
    assert kept(cycle, "undirected_simple", simple_cutoff=1) == t(0, 2)
    assert kept(cycle, "undirected_simple", simple_cutoff=None) == t(0, 2, 3)


def test_step_labels_and_token_accounting(cycle):
    r = backtrace(cycle)
    steps = {s["index"]: s for s in cycle["steps"]}
    # 0 explore(p0) 1 complete(p0: t0 t1 t2) 2 explore(p1) 3 complete(p1: t3 t4) 4 sufficient explore
    assert r["kept_step_indices"] == [0, 1, 4] and r["kept_pair_ids"] == p(0)
    total = sum(words(s["output"]) for s in cycle["steps"])
    kept_render = render_complete([("Film X", "director", "Jane Doe"), ("Film X", "shot in", "Paris")])
    filtered = (
        words(steps[2]["output"]) + words(steps[3]["output"]) + words(steps[1]["output"]) - words(kept_render)
    )
    assert (r["total_tokens"], r["filtered_tokens"]) == (total, filtered)
    assert r["fa_ratio"] == pytest.approx(filtered / total) and 0 < r["fa_ratio"] < 1
    assert r["path_found"] and r["admin_dropped"] == 0 and r["tokenizer"] == "whitespace" and r["correct"]
    to_table([r], LABELS, "labels")  # the labels contract


def test_reversed_edges_break_only_the_directed_mode():
    traj = make(
        "Where was the director of Film X born?",
        [
            [("Film X", "director", [("Jane Doe", "directed", "Film X")])],
            [("Jane Doe", "birthplace", [("Jane Doe", "born in", "Paris")])],
        ],
        "Film X was directed by Jane Doe, who was born in Paris.",
        "Paris",
    )
    assert kept(traj) == t(0, 1) and kept(traj, "undirected_simple") == t(0, 1)
    r = backtrace(traj, BacktraceParams(mode="directed_reach"))
    assert r["kept_triplet_ids"] == [] and not r["path_found"]
    assert r["kept_step_indices"] == [4] and r["kept_pair_ids"] == []
    final_tokens = words(traj["steps"][4]["output"])
    assert r["total_tokens"] - r["filtered_tokens"] == final_tokens  # only the answer step survives


def test_duplicates_case_punctuation_and_containment_links():
    traj = make(
        "Where was the director of Film X born?",
        [
            [
                (
                    "Film X",
                    "director",
                    [("Film X", "director", "Jane Doe"), ("film x.", "Director", "JANE DOE")],
                )
            ],
            [("Jane Doe", "birthplace", [("Doe", "born in", "Paris")])],
        ],
        "Jane Doe was born in Paris.",
        "Paris",
    )
    # duplicate triplets are parallel edges: both kept; 'Doe' is linked into 'Jane Doe' by containment
    assert kept(traj) == t(0, 1, 2)
    assert kept(traj, "directed_reach") == t(0, 1, 2)
    assert kept(traj, containment=False) == t(
        0, 1
    )  # without containment 'doe' is another node: no path to Paris
    g = build_graph(traj["triplets"])
    assert sorted(g.nodes) == ["film x", "jane doe", "paris"] and link("Doe", g) == ["jane doe"]


def test_admin_filter_drops_before_backtracing():
    traj = make(
        "Who directed Film X?",
        [
            [
                (
                    "Film X",
                    "director",
                    [
                        ("Film X", "director", "Jane Doe"),
                        ("Film X", "IMDb ID", "tt0123"),
                        ("Film X", "sourceURL", "example org"),
                    ],
                )
            ]
        ],
        "Film X (tt0123, example org) was directed by Jane Doe.",
        "Jane Doe",
    )
    r = backtrace(traj)
    assert r["admin_dropped"] == 2 and r["kept_triplet_ids"] == t(0)
    assert backtrace(traj, BacktraceParams(admin_relations=[]))["kept_triplet_ids"] == t(0, 1, 2)
    assert backtrace(traj, BacktraceParams(admin_relations=["id"]))["admin_dropped"] == 1
    for rel in ("imdb id", "source_url", "ISBN", "dataVersion", "metadata", "doi"):
        assert is_admin_relation(rel), rel
    for rel in ("identified by", "sourced from", "place of birth", "validity"):
        assert not is_admin_relation(rel), rel


def test_final_step_kind_and_explore_pairs_rerendered():
    traj = make(
        "Who directed Film X?",
        [
            [
                ("Film X", "director", [("Film X", "director", "Jane Doe")]),
                ("Film Y", "director", [("Film Y", "director", "Bob Roe")]),
            ]
        ],
        "Jane Doe directed Film X.",
        "Jane Doe",
        final_kind="final",
    )
    r = backtrace(traj)
    assert [s["kind"] for s in traj["steps"]] == ["explore", "complete", "complete", "final"]
    assert r["kept_step_indices"] == [0, 1, 3] and r["kept_pair_ids"] == p(0)
    explore = traj["steps"][0]
    rerendered = render_explore(explore["thought"], [("Film X", "director")])
    expected = words(traj["steps"][2]["output"]) + words(explore["output"]) - words(rerendered)
    assert r["filtered_tokens"] == expected


def test_labels_for_every_mode_and_target_mode_share_the_work(cycle):
    rows = backtrace_modes(cycle, ALL_MODES)
    assert [(r["mode"], r["target_mode"]) for r in rows] == [
        (m, tm) for tm in TARGET_MODES for m in BACKTRACE_MODES
    ]
    assert all(
        r == backtrace(cycle, BacktraceParams(mode=r["mode"], target_mode=r["target_mode"])) for r in rows
    )
    to_table(rows, LABELS, "labels")
    assert {r["total_tokens"] for r in rows} == {sum(words(s["output"]) for s in cycle["steps"])}


def test_tokenizers_are_recorded(cycle):
    class Chars:
        name = "chars"

        def count_tokens(self, text):
            return len(text)

    class HFLike:
        name_or_path = "models/base"

        def encode(self, text, add_special_tokens=False):
            assert add_special_tokens is False
            return text.split() + ["x"]

    r = backtrace(cycle, tokenizer=Chars())
    assert r["tokenizer"] == "chars" and r["total_tokens"] == sum(len(s["output"]) for s in cycle["steps"])
    h = backtrace(cycle, tokenizer=HFLike())
    assert h["tokenizer"] == "hf:models/base" and h["total_tokens"] == sum(
        words(s["output"]) + 1 for s in cycle["steps"]
    )
    with pytest.raises(FactoryError, match="count_tokens"):
        backtrace(cycle, tokenizer=object())


def test_pure_functions_compose(cycle):
    before = copy.deepcopy(cycle)
    g = build_graph(cycle["triplets"])
    initial = initial_entities(cycle, g, BacktraceParams())
    targets = target_entities(cycle, g, "answer_only", initial=initial)
    assert initial == ["film x"] and targets == ["paris"]
    assert supporting_subgraph(g, initial, targets) == set(t(2))
    assert supporting_subgraph(g, initial, targets, mode="directed_reach") == set(t(0, 2, 3))
    backtrace_modes(cycle, ALL_MODES)
    assert cycle == before  # pure: the record is not modified


# ---------------------------------------------------------------------- against networkx brute force


# ---------------------------------------------------------------------- bad input


def test_bad_records_name_the_trajectory_and_field(cycle):
    broken = {**cycle, "triplets": [dict(cycle["triplets"][0], subject=None)] + cycle["triplets"][1:]}
    with pytest.raises(BadTrajectory, match=r"'t1'.*triplets\[0\]\.subject"):
        backtrace(broken)
    dup = {**cycle, "triplets": cycle["triplets"] + [cycle["triplets"][0]]}
    with pytest.raises(BadTrajectory, match="duplicate id"):
        backtrace(dup)
    orphan = {**cycle, "triplets": [dict(cycle["triplets"][0], step_index=99)]}
    with pytest.raises(BadTrajectory, match=r"step_index.*99"):
        backtrace(orphan)
    with pytest.raises(BadTrajectory, match="'steps'"):
        backtrace({"trajectory_id": "t9", "triplets": []})
    with pytest.raises(BadTrajectory, match=r"steps\[0\]\.kind"):
        backtrace({**cycle, "steps": [dict(cycle["steps"][0], kind="think")] + cycle["steps"][1:]})
    no_entity = copy.deepcopy(cycle)
    no_entity["steps"][0]["pairs"][0]["entity"] = None
    with pytest.raises(BadTrajectory, match=r"steps\[0\]\.pairs\[0\]\.entity"):
        backtrace(no_entity)
    with pytest.raises(FactoryError, match=r"backtrace\.mode.*random_walk"):
        load_params(None, ["backtrace.mode=random_walk"])
    with pytest.raises(FactoryError, match=r"backtrace\.target_modes\.0.*oracle"):
        load_params(None, ["backtrace.target_modes=[oracle]"])
    graph = build_graph(cycle["triplets"])
    with pytest.raises(FactoryError, match="unknown backtrace mode"):
        supporting_subgraph(graph, ["film x"], ["paris"], mode="random_walk")
    with pytest.raises(FactoryError, match="unknown target_mode"):
        target_entities(cycle, graph, "oracle", initial=["film x"])


def test_embedding_linking_is_an_optional_last_tier():
    traj = make(
        "Who is the mayor of the city?",
        [[("NYC", "mayor", [("New York City", "mayor", "Eric Adams")])]],
        "The mayor is Eric Adams.",
        "Eric Adams",
    )
    off = backtrace(traj)
    assert off["initial_entities"] == [] and not off["path_found"]  # 'NYC' links to nothing by string
    on = backtrace(traj, BacktraceParams(embedding_threshold=0.9), embedder=fake_embedder)
    assert on["initial_entities"] == ["new york city"] and on["kept_triplet_ids"] == t(0)
    assert (
        backtrace(traj, BacktraceParams(embedding_threshold=0.999), embedder=fake_embedder)[
            "initial_entities"
        ]
        == []
    )
