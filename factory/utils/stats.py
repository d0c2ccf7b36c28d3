"""Percentile bootstrap statistics: every 95% CI of the project is drawn here.

Two kinds of resamples, one way to draw them (``seeded_rng`` -> ``resample_indices``):

- **trajectories** (the relevance check, the causal check): a resample is a vector of how often each
  trajectory occurs (``bootstrap_weights``), so every sum over all resamples of all methods of a group is
  ONE matrix product and thousands of resamples stay cheap. ``score`` gives micro/macro precision, recall
  and F1 of kept sets vs relevant sets from per-trajectory counts: ``tp`` and ``kept`` (seeds x
  trajectories; one row for deterministic methods, one per seed for the random control) and ``rel``
  (trajectories). Micro scores are ratios of sums; macro scores are means of per-trajectory ratios over the
  trajectories where the ratio is defined (precision needs kept > 0, recall relevant > 0, F1 = 2tp / (kept
  + relevant) needs either). Seeds are averaged after scoring. Two methods scored on the same resamples
  are compared by ``score_difference``.
- **questions** (the stopping rule, the report's variant verdicts): ``paired_difference`` of two
  policies' per-question scores (EM 0/1) on the same questions. The pairing is what makes the interval
  narrow enough to be useful: the per-question differences of two similar policies are mostly 0.

Each family draws from its own named stream (``TRAJECTORIES``, ``QUESTIONS``): a generator per (stream,
seed, names), so an interval does not depend on the order groups are scored in or on what else was
computed before it. The stream names are part of the numbers (they seed the generators), which is why
they keep the names of the two modules they come from.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from factory.utils.seeds import stream_seed

METRICS = ("precision", "recall", "f1")

TRAJECTORIES = "relevance-bootstrap"  # the stream of the relevance and causal checks' resamples
QUESTIONS = "paired"  # the stream of the paired per-question differences

# Differences of EM means are multiples of 1/n; a float tolerance keeps 0.15 - 0.10 (0.0499999...)
# equal to a min_delta of 0.05.
TOLERANCE = 1e-9


# ---------------------------------------------------------------- numbers and intervals


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (undefined)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def number(x: float | None) -> float | None:
    """JSON-safe float (NaN/inf -> None)."""
    return None if x is None or not np.isfinite(x) else float(x)


def mean_over_seeds(per_seed: Sequence[float]) -> float | None:
    return number(nanmean(np.asarray(per_seed, dtype=float), 0)) if len(per_seed) else None


def interval(boot: np.ndarray) -> list[float | None]:
    """95% percentile interval of the finite bootstrap values ([None, None] when there are none)."""
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return [None, None]
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return [float(lo), float(hi)]


# ---------------------------------------------------------------- resamples


def seeded_rng(stream: str, seed: int, *names: object) -> np.random.Generator:
    """A generator per (stream, seed, names): results do not depend on the order they are computed in."""
    return np.random.default_rng(stream_seed(stream, seed, *names))


def resample_indices(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """samples x n indices of n items drawn with replacement."""
    return rng.integers(0, n, size=(samples, n))


def bootstrap_weights(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """samples x n occurrence counts of n trajectories in resamples drawn with replacement."""
    idx = resample_indices(n, samples, rng)
    return (
        np.bincount((np.arange(samples)[:, None] * n + idx).ravel(), minlength=samples * n)
        .reshape(samples, n)
        .astype(float)
    )


# ---------------------------------------------------------------- paired per-question differences


def paired_difference(
    a: Mapping[Hashable, float],
    b: Mapping[Hashable, float],
    *,
    samples: int,
    seed: int,
    names: tuple = (),
) -> dict:
    """Mean of a[k] - b[k] over the keys both have, and its 95% paired bootstrap interval (the questions
    resampled, stream ``QUESTIONS``). Returns {"n", "difference", "ci": [lo, hi]}; with no shared key,
    difference and ci are None."""
    keys = sorted(set(a) & set(b), key=repr)
    if not keys:
        return {"n": 0, "difference": None, "ci": [None, None]}
    diffs = np.array([float(a[k]) - float(b[k]) for k in keys])
    idx = resample_indices(len(diffs), samples, seeded_rng(QUESTIONS, seed, *names))
    return {"n": len(keys), "difference": float(diffs.mean()), "ci": interval(diffs[idx].mean(axis=1))}


def scores_digest(scores: Mapping[Hashable, float]) -> str:
    """Short identity of a per-question score vector (decisions record it, so any change shows)."""
    h = hashlib.sha256()
    for key in sorted(scores, key=repr):
        h.update(f"{key}\t{float(scores[key])!r}\n".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- P/R/F1 over resampled trajectories


def _rows(tp: np.ndarray, kept: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Everything a score sums, stacked: tp, kept, rel, then (value, defined) of per-trajectory P, R, F1."""
    parts = [tp, kept, rel[None, :]]
    for per_trajectory in (ratio(tp, kept), ratio(tp, rel[None, :]), ratio(2 * tp, kept + rel[None, :])):
        defined = np.isfinite(per_trajectory)
        parts += [np.where(defined, per_trajectory, 0.0), defined.astype(float)]
    return np.vstack(parts)


