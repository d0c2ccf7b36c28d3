"""Backtraced relevance labels checked against the corpora's gold supporting facts (docs/design.md §4).

For every evaluated trajectory (correct ones only: they are what gets trained on):

- every triplet is grounded (its recorded ``source_pid``/``source_sentence`` when present, else
  ``ground_triplet`` against its step's retrieved passages); ungrounded triplets are never relevant;
- gold relevance: paragraph level = the grounding passage is a gold supporting paragraph
  (``question.supporting[].pid``); sentence level = the grounding (passage, sentence) is a supporting
  fact (HotpotQA / 2Wiki; MuSiQue only has paragraph-level support, so it has no sentence level);
- kept sets compared with the gold-relevant set: S_q for every mode x target mode in the labels, and
  the controls ``unfiltered`` (every triplet), ``answer_entity`` (triplets whose normalised subject or
  object contains a normalised gold or predicted answer as whole words), ``random`` (|S_q| triplets of the
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

from factory.params.label_sections import RelevanceParams
from factory.relevance.grounded import Evaluated, prepare
from factory.relevance.scores import evaluate, summarize_counts, verdicts
from factory.utils.errors import FactoryError
from factory.utils.seeds import seed_series
from factory.utils.selection import ANSWER_ENTITY, AUTHORS_RULE, RANDOM, UNFILTERED, backtrace_method


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
    params: RelevanceParams,
    *,
    default_combo: tuple[str, str],
    threshold: float,
    entailment: Mapping[tuple[str, str], bool | None] | None = None,
) -> dict:
    """Relevance of the backtraced labels vs gold supporting facts over all sources (see module doc).
    ``params``: the bootstrap, random control and verdict bar (``relevance`` in params.yaml);
    ``default_combo``: the supervision set's (backtrace.mode, backtrace.target_mode); ``threshold``: the
    grounding threshold of triplets without a recorded grounding (agent.grounding_threshold);
    ``entailment``: the judge's verdicts by (trajectory id, triplet id); with it the review's definition
    (``ENTAILED`` level: gold paragraph and entailed) is scored too.

    Only correct trajectories are scored; identical trajectories from several sources count once; a
    trajectory without labels for every mode x target mode (those common to all sources) is left out and
    counted. S_q methods: those common combos; random control matched to ``default_combo`` (or the first
    common combo when the labels lack it).
    """
    combos = sorted(set.intersection(*[s.label_combos() for s in sources])) if sources else []
    head = {"sources": [s.name for s in sources], "params": _recorded(params, threshold)}
    if not combos:
        total = sum(len(s.trajectories) for s in sources)
        status = "no_labels" if total else "no_trajectories"
        return {**head, "status": status, "counts": {"trajectories": total}, "groups": {}, "verdicts": {}}
    default = default_combo if default_combo in combos else combos[0]
    scoring = _Scoring(questions_by_id, passages_by_pid, combos, default, params, threshold, entailment)
    items = [item for src in sources for item in scoring.items(src)]
    counts = {
        k: scoring.counts[k] for k in ("trajectories", "correct", "duplicates_dropped", "missing_labels")
    }
    head.update(
        combos=[list(c) for c in combos], default=list(default), counts={**counts, **summarize_counts(items)}
    )
    if not items:
        status = "no_correct_trajectories" if counts["trajectories"] else "no_trajectories"
        return {**head, "status": status, "groups": {}, "verdicts": {}}
    methods = [backtrace_method(*c) for c in combos] + [UNFILTERED, ANSWER_ENTITY, RANDOM, AUTHORS_RULE]
    default_method = backtrace_method(*default)
    results = evaluate(
        items, methods, default_method, bootstrap_samples=params.bootstrap_samples, seed=params.seed
    )
    return {
        **head,
        "status": "ok",
        "methods": methods,
        "default_method": default_method,
        "groups": results,
        "verdicts": verdicts(results, default_method, params.bar),
    }


def _recorded(params: RelevanceParams, threshold: float) -> dict:
    """The parameters of the check as the result records them."""
    return {
        "threshold": threshold,
        "bootstrap_samples": params.bootstrap_samples,
        "random_seeds": params.random_seeds,
        "seed": params.seed,
        "bar": params.bar,
    }


class _Scoring:
    """The trajectories scored, source by source: correct, seen once, with labels for every combo; the
    ``counts`` of those read, correct, dropped as duplicates and missing labels."""

    def __init__(
        self,
        questions_by_id: Mapping[str, Mapping],
        passages_by_pid: Mapping[str, Mapping],
        combos: list[tuple[str, str]],
        default: tuple[str, str],
        params: RelevanceParams,
        threshold: float,
        entailment: Mapping[tuple[str, str], bool | None] | None,
    ):
        self.questions_by_id, self.passages_by_pid = questions_by_id, passages_by_pid
        self.combos, self.default, self.threshold, self.entailment = combos, default, threshold, entailment
        self.seeds = seed_series(params.seed, params.random_seeds)
        self.counts: Counter = Counter()
        self.seen: set[tuple] = set()

    def items(self, src: Source) -> list[Evaluated]:
        """The scored trajectories of one source, grounded, with every method's kept set."""
        rows_by_tid: dict[str, list[Mapping]] = {}
        for r in src.labels:
            if (r["mode"], r["target_mode"]) in self.combos:
                rows_by_tid.setdefault(r["trajectory_id"], []).append(r)
        out = []
        for t in src.trajectories:
            rows = self._scored_rows(t, rows_by_tid)
            if rows is not None:
                out.append(self._item(t, rows, src.name))
        return out

    def _scored_rows(self, t: Mapping, rows_by_tid: dict[str, list[Mapping]]) -> list[Mapping] | None:
        """The trajectory's label rows when it is scored (counted either way); None when it is not."""
        counts = self.counts
        counts["trajectories"] += 1
        if not t.get("correct"):
            return None
        counts["correct"] += 1
        key = content_key(t)
        if key in self.seen:
            counts["duplicates_dropped"] += 1
            return None
        self.seen.add(key)
        rows = rows_by_tid.get(t["trajectory_id"], [])
        if {(r["mode"], r["target_mode"]) for r in rows} != set(self.combos):
            counts["missing_labels"] += 1
            return None
        return rows

    def _item(self, t: Mapping, rows: list[Mapping], source: str) -> Evaluated:
        question = self.questions_by_id.get(t["question_id"])
        if question is None:
            raise FactoryError(
                f"trajectory {t['trajectory_id']!r}: question {t['question_id']!r} is not in "
                "questions.parquet"
            )
        entailed = None
        if self.entailment is not None:
            tid = t["trajectory_id"]
            entailed = {
                x["triplet_id"]: self.entailment.get((tid, x["triplet_id"])) for x in t.get("triplets") or []
            }
        return prepare(
            t,
            rows,
            question,
            self.passages_by_pid,
            threshold=self.threshold,
            combos=self.combos,
            default=self.default,
            random_seeds=self.seeds,
            source=source,
            entailed=entailed,
        )
