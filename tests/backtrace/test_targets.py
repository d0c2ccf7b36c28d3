"""Initial and target entities: yes/no and comparison answers, surface variants, unreachable targets."""

from __future__ import annotations

from factory.backtrace.labels import backtrace
from factory.params.label_sections import BacktraceParams
from tests.backtrace.cases import kept, make, p, t


def test_disconnected_target_and_answer_not_in_graph():
    traj = make(
        "Which country is Alpha in?",
        [
            [("Alpha", "country", [("Alpha", "country", "Spain")])],
            [("Berlin", "country", [("Berlin", "country", "Germany")])],
        ],
        "Alpha is in Spain; Berlin is irrelevant.",
        "Madrid",
        answers=["Spain"],
    )
    r = backtrace(traj)
    assert "berlin" in r["target_entities"] and r["kept_triplet_ids"] == t(0)  # Berlin: no path from Alpha
    none = backtrace(traj, BacktraceParams(target_mode="answer_only"))  # 'Madrid' names no node
    assert none["target_entities"] == [] and not none["path_found"] and none["kept_step_indices"] == [4]
    assert kept(traj, target_mode="gold_answer") == t(0)  # the oracle target: Spain
    assert kept(traj, target_mode="gold_answer", gold_answers=["Germany"]) == []  # gold given explicitly


def test_several_initial_entities_yes_no_and_surface_variants():
    traj = make(
        "Are Alpha and Beta both in Spain?",
        [
            [
                ("Alpha", "country", [("Alpha", "country", "Spain")]),
                ("Beta", "country", [("BETA", "country", "spain.")]),
            ]
        ],
        "Alpha is in Spain and Beta is in Spain.",
        "yes",
    )
    r = backtrace(traj)
    assert r["initial_entities"] == ["alpha", "beta"]  # 'BETA' and 'spain.' are the same nodes
    assert (
        r["kept_triplet_ids"] == t(0, 1)
        and r["kept_pair_ids"] == p(0, 1)
        and r["kept_step_indices"] == [0, 1, 2, 3]
    )
    # yes/no: the answer names no node; the compared entities' values named in the thought are the targets
    only = backtrace(traj, BacktraceParams(target_mode="answer_only"))
    assert only["target_entities"] == ["spain"] and only["kept_triplet_ids"] == t(0, 1)
    assert kept(traj, target_mode="gold_answer") == t(0, 1)
    # question_only: the question names all three nodes, so the paths between them are kept
    assert backtrace(traj, BacktraceParams(target_mode="question_only"))["target_entities"] == [
        "alpha",
        "beta",
        "spain",
    ]
    assert kept(traj, target_mode="question_only") == t(0, 1)


def test_comparison_answer_that_is_a_compared_entity():
    traj = make(
        "Which was founded first, Alpha or Beta?",
        [
            [
                ("Alpha", "founded", [("Alpha", "founded", "1990")]),
                ("Beta", "founded", [("Beta", "founded", "1985")]),
            ],
            [("Gamma", "founded", [("Gamma", "founded", "1970")])],
        ],
        "Alpha was founded in 1990 and Beta in 1985, so Beta.",
        "Beta",
    )
    only = backtrace(traj, BacktraceParams(target_mode="answer_only"))
    assert only["target_entities"] == ["1985", "1990", "beta"] and only["kept_triplet_ids"] == t(0, 1)
    assert kept(traj) == t(0, 1)  # thought and answer name the same values
    # i == t: Beta is an initial entity and a target; nothing connects it to Alpha, so alone it keeps nothing
    assert backtrace(traj, BacktraceParams(target_mode="question_only"))["kept_triplet_ids"] == []


def test_comparison_answer_without_values_in_the_thought_targets_the_chain_ends():
    traj = make(
        "Which film has the director who died later, Film A or Film B?",
        [
            [
                ("Film A", "director", [("Film A", "director", "Ann Lee")]),
                ("Film B", "director", [("Film B", "director", "Bo Kim")]),
            ],
            [
                ("Ann Lee", "date of death", [("Ann Lee", "date of death", "1975")]),
                ("Bo Kim", "date of death", [("Bo Kim", "date of death", "1987")]),
                ("Film C", "genre", [("Genre X", "genre of", "Film C")]),
            ],
        ],
        "The graph links the question to Film B.",
        "Film B",
    )
    for mode in ("thought_and_answer", "answer_only", "gold_answer"):
        r = backtrace(traj, BacktraceParams(target_mode=mode))
        assert r["target_entities"] == ["1975", "1987", "film b"], (
            mode
        )  # the ends of the compared films' chains
        assert r["kept_triplet_ids"] == t(0, 1, 2, 3), mode  # not Film C's triplet
    # the directed view matters: the values are what the compared entities lead to
    assert kept(traj, "directed_reach") == t(0, 1, 2, 3)