def _decode(sums: np.ndarray, seeds: int) -> dict[str, np.ndarray]:
    s = seeds
    TP, K, R = sums[:s], sums[s : 2 * s], sums[2 * s]
    block = [sums[2 * s + 1 + k * s : 2 * s + 1 + (k + 1) * s] for k in range(6)]
    return {
        "micro_precision": ratio(TP, K),
        "micro_recall": ratio(TP, R),
        "micro_f1": ratio(2 * TP, K + R),
        "macro_precision": ratio(block[0], block[1]),
        "macro_recall": ratio(block[2], block[3]),
        "macro_f1": ratio(block[4], block[5]),
    }


def score(
    counts: Mapping[str, tuple[np.ndarray, np.ndarray]],
    rel: np.ndarray,
    members: np.ndarray,
    weights: np.ndarray,
) -> tuple[dict[str, dict], dict[str, dict[str, np.ndarray]]]:
    """Scores of every method over the ``members`` columns: {method: {kept, relevant, micro, macro}} with
    values and CIs, and the bootstrap distributions (for ``score_difference`` between methods)."""
    r = rel[members]
    blocks, spans = [], {}
    for m, (tp, kept) in counts.items():
        rows = _rows(tp[:, members], kept[:, members], r)
        spans[m] = (sum(b.shape[0] for b in blocks), rows.shape[0], tp.shape[0])
        blocks.append(rows)
    stacked = np.vstack(blocks)
    point_sums, boot_sums = stacked.sum(-1), stacked @ weights.T  # one product for all methods
    scores, boots = {}, {}
    for m, (start, size, seeds) in spans.items():
        point = {k: nanmean(v, 0) for k, v in _decode(point_sums[start : start + size], seeds).items()}
        boots[m] = {k: nanmean(v, 0) for k, v in _decode(boot_sums[start : start + size], seeds).items()}
        res: dict = {"kept": float(counts[m][1][:, members].sum(-1).mean()), "relevant": float(r.sum())}
        for scope in ("micro", "macro"):
            res[scope] = {
                name: {"value": number(point[f"{scope}_{name}"]), "ci": interval(boots[m][f"{scope}_{name}"])}
                for name in METRICS
            }
        scores[m] = res
    return scores, boots


def score_difference(
    scores: Mapping[str, dict], boots: Mapping[str, dict], a: str, b: str, metric: str
) -> dict:
    """Method a - method b for ``metric`` (e.g. micro_f1) from one ``score`` call: the point value and the
    interval of the difference of their bootstrap distributions (paired: the same resamples for both)."""
    scope, name = metric.split("_", 1)
    va, vb = scores[a][scope][name]["value"], scores[b][scope][name]["value"]
    return {
        "value": None if va is None or vb is None else va - vb,
        "ci": interval(boots[a][metric] - boots[b][metric]),
    }
