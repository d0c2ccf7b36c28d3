"""Statistics and verdicts of the causal check on hand-made condition outcomes."""

from __future__ import annotations

import pytest

from factory.causal.effects import causal_summary, outcomes, parametric_exclusion
from factory.params.label_sections import CounterfactualParams, RelevanceParams
from factory.params.vocab import CONDITIONS

SEEDS = (1, 2, 3)


def rows_for(
    tid: str,
    dataset: str,
    *,
    full=True,
    without_sq=False,
    only_sq=True,
    closed_book=False,
    random=(True, True, True),
    status="ok",
    qtype="bridge",
    route="chain",
    sizes=(2, 5),
) -> list[dict]:
    """Counterfactual rows of one trajectory with the given outcomes (only the fields the statistics read)."""
    outcome = {"full": full, "without_sq": without_sq, "only_sq": only_sq, "closed_book": closed_book}
    base = {
        "trajectory_id": tid,
        "dataset": dataset,
        "qtype": qtype,
        "route": route,
        "sq_size": sizes[0],
        "graph_size": sizes[1],
        "parametric": closed_book,
        "status": status,
    }
    rows = [{**base, "condition": c, "random_seed": None, "correct": outcome[c]} for c in outcome]
    rows += [
        {**base, "condition": "without_random", "random_seed": s, "correct": ok}
        for s, ok in zip(SEEDS, random)
    ]
    return rows


def summary(rows, conditions=CONDITIONS, min_trajectories=10):
    relevance = RelevanceParams(bootstrap_samples=400, seed=5)
    return causal_summary(
        rows, conditions, relevance, CounterfactualParams(min_trajectories=min_trajectories)
    )


def test_load_bearing_when_removing_sq_costs_more_than_a_random_set():
    rows = []
    for i in range(40):  # without S_q: 4 of 40 right; without a random set: 37 of 40 on average
        rows += rows_for(f"h{i}", "hotpotqa", without_sq=i < 4, random=(True, True, i % 4 != 0))
    s = summary(rows)
    v = s["verdicts"]["hotpotqa"]
    assert v["verdict"] == "load-bearing"
    eff = s["groups"]["dataset=hotpotqa"]["effects"]
    assert eff["necessity_sq"]["value"] == pytest.approx(0.9)
    assert eff["necessity_random"]["value"] == pytest.approx(10 / 3 / 40)
    assert eff["difference"]["value"] == pytest.approx(0.9 - 10 / 3 / 40)
    lo, hi = eff["difference"]["ci"]
    assert 0 < lo < eff["difference"]["value"] < hi
    assert v["line"].startswith(
        "hotpotqa: removing S_q costs 90 points of accuracy, removing a random set of the same size 8 "
        "(difference 82, 95% CI ["
    )
    assert ": S_q is load-bearing; S_q alone keeps 100% of the full-graph accuracy" in v["line"]
    assert (
        "closed book answers 0% (0 parametric) (40 trajectories, 0 where even the full graph fails"
        in v["line"]
    )


def test_not_load_bearing_when_sq_costs_no_more_than_random_within_the_margin():
    rows = []
    for i in range(60):  # removing S_q or a random set: both cost the same 1 in 20
        miss = i % 20 == 0
        rows += rows_for(
            f"w{i}", "2wikimultihopqa", without_sq=not miss, random=(not miss,) * 3, only_sq=i < 30
        )
    v = summary(rows)["verdicts"]["2wikimultihopqa"]
    assert v["verdict"] == "not load-bearing" and v["difference"]["value"] == pytest.approx(0.0)
    assert v["difference"]["ci"][1] < 0.1
    assert "S_q is NOT load-bearing" in v["line"] and "within the 10-point margin" in v["line"]
    assert "S_q alone keeps 50% of the full-graph accuracy" in v["line"]


def test_cannot_tell_with_few_trajectories_or_a_wide_interval():
    few = [r for i in range(4) for r in rows_for(f"m{i}", "musique")]
    v = summary(few)["verdicts"]["musique"]
    assert v["verdict"] == "cannot tell" and "only 4 such trajectories, 10 needed" in v["line"]

    wide = []  # 12 trajectories, S_q costs 3 of 12 more than random: the CI spans 0 and the margin
    for i in range(12):
        wide += rows_for(f"w{i}", "musique", without_sq=i >= 3)
    v = summary(wide)["verdicts"]["musique"]
    lo, hi = v["difference"]["ci"]
    assert lo <= 0 < 0.1 <= hi
    assert v["verdict"] == "cannot tell" and "the CI includes 0 and reaches the 10-point margin" in v["line"]

    none = [r for i in range(12) for r in rows_for(f"n{i}", "musique", full=False)]
    v = summary(none)["verdicts"]["musique"]
    assert v["verdict"] == "cannot tell" and "the full graph reproduces none of the answers" in v["line"]


