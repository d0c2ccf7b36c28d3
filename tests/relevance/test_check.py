"""Relevance of labels vs gold supporting facts on small hand-made cases with hand-computed scores."""

from __future__ import annotations

import hashlib
import json

import pytest

from factory.params.agent_sections import AgentParams
from factory.params.label_sections import RelevanceParams
from factory.relevance.check import Source, check_relevance
from factory.relevance.report import render_markdown
from factory.utils.io import _round_floats
from factory.utils.selection import (
    ANSWER_ENTITY,
    AUTHORS_RULE,
    RANDOM,
    UNFILTERED,
    backtrace_method,
)
from tests.variants.test_sets import make_labels, make_trajectory

PASSAGES = {
    "g1": {"pid": "g1", "title": "Alpha", "sentences": ["Alpha was born in Gamma.", "Alpha plays chess."]},
    "g2": {"pid": "g2", "title": "Gamma", "sentences": ["Gamma is a city in Delta."]},
    "d1": {"pid": "d1", "title": "Omega", "sentences": ["Omega is a river in Sigma."]},
}
POOL = ["g1", "g2", "d1"]
HOTPOT_Q = {
    "question_id": "hotpotqa/h",
    "supporting": [
        {"title": "Alpha", "sent_idx": 0, "pid": "g1"},
        {"title": "Gamma", "sent_idx": 0, "pid": "g2"},
    ],
}
MUSIQUE_Q = {
    "question_id": "musique/m",
    "supporting": [
        {"title": "Alpha", "sent_idx": -1, "pid": "g1"},
        {"title": "Gamma", "sent_idx": -1, "pid": "g2"},
    ],
}
DEFAULT = ("undirected_shortest", "thought_and_answer")
SQ = backtrace_method(*DEFAULT)

BORN = ("Alpha", "born in", "Gamma")  # g1 sentence 0: gold fact
CHESS = ("Alpha", "plays", "chess")  # g1 sentence 1: gold paragraph, not a gold sentence
CITY = ("Gamma", "located in", "Delta")  # g2 sentence 0: gold fact
RIVER = ("Omega", "flows in", "Sigma")  # distractor passage
MADE_UP = ("Zeta", "invented", "Kappa")  # ungrounded


def _traj(tid: str, qid: str, triplets: list[tuple], dataset: str = "hotpotqa", **kw) -> dict:
    return make_trajectory(
        tid,
        qid,
        iterations=[[("Alpha", "facts", triplets, POOL)]],
        answer="Gamma",
        answers=("Gamma",),
        dataset=dataset,
        qtype=kw.pop("qtype", "bridge"),
        route="chain",
        **kw,
    )


def _case() -> tuple[list[dict], list[dict]]:
    a = _traj("A", "hotpotqa/h", [BORN, CHESS, CITY, RIVER, MADE_UP])
    b = _traj("B", "hotpotqa/h", [BORN, RIVER])
    c = _traj("C", "musique/m", [BORN], dataset="musique", qtype="2hop")
    wrong = _traj("W", "hotpotqa/h", [BORN], correct=False)
    labels = [
        make_labels(a, ["A#t1", "A#t3", "A#t4"]),
        make_labels(b, ["B#t1"]),
        make_labels(c, [], path_found=False),
        make_labels(wrong, ["W#t1"]),
    ]
    return [a, b, c, wrong], labels


def _check(trajectories, labels, bootstrap_samples=300, entailment=None):
    questions = {
        t["question_id"]: dict(
            MUSIQUE_Q if t["dataset"] == "musique" else HOTPOT_Q, question_id=t["question_id"]
        )
        for t in trajectories
    }
    return check_relevance(
        [Source("backtrace/seed_0/round_1", trajectories, labels)],
        questions,
        PASSAGES,
        RelevanceParams(bootstrap_samples=bootstrap_samples, random_seeds=5, seed=23, bar=0.8),
        default_combo=DEFAULT,
        threshold=0.5,
        entailment=entailment,
    )


