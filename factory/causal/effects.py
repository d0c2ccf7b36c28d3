"""Statistics and verdicts of the causal check, from counterfactual rows (``schemas.COUNTERFACTUAL``).

Per trajectory, each condition's outcome is 1 when the re-asked answer is correct (``without_random``:
the mean over its random draws). Over a group of trajectories:

- accuracy per condition, with a 95% percentile bootstrap CI over resampled trajectories;
- the effects, over the trajectories whose ``full`` answer is correct (those where even the full
  graph fails are counted and left out: nothing can be lost there): sufficiency acc(only_sq) /
  acc(full); necessity of S_q = acc(full) - acc(without_sq) against the matched control acc(full) -
  acc(without_random), and their difference with a paired bootstrap CI (the same resamples for both),
  over the trajectories where S_q is a proper, non-empty part of G: where S_q is all of G (or empty),
  a random set of its size IS S_q (or nothing), so the contrast is zero by construction and would
  only pull the CI towards "not load-bearing" (they are counted; ``necessity_sq_all`` is the
  necessity over every trajectory);
- the closed-book rate (share of parametric trajectories).

The verdict on the paired CI of the difference: above 0 -> S_q is load-bearing; entirely below
``margin`` -> not load-bearing (it costs no more than a random set of its size, within the margin);
otherwise, or with fewer than ``min_trajectories`` effect trajectories -> cannot tell. Trajectories
with an LLM error in any condition are left out (counted): a failed call says nothing about S_q.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from factory.params.label_sections import CounterfactualParams, RelevanceParams
from factory.params.vocab import CONDITIONS
from factory.utils.stats import TRAJECTORIES, bootstrap_weights, interval, number, seeded_rng

NECESSITY_NEEDS = ("full", "without_sq", "without_random")
SUFFICIENCY_NEEDS = ("full", "only_sq")
VERDICTS = ("load-bearing", "not load-bearing", "cannot tell", "not computed")


@dataclass
class Outcome:
    """One trajectory's re-asked outcomes."""

    trajectory_id: str
    dataset: str
    qtype: str
    route: str
    parametric: bool | None
    sq_size: int
    graph_size: int
    correct: dict[str, float]  # condition -> 1/0 (without_random: mean over draws)


def outcomes(rows: Iterable[Mapping]) -> tuple[list[Outcome], Counter]:
    """Outcomes per trajectory (first-seen order) and counts: trajectories, llm_error_excluded."""
    by_tid: dict[str, list[Mapping]] = {}
    for r in rows:
        by_tid.setdefault(r["trajectory_id"], []).append(r)
    out: list[Outcome] = []
    counts: Counter = Counter()
    for tid, rs in by_tid.items():
        counts["trajectories"] += 1
        if any(r["status"] == "llm_error" for r in rs):
            counts["llm_error_excluded"] += 1
            continue
        draws: dict[str, list[float]] = {}
        for r in rs:
            draws.setdefault(r["condition"], []).append(1.0 if r["correct"] else 0.0)
        first = rs[0]
        out.append(
            Outcome(
                tid,
                first["dataset"],
                first["qtype"],
                first["route"],
                first.get("parametric"),
                int(first["sq_size"]),
                int(first["graph_size"]),
                {c: float(np.mean(v)) for c, v in draws.items()},
            )
        )
    return out, counts


def _cell(x: np.ndarray, weights: np.ndarray) -> dict:
    """Mean of x with its bootstrap CI (each resample has len(x) draws)."""
    if not len(x):
        return {"value": None, "ci": [None, None]}
    return {"value": number(float(x.mean())), "ci": interval(weights @ x / len(x))}


def _weights(n: int, samples: int, seed: int, *names: str) -> np.ndarray:
    """Bootstrap occurrence counts of n trajectories (a stable generator per group and subset)."""
    if not n:
        return np.zeros((samples, 0))
    return bootstrap_weights(n, samples, seeded_rng(TRAJECTORIES, seed, *names))


