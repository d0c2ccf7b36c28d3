"""What the decontamination benches share: the real questions of the shared samples, the index over their
dev questions with the cases built from them (``Setup``), the near-duplicate scores of every case and real
question (``NearScores``), the parts of the data and the budget thresholds are chosen by."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from bench.common import corpora_files
from bench.decontamination_cases import build_cases
from factory.decontamination.chain import titles_key
from factory.decontamination.index import EvalIndex
from factory.decontamination.rows import eval_row, pool_row
from factory.params.config import Params
from factory.params.data_sections import DecontaminationParams

ROOT = Path(__file__).resolve().parents[1]
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

    params = Params(corpora=corpora_files(CORPORA))
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
    """'choose' (its data chose the thresholds) or 'held' (held back, reported)."""
    if dataset not in CHOOSE + HELD:
        raise ValueError(f"{dataset} is in neither part: add it to CHOOSE or HELD")
    return "choose" if dataset in CHOOSE else "held"


def rate(flags) -> str:
    flags = list(flags)
    return f"{sum(flags) / len(flags):6.1%} of {len(flags):4d}" if flags else "     - of    0"


def _pct(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):6.1%}" if flags else "     -"


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