def _vals(cell: dict) -> dict:
    return {k: cell[k]["value"] for k in ("precision", "recall", "f1")}


def test_micro_and_macro_scores_match_hand_computation():
    trajectories, labels = _case()
    res = _check(trajectories, labels)
    assert res["status"] == "ok"
    assert (
        res["counts"]["trajectories"] == 4
        and res["counts"]["correct"] == 3
        and res["counts"]["evaluated"] == 3
    )
    para = res["groups"]["all"]["levels"]["paragraph"]["methods"]
    # S_q: A kept {t1,t3,t4} relevant {t1,t2,t3} tp 2; B kept {t1} rel {t1} tp 1; C kept {} rel {t1}
    assert _vals(para[SQ]["micro"]) == pytest.approx({"precision": 3 / 4, "recall": 3 / 5, "f1": 2 * 3 / 9})
    # macro: precision undefined for C (keeps nothing) -> mean over A, B
    assert _vals(para[SQ]["macro"]) == pytest.approx(
        {"precision": (2 / 3 + 1) / 2, "recall": (2 / 3 + 1 + 0) / 3, "f1": (2 / 3 + 1 + 0) / 3}
    )
    # keep all: kept 5+2+1, relevant 3+1+1, tp 5
    assert _vals(para[UNFILTERED]["micro"]) == pytest.approx(
        {"precision": 5 / 8, "recall": 1.0, "f1": 10 / 13}
    )
    # answer entity ("gamma" in subject/object): A t1,t3; B t1; C t1 -> all relevant
    assert _vals(para[ANSWER_ENTITY]["micro"]) == pytest.approx(
        {"precision": 1.0, "recall": 4 / 5, "f1": 8 / 9}
    )
    # the authors' rule: one completion each, so only its first triplet (Alpha ; born in ; Gamma) is in
    # their graph; Alpha (the lookup) -> Gamma (the answer): A, B and C keep t1, all relevant
    assert _vals(para[AUTHORS_RULE]["micro"]) == pytest.approx(
        {"precision": 1.0, "recall": 3 / 5, "f1": 0.75}
    )
    diff = res["groups"]["all"]["levels"]["paragraph"]["backtrace_minus_control"][AUTHORS_RULE]["micro_f1"]
    assert diff["value"] == pytest.approx(2 * 3 / 9 - 0.75)
    line = res["verdicts"]["hotpotqa"]["line"]
    assert "Beside the KnowTrace authors' rule: S_q micro F1" in line
    # HotpotQA (A, B): kept t1 twice, relevant 3 + 1: P 1, R 1/2
    assert res["verdicts"]["hotpotqa"]["authors_rule_f1"] == pytest.approx(2 / 3)
    report = render_markdown(res, "")
    assert "| KnowTrace authors' rule |" in report and "S_q - authors' rule" in report
    # sentence level: only the HotpotQA trajectories; A relevant {t1,t3} tp 2, B relevant {t1} tp 1
    sent = res["groups"]["all"]["levels"]["sentence"]
    assert sent["trajectories"] == 2
    assert _vals(sent["methods"][SQ]["micro"]) == pytest.approx(
        {"precision": 3 / 4, "recall": 1.0, "f1": 6 / 7}
    )
    assert "sentence" not in res["groups"]["dataset=musique"]["levels"]
    ex = res["groups"]["all"]["extras"]
    assert ex[SQ]["support_recall_micro"] == pytest.approx(3 / 6) and ex[SQ][
        "support_recall_macro"
    ] == pytest.approx((1 + 0.5 + 0) / 3)
    assert ex[SQ]["ungrounded_rate"] == 0 and ex[UNFILTERED]["ungrounded_rate"] == pytest.approx(1 / 8)
    assert ex[SQ]["no_path_share"] == pytest.approx(1 / 3)
    assert ex[RANDOM]["mean_kept"] == pytest.approx(ex[SQ]["mean_kept"])  # matched size