def _group_stats(
    items: Sequence[Outcome], conditions: Sequence[str], samples: int, rng_seed: int, name: str
) -> dict:
    n = len(items)
    present = [c for c in CONDITIONS if c in conditions]
    col = {c: np.array([o.correct.get(c, np.nan) for o in items], dtype=float) for c in present}
    weights = _weights(n, samples, rng_seed, "causal", name)
    group: dict = {
        "trajectories": n,
        "accuracy": {c: _cell(col[c], weights) for c in present},
        "parametric": sum(1 for o in items if o.parametric),
        "empty_sq": sum(1 for o in items if o.sq_size == 0),
        "sq_is_all_of_g": sum(1 for o in items if o.sq_size == o.graph_size),
    }
    effects: dict = {"trajectories": 0, "full_failed": None}
    if "full" in present:
        keep = col["full"] == 1.0
        m = int(keep.sum())
        effects.update(trajectories=m, full_failed=n - m)
        sub = {c: v[keep] for c, v in col.items()}
        w = _weights(m, samples, rng_seed, "causal-effects", name)
        if all(c in present for c in NECESSITY_NEEDS):
            sizes = np.array([(o.sq_size, o.graph_size) for o in items], dtype=int).reshape(n, 2)[keep]
            proper = (sizes[:, 0] > 0) & (sizes[:, 0] < sizes[:, 1])
            k = int(proper.sum())
            wk = _weights(k, samples, rng_seed, "causal-contrast", name)
            effects["necessity_sq_all"] = _cell(sub["full"] - sub["without_sq"], w)
            # the contrast needs trajectories where a random set of |S_q| triplets can differ from S_q
            effects["contrast"] = {
                "trajectories": k,
                "sq_is_all_of_g": int((sizes[:, 0] == sizes[:, 1]).sum()),
                "empty_sq": int(((sizes[:, 0] == 0) & (sizes[:, 1] > 0)).sum()),
            }
            effects["necessity_sq"] = _cell((sub["full"] - sub["without_sq"])[proper], wk)
            effects["necessity_random"] = _cell((sub["full"] - sub["without_random"])[proper], wk)
            # paired: the same resamples for both effects
            effects["difference"] = _cell((sub["without_random"] - sub["without_sq"])[proper], wk)
        if all(c in present for c in SUFFICIENCY_NEEDS):
            if m:
                boot = (w @ sub["only_sq"]) / (w @ sub["full"])
                effects["sufficiency"] = {
                    "value": number(float(sub["only_sq"].mean() / sub["full"].mean())),
                    "ci": interval(boot),
                }
            else:
                effects["sufficiency"] = {"value": None, "ci": [None, None]}
    group["effects"] = effects
    return group


def groups_of(items: Sequence[Outcome]) -> dict[str, list[int]]:
    """all; dataset=d; dataset=d/qtype=q; dataset=d/route=r; route=r; parametric=yes|no|unknown."""
    groups: dict[str, list[int]] = {"all": list(range(len(items)))}
    for i, o in enumerate(items):
        flag = "unknown" if o.parametric is None else ("yes" if o.parametric else "no")
        for name in (
            f"dataset={o.dataset}",
            f"dataset={o.dataset}/qtype={o.qtype}",
            f"dataset={o.dataset}/route={o.route}",
            f"route={o.route}",
            f"parametric={flag}",
        ):
            groups.setdefault(name, []).append(i)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])))


def points(x: float | None) -> str:
    """A share as whole points (never '-0')."""
    return "n/a" if x is None else str(round(100 * x))


def verdict(
    name: str, group: Mapping, conditions: Sequence[str], *, margin: float, min_trajectories: int
) -> dict:
    """The plain verdict of one group: necessity vs the matched control, sufficiency, closed-book rate."""
    label = name.split("=", 1)[1] if "=" in name else name
    if not group["trajectories"]:
        return {
            "verdict": "cannot tell",
            "effect_trajectories": 0,
            "contrast_trajectories": 0,
            "difference": None,
            "line": f"{label}: cannot tell whether S_q is load-bearing: no trajectory was re-asked (no "
            "correct one, or every one left out after an LLM error).",
        }
    eff = group["effects"]
    kind, necessity = _necessity(eff, conditions, margin, min_trajectories)
    parts = [necessity, _sufficiency(eff, conditions), _closed_book(group)]
    failed = eff["full_failed"]
    n = group["trajectories"]
    count = f"{n} trajector{'y' if n == 1 else 'ies'}" + (
        "" if failed is None else f", {failed} where even the full graph fails excluded from the effects"
    )
    return {
        "verdict": kind,
        "effect_trajectories": eff["trajectories"],
        "contrast_trajectories": eff.get("contrast", {}).get("trajectories", 0),
        "difference": eff.get("difference"),
        "line": f"{label}: " + "; ".join(parts) + f" ({count}).",
    }


