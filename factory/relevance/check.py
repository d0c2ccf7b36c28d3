"""Backtraced relevance labels checked against the corpora's gold supporting facts (docs/design.md §4).

For every evaluated trajectory (correct ones only: they are what gets trained on):

- every triplet is grounded (its recorded ``source_pid``/``source_sentence`` when present, else
  ``ground_triplet`` against its step's retrieved passages); ungrounded triplets are never relevant;
- gold relevance: paragraph level = the grounding passage is a gold supporting paragraph
  (``question.supporting[].pid``); sentence level = the grounding (passage, sentence) is a supporting
  fact (HotpotQA / 2Wiki; MuSiQue only has paragraph-level support, so it has no sentence level);
- kept sets compared with the gold-relevant set: S_q for every mode x target mode in the labels, and
  the controls ``keep_all``, ``answer_entity`` (triplets whose normalised subject or object contains a
  normalised gold or predicted answer as whole words), ``random_matched`` (|S_q| triplets of the
  default mode/target drawn uniformly, averaged over ``random_seeds`` seeds) and ``authors_rule`` (the
  KnowTrace authors' published rule on the same trajectory, ``factory.backtrace.authors_rule``: what
  the method without this project's linking would have kept);
- precision, recall, F1: micro over triplets (sums) and macro over trajectories (mean of per-trajectory
  values; a trajectory's precision is undefined when it keeps nothing, its recall when nothing of it is
  relevant, its F1 = 2tp / (kept + relevant) when either is non-zero; undefined values are left out of
  the mean), with 95% percentile bootstrap CIs over resampled trajectories (the same resamples for every
  method of a group, so differences are paired);
- extras per method: supporting-paragraph recall (gold paragraphs grounding >= 1 kept triplet),
  ungrounded rate of the kept triplets, mean kept size; per S_q the share of trajectories with no path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from factory.errors import FactoryError
from factory.relevance.grounded import (
    ANSWER_ENTITY,
    AUTHORS,
    KEEP_ALL,
    RANDOM,
    Evaluated,
    prepare,
    sq_method,
)
from factory.relevance.scores import evaluate, summarize_counts, verdicts

# ---------------------------------------------------------------- per trajectory
















# ---------------------------------------------------------------- per-trajectory counts
















# ---------------------------------------------------------------- the whole check


@dataclass
class Source:
    """One round of one chain: its trajectories and backtrace labels."""

    name: str  # e.g. backtrace/seed_0/round_1
    trajectories: list[dict]
    labels: list[dict]
    # the (mode, target mode) pairs of all the round's labels, when ``labels`` holds only some of them
    # (the stage reads the correct trajectories' labels alone); None: those of ``labels``
    combos: set[tuple[str, str]] | None = None

    def label_combos(self) -> set[tuple[str, str]]:
        if self.combos is not None:
            return set(self.combos)
        return {(r["mode"], r["target_mode"]) for r in self.labels}


def content_key(t: Mapping) -> tuple:
    """Identical trajectories (e.g. every variant's round 1 from the same base policy) count once."""
    return (
        t["question_id"],
        t.get("answer"),
        tuple(s.get("output") for s in t.get("steps") or []),
        tuple((x["subject"], x["relation"], x["object"]) for x in t.get("triplets") or []),
    )


def check_relevance(
    sources: Sequence[Source],
    questions_by_id: Mapping[str, Mapping],
    passages_by_pid: Mapping[str, Mapping],
    *,
    default_combo: tuple[str, str],
    threshold: float = 0.5,
    bootstrap_samples: int = 1000,
    random_seeds: int = 5,
    seed: int = 23,
    bar: float = 0.8,
    entailment: Mapping[tuple[str, str], bool | None] | None = None,
) -> dict:
    """Relevance of the backtraced labels vs gold supporting facts over all sources (see module doc).
    ``entailment``: the judge's verdicts by (trajectory id, triplet id); with it the review's definition
    (``ENTAILED`` level: gold paragraph and entailed) is scored too.

    Only correct trajectories are scored; identical trajectories from several sources count once; a
    trajectory without labels for every mode x target mode (those common to all sources) is left out and
    counted. S_q methods: those common combos; random control matched to ``default_combo`` (or the first
    common combo when the labels lack it).
    """
    counts: Counter = Counter()
    combo_sets = []
    for src in sources:
        combo_sets.append(src.label_combos())
    combos = sorted(set.intersection(*combo_sets)) if combo_sets else []
    head = {
        "sources": [s.name for s in sources],
        "params": {
            "threshold": threshold,
            "bootstrap_samples": bootstrap_samples,
            "random_seeds": random_seeds,
            "seed": seed,
            "bar": bar,
        },
    }
    if not combos:
        total = sum(len(s.trajectories) for s in sources)
        return {
            **head,
            "status": "no_labels" if total else "no_trajectories",
            "counts": {"trajectories": total},
            "groups": {},
            "verdicts": {},
        }
    default = default_combo if default_combo in combos else combos[0]
    seeds = [seed + k for k in range(random_seeds)]
    items: list[Evaluated] = []
    seen: set[tuple] = set()
    for src in sources:
        rows_by_tid: dict[str, list[Mapping]] = {}
        for r in src.labels:
            if (r["mode"], r["target_mode"]) in combos:
                rows_by_tid.setdefault(r["trajectory_id"], []).append(r)
        for t in src.trajectories:
            counts["trajectories"] += 1
            if not t.get("correct"):
                continue
            counts["correct"] += 1
            key = content_key(t)
            if key in seen:
                counts["duplicates_dropped"] += 1
                continue
            seen.add(key)
            rows = rows_by_tid.get(t["trajectory_id"], [])
            if {(r["mode"], r["target_mode"]) for r in rows} != set(combos):
                counts["missing_labels"] += 1
                continue
            question = questions_by_id.get(t["question_id"])
            if question is None:
                raise FactoryError(
                    f"trajectory {t['trajectory_id']!r}: question {t['question_id']!r} is not in "
                    "questions.parquet"
                )
            items.append(
                prepare(
                    t,
                    rows,
                    question,
                    passages_by_pid,
                    threshold=threshold,
                    combos=combos,
                    default=default,
                    random_seeds=seeds,
                    source=src.name,
                    entailed=None
                    if entailment is None
                    else {
                        x["triplet_id"]: entailment.get((t["trajectory_id"], x["triplet_id"]))
                        for x in t.get("triplets") or []
                    },
                )
            )
    head.update(
        combos=[list(c) for c in combos],
        default=list(default),
        counts={
            **{k: counts[k] for k in ("trajectories", "correct", "duplicates_dropped", "missing_labels")},
            **summarize_counts(items),
        },
    )
    if not items:
        return {
            **head,
            "status": "no_correct_trajectories" if counts["trajectories"] else "no_trajectories",
            "groups": {},
            "verdicts": {},
        }
    methods = [sq_method(*c) for c in combos] + [KEEP_ALL, ANSWER_ENTITY, RANDOM, AUTHORS]
    default_method = sq_method(*default)
    results = evaluate(items, methods, default_method, bootstrap_samples=bootstrap_samples, seed=seed)
    return {
        **head,
        "status": "ok",
        "methods": methods,
        "default_method": default_method,
        "groups": results,
        "verdicts": verdicts(results, default_method, bar),
    }