def test_confidence_intervals_contain_the_point_estimates_and_are_reproducible():
    trajectories, labels = _case()
    res = _check(trajectories, labels)
    for name, group in res["groups"].items():
        for level in group["levels"].values():
            for method in level["methods"].values():
                for scope in ("micro", "macro"):
                    for cell in method[scope].values():
                        if cell["value"] is None:
                            continue
                        lo, hi = cell["ci"]
                        assert lo - 1e-9 <= cell["value"] <= hi + 1e-9, (name, cell)
    assert _check(trajectories, labels) == res
    assert _check(trajectories, labels, bootstrap_samples=301) != res


def test_groups_by_dataset_qtype_route():
    trajectories, labels = _case()
    groups = _check(trajectories, labels)["groups"]
    assert {
        "all",
        "dataset=hotpotqa",
        "dataset=musique",
        "dataset=hotpotqa/qtype=bridge",
        "dataset=musique/qtype=2hop",
        "dataset=hotpotqa/route=chain",
        "route=chain",
    } <= set(groups)
    assert groups["dataset=hotpotqa"]["trajectories"] == 2 and groups["dataset=musique"]["trajectories"] == 1


def _population(n: int, sq_right: bool) -> tuple[list[dict], list[dict]]:
    trajectories, labels = [], []
    for i in range(n):
        t = _traj(f"T{i}", f"hotpotqa/h{i}", [BORN, CITY, RIVER, CHESS])
        trajectories.append(t)
        # S_q = the gold-relevant triplets (one in five also keeps the distractor), or a poor choice (the
        # distractor)
        good = [f"T{i}#t1", f"T{i}#t2", f"T{i}#t4"] + ([f"T{i}#t3"] if i % 5 == 0 else [])
        labels.append(make_labels(t, good if sq_right else [f"T{i}#t3"]))
    return trajectories, labels


def test_verdicts_state_plainly_whether_sq_beats_the_control_and_reaches_the_bar():
    good = _check(*_population(30, True))
    assert good["counts"]["evaluated"] == 30 and good["counts"]["duplicates_dropped"] == 0
    v = good["verdicts"]["hotpotqa"]
    assert v["beats_answer_entity"] and v["reaches_bar"]
    assert (v["precision"], v["recall"]) == pytest.approx((90 / 96, 1.0))
    lo, hi = v["difference"]["ci"]
    assert 0 < lo < v["difference"]["value"] < hi
    assert "BEATS" in v["line"] and "REACH" in v["line"]
    bad = _check(*_population(30, False))["verdicts"]["hotpotqa"]
    assert not bad["beats_answer_entity"] and not bad["reaches_bar"]
    assert "does NOT beat" in bad["line"] and "do NOT reach" in bad["line"]
    md = render_markdown(good, "")
    assert v["line"] in md and "## dataset=hotpotqa" in md


def test_a_verdict_without_any_scored_sq_says_cannot_tell_instead_of_a_finding():
    # graphs without triplets (every step failed): S_q and the controls keep nothing, nothing is gold-relevant
    trajectories = [_traj(f"T{i}", f"hotpotqa/h{i}", []) for i in range(12)]
    empty = _check(trajectories, [make_labels(t, []) for t in trajectories])["verdicts"]["hotpotqa"]
    assert empty["verdict"] == "cannot tell" and empty["f1"] is None
    assert empty["line"].startswith("hotpotqa: cannot tell whether S_q")
    assert "12 correct trajectories" in empty["line"] and "NOT" not in empty["line"]
    good = _check(*_population(30, True))["verdicts"]["hotpotqa"]
    bad = _check(*_population(30, False))["verdicts"]["hotpotqa"]
    assert (good["verdict"], bad["verdict"]) == ("beats", "does not beat")


