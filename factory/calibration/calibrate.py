"""The labeller on real LLM noise: every method of ``methods`` scored on real graphs (``graphs``) against
their gold supporting paragraphs (``scores``), overall and per dataset, with paired differences to S_q
and a verdict in words: does S_q beat the KnowTrace authors' rule beyond the 95% CI, and do its
precision and recall reach the review's bar?

``calibrate`` returns what metrics/calibration.json holds (``"all"`` and each dataset: one entry per
method, each with precision, recall, f1, coverage, n, covered and CIs; ``differences`` and ``verdicts``
by group) and one row per question (its gold paragraphs, each method's predicted paragraphs, S_q's and
the authors' rule's kept triplets), which the audit page's real-graph cards read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from factory.calibration.graphs import Graphs, gold_pids
from factory.calibration.methods import method_names, select_on_graph
from factory.calibration.scores import per_question, score_group
from factory.params.label_sections import BacktraceParams, CalibrationParams, RelevanceParams
from factory.utils.seeds import seed_series
from factory.utils.selection import AUTHORS_RULE, BACKTRACE
from factory.utils.templates import fixed

ALL = "all"
# whose kept triplets a question's row lists (the audit cards draw them)
KEPT_IN_ROWS = (BACKTRACE, AUTHORS_RULE)


def calibrate(
    graphs: Graphs,
    backtrace: BacktraceParams,
    relevance: RelevanceParams,
    embedder=None,
    calibration: CalibrationParams | None = None,
) -> tuple[dict, list[dict]]:
    """(metrics/calibration.json, the per-question rows) for ``graphs``; see the module docstring.
    ``calibration``: its ``min_questions`` (None: the defaults)."""
    min_questions = (calibration or CalibrationParams()).min_questions
    methods = method_names(backtrace)
    seeds = seed_series(relevance.seed, relevance.random_seeds)
    rows = [_question_row(record, backtrace, seeds, methods, embedder) for record in graphs.records]
    result: dict = {
        "status": "ok" if rows else "no_graphs",
        "missing": graphs.missing,
        "records": len(rows),
        "extractors": sorted({r.get("extractor") or "extractor not recorded" for r in graphs.records}),
        "left_out": graphs.problems,
        "params": {
            "mode": backtrace.mode,
            "modes": list(backtrace.modes),
            "target": "the gold answer (these graphs have no model answer)",
            "bootstrap_samples": relevance.bootstrap_samples,
            "random_seeds": relevance.random_seeds,
            "seed": relevance.seed,
            "bar": relevance.bar,
            "min_questions": min_questions,
        },
        "methods": methods,
        "default_method": BACKTRACE,
        "differences": {},
        "verdicts": {},
    }
    groups = {
        ALL: rows,
        **{d: [r for r in rows if r["dataset"] == d] for d in sorted({r["dataset"] for r in rows})},
    }
    for group, members in groups.items():
        values = {m: np.array([r["values"][m] for r in members]).reshape(-1, 3) for m in methods}
        scores, differences = score_group(
            values, BACKTRACE, samples=relevance.bootstrap_samples, seed=relevance.seed, group=group
        )
        result[group] = scores
        result["differences"][group] = differences
        result["verdicts"][group] = verdict(group, scores, differences, relevance.bar, min_questions)
    for row in rows:
        row["values"] = {m: _plain(v) for m, v in row["values"].items()}
    return result, rows


def _question_row(record, backtrace: BacktraceParams, seeds: Sequence[int], methods, embedder) -> dict:
    trajectory, kept, sq_row = select_on_graph(record, backtrace, seeds, embedder)
    source = {t["triplet_id"]: t["source_pid"] for t in trajectory["triplets"]}
    gold = gold_pids(record)
    predicted = {m: [{source[t] for t in s} for s in kept[m]] for m in methods}
    return {
        "question_id": record["question_id"],
        "dataset": record["dataset"],
        "type": record.get("type") or "",
        "gold": sorted(gold),
        "predicted": {m: sorted(predicted[m][0]) for m in methods},
        "kept": {m: sorted(kept[m][0]) for m in KEPT_IN_ROWS},
        "initial_entities": sq_row["initial_entities"],  # why S_q kept what it did: where its paths start
        "target_entities": sq_row["target_entities"],  # and where they end
        "values": {m: per_question(predicted[m], gold) for m in methods},
    }


def _plain(values: tuple[float, float, float]) -> dict:
    covered, precision, recall = values
    return {"covered": covered, "precision": None if np.isnan(precision) else precision, "recall": recall}


def verdict(group: str, scores: dict, differences: dict, bar: float, min_questions: int = 1) -> dict:
    """Does S_q beat the authors' rule (the paired F1 difference's CI above 0), and reach the bar (its
    precision and recall at least ``bar``)? One line in words, for the report and the log; a group of
    fewer than ``min_questions`` questions gets no verdict ("cannot tell", with its count)."""
    if not scores or scores[BACKTRACE]["n"] == 0:
        return {
            "beats_authors_rule": None,
            "reaches_bar": None,
            "line": f"{group}: no graph to calibrate on.",
        }
    sq, authors = scores[BACKTRACE], scores[AUTHORS_RULE]
    diff = differences[AUTHORS_RULE]["f1"]
    lo, hi = diff["ci"]
    beats = True if lo is not None and lo > 0 else False if hi is not None and hi < 0 else None
    p, r = sq["precision"], sq["recall"]
    reaches = p is not None and p >= bar and r is not None and r >= bar
    outcome = {True: "beats it", False: "is beaten by it", None: "cannot be told apart from it"}[beats]
    difference = f"{_signed(diff['value'])} {_signed_ci(diff['ci'])}"
    if sq["n"] < min_questions:
        line = (
            f"{group} ({sq['n']} questions): cannot tell: a verdict needs at least {min_questions} questions "
            f"(calibration.min_questions); S_q's paragraph F1 {fixed(sq['f1'])} against the KnowTrace "
            f"authors' rule's {fixed(authors['f1'])} (paired difference {difference}), precision {fixed(p)}, "
            f"recall {fixed(r)}."
        )
        return {"beats_authors_rule": None, "reaches_bar": None, "line": line}
    line = (
        f"{group} ({sq['n']} questions): S_q's paragraph F1 {fixed(sq['f1'])} {_ci(sq['ci']['f1'])} against "
        f"the KnowTrace authors' rule's {fixed(authors['f1'])} {_ci(authors['ci']['f1'])}: S_q {outcome} "
        f"(paired difference {difference}); its precision {fixed(p)} and recall {fixed(r)} "
        f"{'reach' if reaches else 'do not reach'} the review's {bar:g} bar (a path for "
        f"{fixed(sq['coverage'])} of the questions)."
    )
    return {"beats_authors_rule": beats, "reaches_bar": reaches, "line": line}


def _ci(ci: list) -> str:
    return "[n/a]" if ci[0] is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _signed_ci(ci: list) -> str:
    return "[n/a]" if ci[0] is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"
