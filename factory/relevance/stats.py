"""Micro/macro precision, recall and F1 of kept sets vs relevant sets, with percentile bootstrap CIs.

Inputs are per-trajectory counts: ``tp`` and ``kept`` (seeds x trajectories; one row for deterministic
methods, one per seed for the random control) and ``rel`` (trajectories). Micro scores are ratios of
sums; macro scores are means of per-trajectory ratios over the trajectories where the ratio is defined
(precision needs kept > 0, recall relevant > 0, F1 = 2tp / (kept + relevant) needs either). A bootstrap
resample is a vector of how often each trajectory occurs, so every sum over all resamples of all methods
of a group is ONE matrix product — thousands of resamples stay cheap. Seeds are averaged after scoring.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

METRICS = ("precision", "recall", "f1")


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


def interval(boot: np.ndarray) -> list[float | None]:
    """95% percentile interval of the finite bootstrap values ([None, None] when there are none)."""
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return [None, None]
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return [float(lo), float(hi)]


def bootstrap_rng(seed: int, *names: str) -> np.random.Generator:
    """A generator per (seed, group, level): results do not depend on the order groups are scored in."""
    digest = hashlib.blake2b(
        ":".join(("relevance-bootstrap", str(seed), *names)).encode(), digest_size=8
    ).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def bootstrap_weights(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """samples x n occurrence counts of n trajectories in resamples drawn with replacement."""
    idx = rng.integers(0, n, size=(samples, n))
    return (
        np.bincount((np.arange(samples)[:, None] * n + idx).ravel(), minlength=samples * n)
        .reshape(samples, n)
        .astype(float)
    )


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


def prf(
    tp: np.ndarray, kept: np.ndarray, rel: np.ndarray, weights: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Micro and macro P/R/F1, averaged over seeds: shape () without weights, (resamples,) with
    ``weights`` (resamples x trajectories occurrence counts)."""
    tp, kept = np.atleast_2d(np.asarray(tp, dtype=float)), np.atleast_2d(np.asarray(kept, dtype=float))
    rows = _rows(tp, kept, np.asarray(rel, dtype=float))
    sums = rows.sum(-1) if weights is None else rows @ weights.T
    return {k: nanmean(v, 0) for k, v in _decode(sums, tp.shape[0]).items()}


def score(
    counts: Mapping[str, tuple[np.ndarray, np.ndarray]],
    rel: np.ndarray,
    members: np.ndarray,
    weights: np.ndarray,
) -> tuple[dict[str, dict], dict[str, dict[str, np.ndarray]]]:
    """Scores of every method over the ``members`` columns: {method: {kept, relevant, micro, macro}} with
    values and CIs, and the bootstrap distributions (for paired differences between methods)."""
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


def paired_difference(
    scores: Mapping[str, dict], boots: Mapping[str, dict], a: str, b: str, metric: str
) -> dict:
    """a - b for ``metric`` (e.g. micro_f1): point value and the CI of the paired bootstrap difference."""
    scope, name = metric.split("_", 1)
    va, vb = scores[a][scope][name]["value"], scores[b][scope][name]["value"]
    return {
        "value": None if va is None or vb is None else va - vb,
        "ci": interval(boots[a][metric] - boots[b][metric]),
    }


def mean_over_seeds(per_seed: Sequence[float]) -> float | None:
    return number(nanmean(np.asarray(per_seed, dtype=float), 0)) if len(per_seed) else None