def _necessity(
    eff: Mapping, conditions: Sequence[str], margin: float, min_trajectories: int
) -> tuple[str, str]:
    """(verdict, sentence) on S_q's necessity against the matched random control."""
    missing = [c for c in NECESSITY_NEEDS if c not in conditions]
    m = eff["trajectories"]
    if missing:
        return "not computed", f"necessity not computed ({', '.join(missing)} not run)"
    if m == 0:
        return "cannot tell", (
            "cannot tell whether S_q is load-bearing: the full graph reproduces none of the answers"
        )
    c = eff["contrast"]
    if c["trajectories"] == 0:
        return "cannot tell", (
            f"cannot tell whether S_q is load-bearing: in none of the {m} trajectories is S_q a proper, "
            f"non-empty part of G ({c['sq_is_all_of_g']} keep all of G, {c['empty_sq']} keep nothing), so no "
            "random set of its size can differ from it"
        )
    k = c["trajectories"]
    diff, lo, hi = eff["difference"]["value"], *eff["difference"]["ci"]
    necessity = (
        f"removing S_q costs {points(eff['necessity_sq']['value'])} points of accuracy, removing a "
        f"random set of the same size {points(eff['necessity_random']['value'])} (difference "
        f"{points(diff)}, 95% CI [{points(lo)}, {points(hi)}]; over the {k} trajectories where S_q is "
        f"a proper, non-empty part of G: {c['sq_is_all_of_g']} keep all of G, {c['empty_sq']} nothing)"
    )
    if k < min_trajectories:
        return "cannot tell", necessity + (
            f": cannot tell whether S_q is load-bearing (only {k} such trajectories, {min_trajectories} "
            "needed)"
        )
    if lo is not None and lo > 0:
        return "load-bearing", necessity + ": S_q is load-bearing"
    if hi is not None and hi < margin:
        return "not load-bearing", necessity + (
            ": S_q is NOT load-bearing (removing it costs no more than removing a random set of its "
            f"size, within the {points(margin)}-point margin)"
        )
    return "cannot tell", necessity + (
        f": cannot tell whether S_q is load-bearing (the CI includes 0 and reaches the "
        f"{points(margin)}-point margin)"
    )


def _sufficiency(eff: Mapping, conditions: Sequence[str]) -> str:
    if "sufficiency" not in eff:
        return (
            "sufficiency not computed ("
            + ", ".join(c for c in SUFFICIENCY_NEEDS if c not in conditions)
            + " not run)"
        )
    s = eff["sufficiency"]
    if s["value"] is None:
        return "sufficiency: no trajectory to measure it on"
    return (
        f"S_q alone keeps {points(s['value'])}% of the full-graph accuracy "
        f"(95% CI [{points(s['ci'][0])}, {points(s['ci'][1])}])"
    )


def _closed_book(group: Mapping) -> str:
    if "closed_book" not in group["accuracy"]:
        return "closed-book rate not computed (closed_book not run)"
    return (
        f"closed book answers {points(group['accuracy']['closed_book']['value'])}% "
        f"({group['parametric']} parametric)"
    )


def causal_summary(
    rows: Iterable[Mapping],
    conditions: Sequence[str],
    relevance: RelevanceParams,
    counterfactual: CounterfactualParams,
) -> dict:
    """Counts, per-group accuracies and effects, and one verdict for all and per dataset: bootstrap
    samples and seed from ``relevance``, the verdict rule's margin and minimum from ``counterfactual``."""
    bootstrap_samples, seed = relevance.bootstrap_samples, relevance.seed
    margin, min_trajectories = counterfactual.margin, counterfactual.min_trajectories
    items, counts = outcomes(rows)
    conditions = [c for c in CONDITIONS if c in conditions]
    groups = {
        name: _group_stats([items[i] for i in members], conditions, bootstrap_samples, seed, name)
        for name, members in groups_of(items).items()
    }
    verdicts = {
        ("all" if name == "all" else name.split("=", 1)[1]): verdict(
            name, g, conditions, margin=margin, min_trajectories=min_trajectories
        )
        for name, g in groups.items()
        if name == "all" or (name.startswith("dataset=") and "/" not in name)
    }
    return {
        "conditions": conditions,
        "params": {
            "bootstrap_samples": bootstrap_samples,
            "seed": seed,
            "margin": margin,
            "min_trajectories": min_trajectories,
        },
        "counts": {
            "trajectories": counts["trajectories"],
            "llm_error_excluded": counts["llm_error_excluded"],
            "evaluated": len(items),
            "parametric": sum(1 for o in items if o.parametric),
            "parametric_unknown": sum(1 for o in items if o.parametric is None),
        },
        "groups": groups,
        "verdicts": verdicts,
    }


def parametric_flags(rows: Iterable[Mapping]) -> dict[str, bool | None]:
    """trajectory id -> parametric (closed-book answer correct; None: not re-asked closed-book). Every row
    of a trajectory carries the same flag."""
    flags: dict[str, bool | None] = {}
    for r in rows:
        flags.setdefault(r["trajectory_id"], r.get("parametric"))
    return flags


def parametric_exclusion(trajectories: Iterable[Mapping], rows: Iterable[Mapping]) -> tuple[set[str], dict]:
    """The correct trajectories to leave out of every variant (parametric ones), and the counts: excluded,
    unknown (correct but never re-asked closed-book: kept), re-asked."""
    flags = parametric_flags(rows)
    correct = [t["trajectory_id"] for t in trajectories if t.get("correct")]
    excluded = {tid for tid in correct if flags.get(tid)}
    return excluded, {
        "excluded": len(excluded),
        "unknown_kept": sum(1 for tid in correct if flags.get(tid) is None),
        "reasked_closed_book": sum(1 for tid in correct if flags.get(tid) is not None),
    }