def test_full_failures_are_counted_and_left_out_of_the_effects():
    rows = []
    for i in range(20):
        rows += rows_for(f"h{i}", "hotpotqa", full=i >= 5, without_sq=i < 10, closed_book=i in (0, 7))
    s = summary(rows, min_trajectories=1)
    g = s["groups"]["dataset=hotpotqa"]
    assert g["accuracy"]["full"]["value"] == pytest.approx(0.75)
    assert g["effects"]["trajectories"] == 15 and g["effects"]["full_failed"] == 5
    # over the 15 whose full answer is right, without_sq is right for i = 5..9: necessity 10/15
    assert g["effects"]["necessity_sq"]["value"] == pytest.approx(10 / 15)
    assert g["accuracy"]["closed_book"]["value"] == pytest.approx(0.1) and g["parametric"] == 2
    assert (
        "(20 trajectories, 5 where even the full graph fails excluded from the effects)"
        in s["verdicts"]["hotpotqa"]["line"]
    )
    assert set(s["groups"]) >= {
        "all",
        "dataset=hotpotqa",
        "dataset=hotpotqa/qtype=bridge",
        "dataset=hotpotqa/route=chain",
        "route=chain",
        "parametric=yes",
        "parametric=no",
    }
    assert s["groups"]["parametric=yes"]["trajectories"] == 2
    lo, hi = g["accuracy"]["full"]["ci"]
    assert lo < 0.75 < hi


def test_outcomes_average_random_draws_and_drop_llm_errors():
    rows = rows_for("a", "hotpotqa", random=(True, False, False)) + rows_for(
        "b", "hotpotqa", status="llm_error"
    )
    items, counts = outcomes(rows)
    assert [o.trajectory_id for o in items] == ["a"] and counts["llm_error_excluded"] == 1
    assert items[0].correct["without_random"] == pytest.approx(1 / 3)


def test_parametric_exclusion_counts_unknowns():
    trajectories = [{"trajectory_id": t, "correct": t != "d"} for t in "abcd"]
    rows = rows_for("a", "hotpotqa", closed_book=True) + rows_for("b", "hotpotqa")
    excluded, counts = parametric_exclusion(trajectories, rows)
    assert excluded == {"a"}
    assert counts == {"excluded": 1, "unknown_kept": 1, "reasked_closed_book": 2}


def test_the_contrast_leaves_out_trajectories_where_no_random_set_can_differ_from_sq():
    # S_q = all of G: without_sq and without_random both show nothing, so both fail; S_q empty: both show G
    whole = [r for i in range(30) for r in rows_for(f"a{i}", "hotpotqa", random=(False,) * 3, sizes=(3, 3))]
    empty = [r for i in range(5) for r in rows_for(f"e{i}", "hotpotqa", without_sq=True, sizes=(0, 3))]
    s = summary(whole + empty)
    eff = s["groups"]["dataset=hotpotqa"]["effects"]
    assert eff["contrast"] == {"trajectories": 0, "sq_is_all_of_g": 30, "empty_sq": 5}
    assert eff["necessity_sq_all"]["value"] == pytest.approx(30 / 35)
    v = s["verdicts"]["hotpotqa"]
    assert v["verdict"] == "cannot tell"
    assert (
        "in none of the 35 trajectories is S_q a proper, non-empty part of G (30 keep all of G, 5 keep "
        in v["line"]
    )
    # with proper ones added, only they decide: removing S_q costs 100 points there, a random set nothing
    proper = [r for i in range(20) for r in rows_for(f"p{i}", "hotpotqa")]
    s = summary(whole + empty + proper)
    eff = s["groups"]["dataset=hotpotqa"]["effects"]
    assert eff["contrast"]["trajectories"] == 20 and eff["difference"]["value"] == pytest.approx(1.0)
    assert s["verdicts"]["hotpotqa"]["verdict"] == "load-bearing"
    assert (
        "over the 20 trajectories where S_q is a proper, non-empty part of G: 30 keep all of G, 5 nothing"
        in (s["verdicts"]["hotpotqa"]["line"])
    )


def test_no_rows_say_so():
    v = summary([])["verdicts"]
    assert list(v) == ["all"] and v["all"]["verdict"] == "cannot tell"
    assert "no trajectory was re-asked" in v["all"]["line"]
