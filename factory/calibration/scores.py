"""Paragraph-level scores of kept sets against the gold supporting paragraphs, question by question.

A method's predicted paragraphs for a question are the passages its kept triplets were extracted from.
Per question: *covered* when it predicts any paragraph; precision |predicted & gold| / |predicted|
(covered questions only); recall |predicted & gold| / |gold| (0 when nothing is predicted). Over a set
of questions: coverage = the share covered, precision = the mean over the covered questions, recall =
the mean over all of them, F1 = the harmonic mean of that precision and recall. The random control's
per-question values are means over its seeds. 95% CIs: percentile bootstrap over the questions; a
difference between two methods is computed on the same resamples (paired), from the stream
``CALIBRATION`` of ``factory.utils.stats`` (seeded by ``relevance.seed`` and the group's name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from factory.utils.stats import interval, nanmean, number, resample_indices, seeded_rng

CALIBRATION = "calibration"
METRICS = ("precision", "recall", "f1", "coverage")


def per_question(predicted: Sequence[set[str]], gold: set[str]) -> tuple[float, float, float]:
    """(covered, precision, recall) of one question, each a mean over the seeds' predicted sets
    (precision over the seeds that predict anything; NaN when none does)."""
    covered = [bool(p) for p in predicted]
    precision = [len(p & gold) / len(p) for p in predicted if p]
    recall = [len(p & gold) / len(gold) if gold else 0.0 for p in predicted]
    return (
        float(np.mean(covered)),
        float(np.mean(precision)) if precision else float("nan"),
        float(np.mean(recall)),
    )


def _aggregate(cov: np.ndarray, prec: np.ndarray, rec: np.ndarray) -> dict[str, np.ndarray]:
    """Scores over the last axis (questions): arrays of per-question values, one row per resample."""
    p, r = nanmean(prec, -1), rec.mean(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(
            p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1.0), np.where(np.isnan(p), np.nan, 0.0)
        )
    return {"precision": p, "recall": r, "f1": f1, "coverage": cov.mean(-1)}


def score_group(
    values: Mapping[str, np.ndarray], default: str, *, samples: int, seed: int, group: str
) -> tuple[dict[str, dict], dict[str, dict]]:
    """``values``: method -> questions x 3 array of (covered, precision, recall). Returns each method's
    scores {precision, recall, f1, coverage, n, covered, ci} and each other method's paired differences
    to ``default`` ({metric: {value, ci}}: default minus other)."""
    n = len(next(iter(values.values()))) if values else 0
    if n == 0:
        empty = {m: {"n": 0, "covered": 0, **dict.fromkeys(METRICS), "ci": {k: [None, None] for k in METRICS}}
                 for m in values}  # fmt: skip
        return empty, {}
    idx = resample_indices(n, samples, seeded_rng(CALIBRATION, seed, group))
    point, boot, scores = {}, {}, {}
    for method, v in values.items():
        cov, prec, rec = v[:, 0], v[:, 1], v[:, 2]
        point[method] = {k: float(x) for k, x in _aggregate(cov, prec, rec).items()}
        boot[method] = _aggregate(cov[idx], prec[idx], rec[idx])
        scores[method] = {
            **{k: number(point[method][k]) for k in METRICS},
            "n": n,
            "covered": int(np.sum(cov > 0)),
            "ci": {k: interval(boot[method][k]) for k in METRICS},
        }
    differences = {
        other: {
            k: {
                "value": number(point[default][k] - point[other][k]),
                "ci": interval(boot[default][k] - boot[other][k]),
            }
            for k in ("f1", "precision", "recall")
        }
        for other in values
        if other != default
    }
    return scores, differences
