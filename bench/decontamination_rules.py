"""Decontamination rules on real records: recall per kind of built contamination, false positives among real
questions, and the thresholds chosen on one part of the data and reported on the part held back.

The evaluation index is the shared dev samples (HotpotQA 839, 2WikiMultihopQA 523 after ingest's checks,
MuSiQue 315). Cases are built by bench/decontamination_cases.py from those dev records (its docstring lists
every kind); the negatives are templated questions about other entities and other questions over the same
entities. False positives on real records: every real question (train and dev samples of the three
datasets) is matched against all OTHER real dev questions; every flagged pair is printed for a human to
judge, since the datasets hold some true duplicates (MuSiQue asks several chains twice in other words).

Thresholds are chosen on HotpotQA + MuSiQue (cases built from their dev records, their negatives) and
reported on 2WikiMultihopQA, held back, as well as on all. The rule: the lowest threshold of the grid whose
false-positive rate on the choosing part's negatives is at most FP_BUDGET (recall is highest there); the
typo ratio, the strictest within RECALL_TOLERANCE of the best recall. The script prints whether the
defaults in factory/params/data_sections.py are what it chose.

    .venv/bin/python bench/decontamination_rules.py            # everything (about three minutes on 2 cores)
    .venv/bin/python bench/decontamination_rules.py --pairs    # also every flagged real pair
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decontamination_cases import CHAIN, EXACT, NEGATIVES, REWORDING, SURFACE, Case  # noqa: E402
from bench.decontamination_methods import compare_methods  # noqa: E402
from bench.decontamination_setup import (  # noqa: E402
    CHOOSE,
    ENTITY_NEGATIVES,
    FP_BUDGET,
    GRID,
    RECALL_TOLERANCE,
    NearScores,
    Setup,
    _pct,
    lowest_within_budget,
    machine,
    part_of,
    rate,
)
from factory.decontamination.index import RULES  # noqa: E402
from factory.decontamination.rows import pool_row  # noqa: E402
from factory.params.data_sections import DecontaminationParams  # noqa: E402


def choose_near_duplicate(setup: Setup, typo_ratios=(60, 70, 75, 80, 90)) -> dict:
    """For each typo ratio: near_duplicate_threshold (pairs over other titles) is the lowest whose FP on the
    choosing part's templated-other-entity negatives is within budget; near_duplicate_same_titles (pairs
    over the same set of supporting titles) the lowest whose FP on its other-question-same-entities
    negatives is. The typo ratio kept is the strictest (highest) whose recall of the choosing part's edits
    is within RECALL_TOLERANCE of the best: a laxer ratio pairs more unrelated words for nothing."""
    print(
        f"\nnear_duplicate: thresholds chosen on {' + '.join(CHOOSE)} (FP budget {FP_BUDGET:.0%}; grid "
        f"{GRID[0]}..{GRID[-1]} by {GRID[1] - GRID[0]:.3f})"
    )
    print(
        f"  {'typo_ratio':>10}  {'other titles':>12}  {'same titles':>11}  "
        f"{'recall (choose, same titles)':>28}"
    )
    results = []
    for ratio in typo_ratios:
        s = NearScores(setup, ratio)
        entity, chain_neg = (
            s.mask(ENTITY_NEGATIVES, "choose"),
            s.mask(("other_question_same_chain",), "choose"),
        )
        other_t = lowest_within_budget(lambda t, s=s, m=entity: np.mean(s.other[m] >= t))
        same_t = lowest_within_budget(lambda t, s=s, m=chain_neg: np.mean(s.same[m] >= t))
        positives = s.mask(SURFACE + REWORDING, "choose")
        recall = np.mean(s.origin[positives] >= same_t)
        print(f"  {ratio:>10}  {other_t:>12.3f}  {same_t:>11.3f}  {recall:>28.2%}")
        results.append((recall, ratio, other_t, same_t, s))
    top = max(r[0] for r in results)
    _, ratio, other_t, same_t, scores = max(
        (r for r in results if r[0] >= top - RECALL_TOLERANCE), key=lambda r: r[1]
    )
    print(
        f"  kept: typo_ratio {ratio}, near_duplicate_threshold {other_t}, near_duplicate_same_titles {same_t}"
    )
    return {
        "typo_ratio": float(ratio),
        "near_duplicate_threshold": other_t,
        "near_duplicate_same_titles": same_t,
        "scores": scores,
    }


# -- every rule at the chosen settings ---------------------------------------------------------------


def recall_per_rule(setup: Setup, settings: dict) -> None:
    """Per kind of case: the share whose record each rule flags alone (only that rule on), then with every
    rule on (the strongest match); negatives: the share flagged by anything but their donors."""
    rows = [c.row for c in setup.cases]
    runs = {rule: setup.matched(setup.index(**settings, rules=[rule]), rows) for rule in RULES}
    runs["all rules"] = setup.matched(setup.index(**settings), rows)
    print("\nrecall per kind of case and rule (each rule alone, then all on), by part: choose | held | all")
    print(f"  {'kind':27} {'rule expected':15}" + "".join(f"{name:>28}" for name in runs))
    for kind in EXACT + SURFACE + REWORDING + CHAIN + NEGATIVES:
        idx = [i for i, c in enumerate(setup.cases) if c.kind == kind]
        cells = []
        for found in runs.values():
            hit = [_hit(setup.cases[i], found[i]) for i in idx]
            by_part = [
                [h for h, i in zip(hit, idx) if part_of(setup.cases[i].origin["dataset"]) == p]
                for p in ("choose", "held")
            ]
            cells.append(" | ".join(_pct(x) for x in (*by_part, hit)))
        expected = setup.cases[idx[0]].expected or "none (negative)"
        print(f"  {kind:27} {expected:15}" + "".join(f"{cell:>28}" for cell in cells) + f"   n={len(idx)}")
    print(
        "  (a negative's cell is its false-positive rate: matched with anything but the records it took an "
        "entity from. same_chain alone also catches every edit of the other kinds, since a built case keeps "
        "its record's answer and titles; a copy from elsewhere may not)"
    )


def _hit(case: Case, found: list[tuple]) -> bool:
    if case.expected is None:
        return any(q not in case.exclude for _, _, q, _ in found)
    return any(q == case.origin["question_id"] for _, _, q, _ in found)


def choose_guard(setup: Setup, settings: dict, grid=(0.0, 0.25, 0.5, 0.75, 1.0)) -> float:
    """same_chain alone, guard off and on: recall of the chain kinds, false positives on the same-entities
    other-question negatives (each shares its record's answer and titles) and the real pairs it flags. The
    guard kept is the lowest whose FP on the choosing part is within budget."""
    rows = [c.row for c in setup.cases]
    chain = [i for i, c in enumerate(setup.cases) if c.kind in CHAIN]
    negatives = [i for i, c in enumerate(setup.cases) if c.kind == "other_question_same_chain"]
    print(
        "\nsame_chain guard (yes/no or option answers need the questions' other words to agree): same_chain "
        "alone, choose | held"
    )
    print(
        f"  {'guard':>5}  {'recall of chain kinds':>24}  {'FP other question':>20}  "
        f"{'real questions flagged':>22}"
    )
    kept = None
    for guard in grid:
        index = setup.index(**settings, rules=["same_chain"], same_chain_guard=guard)
        found = setup.matched(index, rows)
        real = setup.matched(index, [pool_row(q) for q in setup.real])
        recall = [
            [_hit(setup.cases[i], found[i]) for i in chain if part_of(setup.cases[i].origin["dataset"]) == p]
            for p in ("choose", "held")
        ]
        fp = [
            [
                _hit(setup.cases[i], found[i])
                for i in negatives
                if part_of(setup.cases[i].origin["dataset"]) == p
            ]
            for p in ("choose", "held")
        ]
        flagged = [
            [
                any(q != own["question_id"] for _, _, q, _ in f)
                for f, own in zip(real, setup.real)
                if part_of(own["dataset"]) == p
            ]
            for p in ("choose", "held")
        ]
        print(
            f"  {guard:5.2f}  {_pct(recall[0]):>11} | {_pct(recall[1]):>10}  "
            f"{_pct(fp[0]):>9} | {_pct(fp[1]):>8}"
            f"  {_pct(flagged[0]):>10} | {_pct(flagged[1]):>9}"
        )
        if kept is None and sum(fp[0]) <= FP_BUDGET * len(fp[0]):
            kept = guard
    kept = grid[-1] if kept is None else kept
    print(f"  kept: same_chain_guard {kept}")
    return kept


def real_false_positives(setup: Setup, settings: dict, show_pairs: bool) -> None:
    """Every real question against every other real dev question, all rules on: the share flagged per
    dataset and rule, and (with --pairs) every flagged pair."""
    index = setup.index(**settings)
    rows = [pool_row(q) for q in setup.real]
    found = index.matches(rows)
    by_id = {q["question_id"]: q for q in setup.real}
    flagged, pairs = defaultdict(list), []
    for q, matches in zip(setup.real, found, strict=True):
        others = [m for m in matches if setup.qid[m.eval_set, m.eval_id] != q["question_id"]]
        flagged[q["dataset"], "any"].append(bool(others))
        for rule in RULES:
            flagged[q["dataset"], rule].append(any(m.rule == rule for m in others))
        pairs += [(q, by_id[setup.qid[m.eval_set, m.eval_id]], m) for m in others]
    print(
        "\nreal questions flagged against another real dev question (all rules on; true duplicates "
        "included, see the pairs)"
    )
    print(f"  {'dataset':16} {'part':6}" + "".join(f"{name:>18}" for name in ("any", *RULES)))
    for dataset in ("hotpotqa", "musique", "2wikimultihopqa"):
        cells = "".join(f"{rate(flagged[dataset, name]):>18}" for name in ("any", *RULES))
        print(f"  {dataset:16} {part_of(dataset):6}{cells}")
    total = [f for (d, name), f in flagged.items() if name == "any" for f in f]
    print(f"  {'all':23}{rate(total):>18}")
    seen = set()
    unique = []
    for a, b, m in pairs:
        key = tuple(sorted((a["question_id"], b["question_id"])))
        if key not in seen:
            seen.add(key)
            unique.append((a, b, m))
    print(f"  {len(unique)} distinct flagged pairs" + ("" if show_pairs else " (--pairs prints them)"))
    if show_pairs:
        for a, b, m in sorted(unique, key=lambda x: (x[2].rule, -x[2].score, x[0]["question_id"])):
            same_answer = a["answers"][0].lower() == b["answers"][0].lower()
            print(
                f"  [{m.rule} {m.score:.3f}] {a['question_id']} <-> {b['question_id']}"
                f" (answers {'equal' if same_answer else 'differ'}: "
                f"{a['answers'][0]!r} / {b['answers'][0]!r})"
            )
            print(f"      {a['question'].strip()}\n      {b['question'].strip()}")


def print_cases(setup: Setup) -> None:
    counts = defaultdict(lambda: defaultdict(int))
    for c in setup.cases:
        counts[c.kind][c.origin["dataset"]] += 1
    print(
        f"\ncases built from {len(setup.dev)} real dev records (index) and real questions checked: "
        f"{len(setup.real)} (dev + train samples)"
    )
    print(f"  {'kind':27}" + "".join(f"{d:>17}" for d in ("hotpotqa", "musique", "2wikimultihopqa")))
    for kind in EXACT + SURFACE + REWORDING + CHAIN + NEGATIVES:
        print(
            f"  {kind:27}"
            + "".join(f"{counts[kind][d]:>17}" for d in ("hotpotqa", "musique", "2wikimultihopqa"))
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", action="store_true", help="print every flagged pair of real questions")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"machine: {machine()}")
    setup = Setup()
    print_cases(setup)
    chosen = choose_near_duplicate(setup)
    compare_methods(setup, chosen)
    settings = {k: v for k, v in chosen.items() if k != "scores"}
    settings["same_chain_guard"] = choose_guard(setup, settings)
    recall_per_rule(setup, settings)
    real_false_positives(setup, settings, args.pairs)
    defaults = DecontaminationParams()
    differ = {k: (v, getattr(defaults, k)) for k, v in settings.items() if getattr(defaults, k) != v}
    print(f"\nchosen settings: {settings}")
    where = "factory/params/data_sections.py"
    print(f"the defaults in {where} " + (f"DIFFER: {differ}" if differ else "are these"))
    print(f"time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