def _graph(*rows):
    from factory.backtrace.graph import build_graph

    return build_graph(
        [
            {"triplet_id": f"x{n}", "step_index": 1, "subject": s, "relation": r, "object": o}
            for n, (s, r, o) in enumerate(rows)
        ]
    )


def test_an_answer_that_is_a_node_names_only_that_node():
    from factory.backtrace.targets import answer_nodes

    g = _graph(
        ("Norris Mountain", "part of", "Rocky Mountains"),
        ("Bitterroot Range", "part of", "Northern Rocky Mountains"),
        ("Wind River Range", "part of", "Central Rocky Mountains"),
        ("Seoul", "hosted", "1988 Summer Olympics in Seoul"),
    )
    assert answer_nodes("Rocky Mountains", g) == ["rocky mountains"]  # not 'northern rocky mountains'
    assert answer_nodes("1988", g) == ["1988 summer olympics in seoul"]  # no node of that name: containment
    assert answer_nodes("yes", g) == []


def test_weak_answers_do_not_link_by_containment():
    from factory.backtrace.targets import answer_nodes, answers_nodes

    g = _graph(
        ("Midway", "in", "US Route 167"), ("Midway", "country", "United States"), ("X", "y", "no idea")
    )
    assert answer_nodes("US", g) == []  # inside 'us route 167' but too short to say it names it
    assert answer_nodes("no", g) == []
    # aliases: the ones that name a node exactly win over the others' containment
    assert answers_nodes(["U.S.", "United States", "US"], g) == ["united states"]


def test_comparison_values_come_from_the_compared_entities_lookups_not_from_other_chains():
    # Film C is a distractor the agent looked up in the same step; Zed is a passer-by in Film A's
    # completion (a triplet that does not touch Film A); Bo Kim is looked up one step later
    traj = make(
        "Which film has the director who died later, Film A or Film B?",
        [
            [
                ("Film C", "director", [("Film C", "director", "Cy Dee"), ("Cy Dee", "died", "1950")]),
                ("Film A", "director", [("Film A", "director", "Ann Lee"), ("Zed Roe", "born in", "Oslo")]),
            ],
            [
                ("Film B", "director", [("Film B", "director", "Bo Kim")]),
                ("Ann Lee", "date of death", [("Ann Lee", "date of death", "1975")]),
            ],
            [("Bo Kim", "date of death", [("1987", "date of death of", "Bo Kim")])],
        ],
        "Going by what I found about Zed Roe, the answer is Film B.",
        "Film B",
    )
    r = backtrace(traj, BacktraceParams(target_mode="answer_only"))
    # the ends of Film A's and Film B's chains only: not Cy Dee's 1950, not Zed Roe's Oslo
    assert r["target_entities"] == ["1975", "1987", "film b"]
    assert r["kept_triplet_ids"] == t(2, 4, 5, 6)
    # the thought names Zed Roe, who is no value of the compared films: the chain ends are the targets
    assert backtrace(traj)["kept_triplet_ids"] == t(2, 4, 5, 6)


def test_an_answer_without_a_node_links_to_nothing_not_to_a_scattered_part_of_another_name():
    g = _graph(
        ("James Tuchet, 5th Baron Audley", "son of", "John Tuchet"),
        ("Audley End", "seat of", "Baron Tuchet"),
    )
    from factory.backtrace.targets import answer_nodes

    # "baron tuchet" shares two words with the answer, scattered: a token subset of an unrelated name
    assert answer_nodes("John Tuchet, 4th Baron Audley", g) == ["john tuchet"]  # the name inside it
    g2 = _graph(("Audley End", "seat of", "Baron Tuchet"))
    assert answer_nodes("John Tuchet, 4th Baron Audley", g2) == []
    assert g2.linker.link("John Tuchet, 4th Baron Audley") == []
    assert g2.linker.link("Tuchet") == ["baron tuchet"]  # a shorter mention still finds the full name
