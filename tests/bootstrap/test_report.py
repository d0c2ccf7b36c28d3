"""The bootstrapping report on hand-made metrics: mean ± std over seeds, paired verdicts (beats / does
not beat / cannot tell), stop decisions with their CIs, the training budget and tokens seen."""

from __future__ import annotations

import math

import pytest

from factory.bootstrap.report import (
    build_summary,
    decision_line,
    policy_tokens_seen,
    render_markdown,
    verdict_line,
)
from factory.bootstrap.stop import decide
from factory.utils import paths
from factory.utils.io import write_json
from factory.utils.stats import paired_difference
from tests.bootstrap.evals import em, rule, write_eval

SEEDS = [0, 1, 2]
VARIANTS = ["backtrace", "random", "unfiltered"]
BUDGET = {"budget": "steps", "max_steps": 4, "epochs": 2.0, "batch_size": 8, "grad_accum": 1}
HELDOUT_BASE = em("1100000000")  # base model: 0.2 on 10 held-out questions
# held-out EM per (variant, seed): round 0, round 1 (None = skipped)
HELDOUT = {
    "backtrace": {
        0: [em("1100000000"), em("1110000000")],  # 0.2, 0.3
        1: [em("1111000000"), None],  # 0.4, skipped
        2: [em("1111110000"), em("1111100000")],  # 0.6, 0.5
    },
    "random": {s: [em("1100000000"), em("1100000000")] for s in SEEDS},
    "unfiltered": {s: [em("1000000000"), em("1100000000")] for s in SEEDS},
}
# test-split EM of each chain's selected round, per seed (10 questions per seed, 30 pairs per variant)
TEST = {
    "backtrace": {0: "1111111000", 1: "1111100000", 2: "1111110000"},  # 0.7, 0.5, 0.6
    "random": {s: "0000000000" for s in SEEDS},  # backtrace right on 18 pairs more, wrong on none
    "unfiltered": {0: "1111111000", 1: "1111100000", 2: "1111100000"},  # one pair differs
}
TOKENS = {"backtrace": 1000, "random": 700, "unfiltered": 2500}  # per trained round


def write_chain(variant: str, seed: int) -> None:
    rounds = HELDOUT[variant][seed]
    for r, scores in enumerate(rounds):
        write_eval(
            paths.eval_data(variant, r, "heldout", seed),
            paths.eval_metrics(variant, r, "heldout", seed),
            scores,
        )
        write_json(
            paths.stage_metrics("train", variant, r, seed),
            {"status": "trained", "steps": 4, "tokens_seen": TOKENS[variant] * (r + 1), "init_policy": "base"}
            if scores is not None
            else {"status": "skipped"},
        )
        write_json(
            paths.stage_metrics("variants", variant, r, seed), {"examples": 10 * (r + 1), "fa_ratio": 0.5}
        )
        decision = decide(HELDOUT_BASE, rounds[: r + 1], rule(2, min_delta=0.0, patience=2))
        write_json(paths.decision(variant, r, seed), {"variant": variant, "seed": seed, **decision.as_dict()})


def write_selected(variant: str) -> None:
    chains = {}
    for seed in SEEDS:
        scores = em(TEST[variant][seed], prefix="t")
        write_eval(paths.selected_test_data(variant, seed), paths.METRICS / "unused.json", scores)
        value = sum(scores.values()) / len(scores)
        chains[str(seed)] = {
            "selected_round": 1 if variant != "random" else -1,
            "selected_policy": f"{variant}-r1" if variant != "random" else "base",
            "test": {"em": value, "f1": value, "questions": 10},
        }
    write_json(paths.METRICS / "test" / f"{variant}.json", {"variant": variant, "chains": chains})


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_eval(paths.base_eval_data("heldout"), paths.base_eval_metrics("heldout"), HELDOUT_BASE)
    for variant in VARIANTS:
        for seed in SEEDS:
            write_chain(variant, seed)
        write_selected(variant)
    return tmp_path


def summary() -> dict:
    return build_summary(rule(2, variants=VARIANTS, seeds=SEEDS, ci_samples=2000, ci_seed=41), train=BUDGET)


