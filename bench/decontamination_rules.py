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
false-positive rate on the choosing part's negatives is at most FP_BUDGET (recall is highest there).

    .venv/bin/python bench/decontamination_rules.py            # everything (about two minutes on 2 cores)
    .venv/bin/python bench/decontamination_rules.py --pairs    # also every flagged real pair
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decontamination_cases import CHAIN, EXACT, NEGATIVES, REWORDING, SURFACE, Case, build_cases  # noqa: E402
from factory.config import DecontaminationParams, Params  # noqa: E402
from factory.decontamination import RULES, EvalIndex, eval_row, pool_row  # noqa: E402
from factory.decontamination.chain import titles_key  # noqa: E402

CORPORA = Path(os.environ.get("FACTORY_CORPORA", ROOT.parent / "shared" / "corpora"))
CHOOSE = ("hotpotqa", "musique")  # the part that chooses the thresholds
HELD = ("2wikimultihopqa",)  # held back: reported, never looked at while choosing
FP_BUDGET = 0.01
RECALL_TOLERANCE = 0.005  # recall differences below this are noise: the stricter setting is kept
GRID = [round(0.5 + 0.025 * i, 3) for i in range(21)]  # 0.5 .. 1.0
ENTITY_NEGATIVES = ("other_entity", "other_entities")  # choose near_duplicate_threshold
# Look-alike names (a distractor "Gerard II" for "Gerard I") read as a typo of the name: reported only
LOOK_ALIKE = ("similar_entity",)


def machine() -> str:
    return f"{platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def real_questions() -> list[dict]:
    """Question rows of every shared sample file (dev and train), as ingest makes them."""
    from factory.corpora.ingest import ingest_sources

    files = {
        "hotpotqa": ["hotpotqa/dev_sample.json", "hotpotqa/train_sample.json"],
        "2wikimultihopqa": ["2wikimultihopqa/dev_sample.json"],
        "musique": ["musique/dev_sample.jsonl", "musique/train_sample.jsonl"],
    }
    params = Params(corpora={d: [str(CORPORA / f) for f in fs] for d, fs in files.items()})
    return ingest_sources(params).questions


def is_dev(question: dict) -> bool:
    return question["source_file"].startswith("dev")


class Setup:
    """The evaluation rows (real dev questions), the question id and title set of each, and the cases."""

    def __init__(self, seed: int = 0):
        self.real = real_questions()
        self.dev = [q for q in self.real if is_dev(q)]
        self.evals = [eval_row(q) for q in self.dev]
        self.qid = {(e["eval_set"], e["eval_id"]): q["question_id"] for e, q in zip(self.evals, self.dev)}
        self.titles = {q["question_id"]: titles_key(e["titles"]) for e, q in zip(self.evals, self.dev)}
        self.cases = build_cases(self.dev, seed)

    def index(self, **settings) -> EvalIndex:
        return EvalIndex(self.evals, DecontaminationParams(**settings))

    def matched(self, index: EvalIndex, rows: list[dict]) -> list[list[tuple]]:
        """Per row: (rule, score, question id, same titles?) of every evaluation question it matches."""
        out = []
        for row, found in zip(rows, index.matches(rows), strict=True):
            own = titles_key(row["titles"])
            out.append(
                [
                    (m.rule, m.score, q, self.titles[q] == own)
                    for m in found
                    for q in [self.qid[m.eval_set, m.eval_id]]
                ]
            )
        return out


def part_of(dataset: str) -> str:
    return "choose" if dataset in CHOOSE else "held"


def rate(flags) -> str:
    flags = list(flags)
    return f"{sum(flags) / len(flags):6.1%} of {len(flags):4d}" if flags else "     - of    0"


# -- near_duplicate: scores and the thresholds chosen on them ------------------------------------------


class NearScores:
    """The near_duplicate score of every case against its record (positives) and the best score against any
    other evaluation question, over the same titles and over other titles (negatives, real questions)."""

    def __init__(self, setup: Setup, typo_ratio: float):
        index = setup.index(
            rules=["near_duplicate"],
            near_duplicate_threshold=0.0,
            near_duplicate_same_titles=0.0,
            candidate_min=0.2,
            max_candidates=10_000,
            typo_ratio=typo_ratio,
        )
        cases = setup.cases
        self.cases = cases
        found = setup.matched(index, [c.row for c in cases])
        self.origin = np.array(
            [
                max([s for _, s, q, _ in f if q == c.origin["question_id"]], default=0.0)
                for c, f in zip(cases, found)
            ]
        )
        # a positive's other matches are no false positives; a negative's match with its record is one
        excludes = [c.exclude | ({c.origin["question_id"]} if c.expected else set()) for c in cases]
        self.same, self.other = _best(found, excludes)
        real_found = setup.matched(index, [pool_row(q) for q in setup.real])
        self.real_same, self.real_other = _best(real_found, [{q["question_id"]} for q in setup.real])

    def mask(self, kinds: tuple[str, ...], part: str | None = None) -> np.ndarray:
        return np.array(
            [c.kind in kinds and (part is None or part_of(c.origin["dataset"]) == part) for c in self.cases]
        )

    def negatives_flagged(self, same_t: float, other_t: float) -> np.ndarray:
        return (self.same >= same_t) | (self.other >= other_t)