def test_duplicates_missing_labels_and_empty_inputs_are_counted():
    trajectories, labels = _case()
    copy = [dict(t, trajectory_id="random/" + t["trajectory_id"]) for t in trajectories]
    copy_labels = [dict(r, trajectory_id="random/" + r["trajectory_id"]) for r in labels[:1]]
    res = check_relevance(
        [Source("a", trajectories, labels), Source("b", copy, copy_labels)],
        {"hotpotqa/h": HOTPOT_Q, "musique/m": MUSIQUE_Q},
        PASSAGES,
        RelevanceParams(bootstrap_samples=50),
        default_combo=DEFAULT,
        threshold=AgentParams().grounding_threshold,
    )
    assert res["counts"]["duplicates_dropped"] == 3 and res["counts"]["evaluated"] == 3
    nolabel = _check(trajectories, labels[:1] + labels[3:])
    assert nolabel["counts"]["missing_labels"] == 2 and nolabel["counts"]["evaluated"] == 1
    empty = check_relevance(
        [], {}, {}, RelevanceParams(), default_combo=DEFAULT, threshold=AgentParams().grounding_threshold
    )
    assert empty["status"] == "no_trajectories" and empty["verdicts"] == {}
    assert "No trajectories" in render_markdown(empty, "")


# sha256 of check_relevance's result (floats rounded as metrics/relevance.json writes them) that the
# keyword arguments gave before the check took RelevanceParams (issue 31), on _golden_sources(): with
# the defaults, and with every parameter set otherwise (and entailment verdicts).
# re-recorded once when the methods took the variants' names (sq/... -> backtrace/..., keep_all -> unfiltered,
# random_matched -> random, sq_minus_control -> backtrace_minus_control): the same values under the new keys
GOLDEN_DEFAULTS = "d8c369e6ef8175df38318106249d1ce8edb15f88328b9cec386c073828cff37b"
GOLDEN_KEYWORDS = "64404afa0cf11dbdb5f16d2297d2c906bc71f013ff07e2490c99a8e494b5625f"


def _golden_sources():
    a, a_labels = _case()
    pop, pop_labels = _population(12, True)
    copies = [dict(t, trajectory_id="random/" + t["trajectory_id"]) for t in a]
    copy_labels = [dict(r, trajectory_id="random/" + r["trajectory_id"]) for r in a_labels[:2]]
    sources = [
        Source("backtrace/seed_0/round_1", a + pop, a_labels + pop_labels),
        Source("random/seed_0/round_1", copies, copy_labels),
    ]
    questions = {
        t["question_id"]: dict(
            MUSIQUE_Q if t["dataset"] == "musique" else HOTPOT_Q, question_id=t["question_id"]
        )
        for t in a + pop
    }
    entailment = {
        (t["trajectory_id"], x["triplet_id"]): None if n % 3 == 0 else n % 2 == 0
        for t in a + pop
        for n, x in enumerate(t["triplets"])
    }
    return sources, questions, entailment


def _digest(result: dict) -> str:
    return hashlib.sha256(json.dumps(_round_floats(result), sort_keys=True).encode()).hexdigest()


def test_the_typed_section_gives_the_result_the_keywords_gave():
    sources, questions, entailment = _golden_sources()
    threshold = AgentParams().grounding_threshold
    default = check_relevance(
        sources, questions, PASSAGES, RelevanceParams(), default_combo=DEFAULT, threshold=threshold
    )
    assert default["status"] == "ok" and default["counts"]["duplicates_dropped"] == 3
    custom = check_relevance(
        sources,
        questions,
        PASSAGES,
        RelevanceParams(bootstrap_samples=120, random_seeds=3, seed=7, bar=0.6),
        default_combo=DEFAULT,
        threshold=0.4,
        entailment=entailment,
    )
    assert (_digest(default), _digest(custom)) == (GOLDEN_DEFAULTS, GOLDEN_KEYWORDS)