def test_mean_and_std_over_seeds_by_hand(project):
    s = summary()
    bt = s["variants"]["backtrace"]["by_round"]
    # round 0: 0.2, 0.4, 0.6 -> mean 0.4, sample std 0.2; round 1: 0.3, (skipped), 0.5 -> 0.4 ± sqrt(0.02)
    assert bt[0]["heldout_em"] == {"mean": pytest.approx(0.4), "std": pytest.approx(0.2), "n": 3}
    assert bt[1]["heldout_em"]["mean"] == pytest.approx(0.4) and bt[1]["heldout_em"]["n"] == 2
    assert bt[1]["heldout_em"]["std"] == pytest.approx(math.sqrt(0.02))
    assert bt[1]["status"] == ["skipped", "trained"]
    random_r0 = s["variants"]["random"]["by_round"][0]["heldout_em"]
    assert random_r0 == {"mean": pytest.approx(0.2), "std": 0.0, "n": 3}
    # test EM of the selected rounds: 0.7, 0.5, 0.6 -> 0.6 ± 0.1
    test_em = s["variants"]["backtrace"]["test_em"]
    assert (
        test_em["mean"] == pytest.approx(0.6) and test_em["std"] == pytest.approx(0.1) and test_em["n"] == 3
    )
    assert s["base_heldout_em"] == 0.2


def test_paired_verdicts_by_hand(project):
    verdicts = summary()["verdicts"]
    beats = verdicts["backtrace_vs_random"]
    # 30 (seed, question) pairs: backtrace right on 18 that random gets wrong, never the reverse
    assert beats["n"] == 30 and beats["difference"] == pytest.approx(18 / 30) and beats["ci"][0] > 0
    assert beats["line"].startswith("backtrace BEATS random") and "+0.600" in beats["line"]
    tie = verdicts["backtrace_vs_unfiltered"]
    # one pair of 30 differs: +1/30, and a resample misses it with probability (29/30)^30 = 0.36
    assert tie["difference"] == pytest.approx(1 / 30) and tie["ci"][0] == 0.0 and tie["ci"][1] > 0
    assert (
        tie["line"].startswith("backtrace vs unfiltered: CANNOT TELL") and "over 30 questions" in tie["line"]
    )


def test_does_not_beat_when_the_other_is_better(project):
    for seed in SEEDS:  # unfiltered right on every test question
        write_eval(
            paths.selected_test_data("unfiltered", seed), paths.METRICS / "unused.json", em("1" * 10, "t")
        )
    verdict = summary()["verdicts"]["backtrace_vs_unfiltered"]
    assert verdict["difference"] == pytest.approx(-12 / 30) and verdict["ci"][1] < 0
    assert verdict["line"].startswith("backtrace does NOT beat unfiltered: unfiltered is better")


def test_verdict_lines_from_hand_made_differences():
    a = {("s", i): 1.0 for i in range(5)}
    b = {("s", i): 0.0 for i in range(5)}
    assert "BEATS" in verdict_line("x", "y", paired_difference(a, b, samples=200, seed=0))
    assert "does NOT beat" in verdict_line("x", "y", paired_difference(b, a, samples=200, seed=0))
    d = paired_difference(a, a, samples=200, seed=0)
    assert d["ci"] == [0.0, 0.0] and "CANNOT TELL" in verdict_line("x", "y", d)
    assert "no verdict" in verdict_line("x", "y", paired_difference(a, {}, samples=200, seed=0))


