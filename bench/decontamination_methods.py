"""The field's near-duplicate tools beside ours on the same cases (bench/decontamination_rules.py prints the
table): word n-gram overlap (lm-eval-harness 13, open-r1 8), rapidfuzz ratio >= 95 (OpenThoughts), and
rapidfuzz ratio, token_sort_ratio and token_set_ratio and our IDF-weighted Dice at a threshold chosen like
ours (the lowest whose false positives on the choosing part's negatives stay within budget)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from bench.decontamination_cases import REWORDING, SURFACE
from bench.decontamination_setup import (
    CHOOSE,
    ENTITY_NEGATIVES,
    LOOK_ALIKE,
    NearScores,
    Setup,
    lowest_within_budget,
)
from factory.decontamination.chain import titles_key
from factory.decontamination.rows import pool_row


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