def _best(found: list[list[tuple]], excludes: list[set]) -> tuple[np.ndarray, np.ndarray]:
    same = [
        max([s for _, s, q, st in f if q not in ex and st], default=0.0) for f, ex in zip(found, excludes)
    ]
    other = [
        max([s for _, s, q, st in f if q not in ex and not st], default=0.0) for f, ex in zip(found, excludes)
    ]
    return np.array(same), np.array(other)


def lowest_within_budget(false_positive_rate) -> float:
    """The lowest threshold of GRID whose false-positive rate (a function of it) is within budget."""
    return next((t for t in GRID if false_positive_rate(t) <= FP_BUDGET), GRID[-1])


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


# -- the field's tools beside the chosen rule --------------------------------------------------------


def ngrams(norm: str, n: int) -> set[tuple[str, ...]]:
    words = norm.split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class Method:
    """A near-duplicate method: its score of every case against its record, and its best score against the
    non-excluded evaluation questions (split by same/other titles) for negatives and real questions;
    ``fixed``: the tool's own threshold (None: chosen like ours)."""

    name: str
    origin: np.ndarray
    same: np.ndarray
    other: np.ndarray
    real_same: np.ndarray
    real_other: np.ndarray
    fixed: float | None = None


def rapidfuzz_method(setup: Setup, name: str, scorer) -> Method:
    from rapidfuzz import process

    evals = [e["question_norm"] for e in setup.evals]
    qids = [setup.qid[e["eval_set"], e["eval_id"]] for e in setup.evals]
    cases = setup.cases
    origin = np.array([scorer(c.row["question_norm"], c.origin["question_norm"]) / 100 for c in cases])
    rows = [c.row for c in cases] + [pool_row(q) for q in setup.real]
    excludes = [c.exclude | ({c.origin["question_id"]} if c.expected else set()) for c in cases]
    excludes += [{q["question_id"]} for q in setup.real]
    matrix = (
        process.cdist([r["question_norm"] for r in rows], evals, scorer=scorer, workers=-1, dtype=np.float32)
        / 100
    )
    same, other = _split_best(setup, rows, matrix, qids, excludes)
    n = len(cases)
    return Method(name, origin, same[:n], other[:n], same[n:], other[n:])


def ngram_method(setup: Setup, name: str, n: int) -> Method:
    """Flagged (score 1) when the two questions share a word n-gram, as lm-eval-harness (13) and open-r1 (8)
    decontaminate."""
    qids = [setup.qid[e["eval_set"], e["eval_id"]] for e in setup.evals]
    postings = defaultdict(set)
    for j, e in enumerate(setup.evals):
        for g in ngrams(e["question_norm"], n):
            postings[g].add(j)
    cases = setup.cases
    origin = np.array(
        [float(bool(ngrams(c.row["question_norm"], n) & ngrams(c.origin["question_norm"], n))) for c in cases]
    )
    rows = [c.row for c in cases] + [pool_row(q) for q in setup.real]
    excludes = [c.exclude | ({c.origin["question_id"]} if c.expected else set()) for c in cases]
    excludes += [{q["question_id"]} for q in setup.real]
    matrix = np.zeros((len(rows), len(qids)), dtype=np.float32)
    for i, r in enumerate(rows):
        for g in ngrams(r["question_norm"], n):
            matrix[i, list(postings.get(g, ()))] = 1.0
    same, other = _split_best(setup, rows, matrix, qids, excludes)
    k = len(cases)
    return Method(name, origin, same[:k], other[:k], same[k:], other[k:], fixed=1.0)