def test_report_shows_budget_tokens_and_stop_decisions(project):
    s = summary()
    # tokens seen by the selected policy: round 1's training (from the base model, on its own set);
    # seed 1's round 1 was skipped, so its policy is round 0's adapter
    assert [s["variants"]["backtrace"]["selected"][k]["tokens_seen"] for k in "012"] == [2000, 1000, 2000]
    assert s["variants"]["random"]["selected"]["0"]["tokens_seen"] == 0  # the base model was selected
    md = render_markdown(s, None, SEEDS)
    assert "Training budget: equal compute, 4 optimizer steps of 8 x 1 examples per round" in md
    # test EM (mean ± std) next to the tokens the selected policies were trained on
    assert "| backtrace | 0.600 ± 0.100 | 0.600 ± 0.100 | 1667 ± 577 |" in md
    assert "| random | 0.000 ± 0.000 | 0.000 ± 0.000 | 0 ± 0 |" in md
    assert "| unfiltered | 0.567 ± 0.115 | 0.567 ± 0.115 | 5000 ± 0 |" in md
    # each verdict answers its variant's question (factory/variants/registry.py)
    assert (
        "- Does backtracing beat dropping as many generations at random? backtrace BEATS random on this run "
        "(test EM difference +0.600"
    ) in md
    assert (
        "- Does filtering beat keeping every generation of a correct trajectory? backtrace vs unfiltered: "
        "CANNOT TELL on this run"
    ) in md
    assert "| 1 | skipped, trained | 20 ± 0 | 4 ± 0 | 2000 ± 0 | 0.500 ± 0.000 | 0.400 ± 0.141 |" in md
    # per round: the stop test against the best policy before it, as the decision recorded it
    assert (
        "- seed 0, round 0: held-out EM 0.200 vs the base model 0.200: difference +0.000, "
        "95% CI [+0.000, +0.000] over 10 questions -> no gain; continue." in md
    )
    one_win = decide(HELDOUT_BASE, HELDOUT["backtrace"][0], rule(2, min_delta=0.0, patience=2)).test
    lo, hi = one_win["ci"]
    assert (
        f"- seed 0, round 1: held-out EM 0.300 vs the base model 0.200: difference +0.100, "
        f"95% CI [{lo:+.3f}, {hi:+.3f}] over 10 questions -> no gain (the rise is within the noise: the CI "
        "includes 0); stop (held-out EM has not risen" in md
    )
    assert lo == 0.0 and hi > 0.1
    assert "- seed 2, round 0: held-out EM 0.600 vs the base model 0.200: difference +0.400" in md
    assert "-> gain; continue." in md
    assert "- seed 1, round 1: skipped; stop (an earlier decision stopped this chain)." in md
    # under the threshold test the same round is a gain, and the line says the CI includes 0
    lenient = {**one_win, "improved": True}
    row = {"round": 1, "stop": False, "reason": None, "test": lenient}
    assert "-> gain (by the threshold test; the CI includes 0); continue." in decision_line("0", row)
    budget = render_markdown({**s, "budget": {**BUDGET, "budget": "epochs"}}, None, SEEDS)
    assert "Training budget: 2.0 epoch(s) per round (train.budget: epochs): a larger set gets more" in budget


def test_tokens_of_a_policy_follow_fallbacks_and_continued_adapters():
    rows = [
        {"status": "trained", "tokens_seen": 100, "train_init": "base"},
        {"status": "empty", "tokens_seen": None, "train_init": "backtrace-r0"},
        {"status": "trained", "tokens_seen": 50, "train_init": "backtrace-r0"},
    ]
    assert policy_tokens_seen(rows, 0) == 100
    assert policy_tokens_seen(rows, 1) == 100  # an empty round falls back to the policy before it
    assert policy_tokens_seen(rows, 2) == 150  # continued round 0's adapter
    assert policy_tokens_seen([{**rows[0]}, {**rows[2], "train_init": "base"}], 1) == 50


def test_the_headline_holds_each_variants_selected_round_and_its_em_and_the_labels_numbers():
    from factory.bootstrap.headline import headline

    summary = {
        "base_heldout_em": 0.25,
        "variants": {
            "backtrace": {
                "selected": {"0": {"round": 1}, "1": {"round": -1}},  # seed 1 kept the base model
                "chains": {"0": [{"round": 0, "heldout_em": 0.3}, {"round": 1, "heldout_em": 0.5}], "1": []},
                "test_em": {"mean": 0.4},
            },
            "random": {
                "selected": {"0": {"round": 0}},
                "chains": {"0": [{"round": 0, "heldout_em": 0.3}]},
                "test_em": {"mean": 0.2},
            },
        },
    }
    methods = {
        "backtrace/u/t": {"micro": {"f1": {"value": 0.8}}},
        "authors_rule": {"micro": {"f1": {"value": 0.5}}},
    }
    relevance = {
        "default_method": "backtrace/u/t",
        "groups": {"all": {"levels": {"paragraph": {"methods": methods}}}},
        "causal": {"groups": {"all": {"effects": {"difference": {"value": 0.2}}}}},
    }
    out = headline(summary, relevance)
    assert out["backtrace"] == {"round": [1, -1], "heldout_em": (0.5 + 0.25) / 2, "test_em": 0.4}
    assert out["random"] == {"round": 0, "heldout_em": 0.3, "test_em": 0.2}  # one seed: a number, not a list
    assert out["labels"] == {
        "backtrace_f1": 0.8,
        "authors_rule_f1": 0.5,
        "causal_effect": 0.2,
        "real_graphs_backtrace_f1": None,
        "real_graphs_authors_rule_f1": None,
    }
    nothing = {"backtrace_f1": None, "authors_rule_f1": None, "causal_effect": None}
    real = {"real_graphs_backtrace_f1": None, "real_graphs_authors_rule_f1": None}
    assert headline(summary, None)["labels"] == nothing | real
    calibration = {"all": {"backtrace": {"f1": 0.83}, "authors_rule": {"f1": 0.46}}}
    labels = headline(summary, relevance, calibration)["labels"]
    assert (labels["real_graphs_backtrace_f1"], labels["real_graphs_authors_rule_f1"]) == (0.83, 0.46)