def _split_best(setup: Setup, rows, matrix, qids, excludes) -> tuple[np.ndarray, np.ndarray]:
    eval_titles = [setup.titles[q] for q in qids]
    position = {q: j for j, q in enumerate(qids)}
    same, other = np.zeros(len(rows)), np.zeros(len(rows))
    for i, r in enumerate(rows):
        scores = matrix[i].copy()
        for q in excludes[i]:
            if q in position:
                scores[position[q]] = -1
        own = titles_key(r["titles"])
        is_same = np.array([bool(own) and t == own for t in eval_titles])
        same[i] = scores[is_same].max(initial=0.0)
        other[i] = scores[~is_same].max(initial=0.0)
    return same, other


def compare_methods(setup: Setup, chosen: dict) -> None:
    """Every method at the threshold chosen for it on the choosing part (the field's tools at their own),
    recall and false positives on both parts."""
    from rapidfuzz import fuzz

    ours: NearScores = chosen["scores"]
    methods = [
        ngram_method(setup, "13-gram overlap (lm-eval-harness)", 13),
        ngram_method(setup, "8-gram overlap (open-r1)", 8),
        rapidfuzz_method(setup, "rapidfuzz ratio", fuzz.ratio),
        rapidfuzz_method(setup, "rapidfuzz token_sort_ratio", fuzz.token_sort_ratio),
        rapidfuzz_method(setup, "rapidfuzz token_set_ratio", fuzz.token_set_ratio),
        Method(
            "IDF-weighted Dice, one threshold",
            ours.origin,
            ours.same,
            ours.other,
            ours.real_same,
            ours.real_other,
        ),
    ]
    methods.insert(2, replace(methods[2], name="rapidfuzz ratio >= 95 (OpenThoughts)", fixed=0.95))
    print(
        "\nnear_duplicate methods: recall of edits (surface | rewording) and false positives; one threshold "
        f"chosen on {' + '.join(CHOOSE)} as above unless fixed by the tool"
    )
    header = (
        f"  {'method':38} {'threshold':>14}  {'recall choose':>15} {'recall held':>15}  "
        f"{'FP choose':>9} {'FP held':>9} {'look-alike':>10} {'real FP':>7}"
    )
    print(header)
    for m in methods:
        thresholds = (m.fixed, m.fixed) if m.fixed else _one_threshold(ours, m)
        _method_row(ours, m, *thresholds)
    m = Method(
        "IDF-weighted Dice, title-aware (chosen)",
        ours.origin,
        ours.same,
        ours.other,
        ours.real_same,
        ours.real_other,
    )
    _method_row(ours, m, chosen["near_duplicate_same_titles"], chosen["near_duplicate_threshold"])
    print(
        "  recall: of surface edits | of rewordings; FP: templated other-entity and same-entities-other-"
        "question negatives flagged; look-alike: similar_entity negatives (both parts); real FP: real "
        "questions flagged against another real dev question (true duplicates included)"
    )


def _one_threshold(ours: NearScores, m: Method) -> tuple[float, float]:
    negatives = ours.mask(ENTITY_NEGATIVES + ("other_question_same_chain",), "choose")
    t = lowest_within_budget(lambda t: np.mean(((m.same >= t) | (m.other >= t))[negatives]))
    return t, t


def _method_row(ours: NearScores, m: Method, same_t: float, other_t: float) -> None:
    cells = []
    for part in ("choose", "held"):
        surface, rewording = ours.mask(SURFACE, part), ours.mask(REWORDING, part)
        cells.append(
            f"{np.mean(m.origin[surface] >= same_t):6.1%} | {np.mean(m.origin[rewording] >= same_t):6.1%}"
        )
    flagged = (m.same >= same_t) | (m.other >= other_t)
    fps = [
        f"{np.mean(flagged[ours.mask(ENTITY_NEGATIVES + ('other_question_same_chain',), part)]):9.1%}"
        for part in ("choose", "held")
    ]
    look_alike = f"{np.mean(flagged[ours.mask(LOOK_ALIKE)]):10.1%}"
    real = f"{np.mean((m.real_same >= same_t) | (m.real_other >= other_t)):7.1%}"
    shown = f"{other_t:.3f}" if same_t == other_t else f"{same_t:.3f}/{other_t:.3f}"
    print(f"  {m.name:38} {shown:>14}  {cells[0]:>15} {cells[1]:>15}  {fps[0]} {fps[1]} {look_alike} {real}")


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
        "entity from)"
    )


def _hit(case: Case, found: list[tuple]) -> bool:
    if case.expected is None:
        return any(q not in case.exclude for _, _, q, _ in found)
    return any(q == case.origin["question_id"] for _, _, q, _ in found)


def _pct(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):6.1%}" if flags else "     -"


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
    print("the defaults in factory/config.py " + (f"DIFFER: {differ}" if differ else "are these"))
    print(f"time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