def test_the_report_states_the_test_protocol_and_sets_published_figures_apart(project):
    from factory.bootstrap.protocol import PUBLISHED, test_protocol

    s = summary()
    for variant in VARIANTS:  # each chain's test breakdown by dataset, as select writes it
        for sel in s["variants"][variant]["selected"].values():
            sel["test"]["by_dataset"] = {
                "hotpotqa": {"trajectories": 6, "em": 0.5},
                "musique": {"trajectories": 4, "em": 0.25},
            }
    ingest = {
        "sources": {
            "/d/hotpot_dev_distractor_v1.json": {"dataset": "hotpotqa", "official_split": "dev"},
            "/d/hotpot_train_v1.1.json": {"dataset": "hotpotqa", "official_split": "train"},
            "/d/musique_ans_v1.0_dev.jsonl": {"dataset": "musique", "official_split": "dev"},
        },
        "datasets": {
            "hotpotqa": {"by_split": {"test": 7405}, "test_only": False},
            "musique": {"by_split": {"test": 2417}, "test_only": True},
        },
    }
    s["test_protocol"] = test_protocol(s, ingest, n_questions=10, seed=11)
    md = render_markdown(s, None, SEEDS)
    assert "Test EM is on 10 seeded random questions of the official dev sets" in md
    assert "- hotpotqa: 6 of its 7405 official dev questions (hotpot_dev_distractor_v1.json)" in md
    assert "- musique was given with dev files only: it gives test questions only" in md
    assert "| variant | hotpotqa test EM | musique test EM |" in md and "| backtrace | 0.500 | 0.250 |" in md
    # published figures: other systems, other models and settings, in a table of their own
    assert "**other systems, other models and other settings**" in md
    search_r1 = next(f for f in PUBLISHED if f.system == "Search-R1")
    assert f"| Search-R1 | {search_r1.model} |" in md and "| 0.433 | 0.196 |" in md
    own_rows = md.split("## Test protocol")[0]
    assert "Search-R1" not in own_rows  # never mixed into the factory's own table


def test_a_sample_that_ran_short_is_a_line_of_the_report(project):
    """The demo profile (evaluate.allow_fewer) evaluates all the held-out questions there are; the report
    says how many were asked and how many there were. A sample that got what it asked is no line."""
    from factory.bootstrap.protocol import short_samples
    from factory.utils.io import read_json

    base = read_json(paths.base_eval_metrics("heldout"))
    write_json(paths.base_eval_metrics("heldout"), {**base, "asked": 500})  # 10 questions ran
    for seed in SEEDS:  # every round evaluated the same 10 of the 500 asked
        path = paths.eval_metrics("backtrace", 0, "heldout", seed)
        write_json(path, {**read_json(path), "asked": 500})
    write_json(paths.stage_metrics("trajectories", "random", 0, 0), {"questions": 24, "asked": 24})
    s = summary()
    s["short_samples"] = short_samples(VARIANTS, SEEDS, 2)
    assert s["short_samples"] == ["asked 500 held-out questions (evaluate.n_questions), 10 available"]
    md = render_markdown(s, None, SEEDS)
    assert "Fewer questions than asked: the corpora hold no more" in md
    assert "\n- asked 500 held-out questions (evaluate.n_questions), 10 available\n" in md
    s["short_samples"] = []
    assert "Fewer questions than asked" not in render_markdown(s, None, SEEDS)


def test_a_round_whose_replies_were_mostly_unusable_is_a_warning_in_the_report(project):
    unusable = {"replies": 9, "calls": 10, "share": 0.9, "by_reason": {"parse_error": 9}}
    write_json(paths.stage_metrics("trajectories", "random", 0, 1), {"unusable": unusable})
    md = render_markdown(summary(), None, SEEDS)
    assert md.count("**WARNING**") == 1
    assert (
        "**WARNING** seed 1, round 0: 90% of this round's replies were unusable (parse_error 9 of 10 calls): "
        "is llm.model the model you meant" in md
    )
