"""Scores of the kept sets against the gold-relevant sets: counts, P/R/F1 with bootstrap CIs, verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from factory.relevance.grounded import ENTAILED, LEVELS, Evaluated
from factory.utils.selection import ANSWER_ENTITY, AUTHORS_RULE, RANDOM, UNFILTERED, backtrace_setting
from factory.utils.stats import (
    TRAJECTORIES,
    bootstrap_weights,
    mean_over_seeds,
    ratio,
    score,
    score_difference,
    seeded_rng,
)


def level_counts(
    items: Sequence[Evaluated], level: str, methods: Sequence[str]
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """relevant (trajectories) and, per method, (tp, kept) as seeds x trajectories."""
    relevant = [e.relevant(level) for e in items]
    rel = np.array([len(r) for r in relevant], dtype=float)
    counts = {}
    for m in methods:
        seeds = range(len(items[0].kept[m])) if items else range(1)
        kept = np.array([[len(e.kept[m][s]) for e in items] for s in seeds], dtype=float).reshape(
            len(seeds), len(items)
        )
        tp = np.array(
            [[len(e.kept[m][s] & r) for e, r in zip(items, relevant)] for s in seeds], dtype=float
        ).reshape(len(seeds), len(items))
        counts[m] = (tp, kept)
    return rel, counts


def extra_counts(items: Sequence[Evaluated], methods: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """Per method, seeds x trajectories: gold paragraphs covered by kept triplets, kept ungrounded, kept;
    plus gold paragraphs per trajectory and, for S_q, whether no path was found."""
    gold = np.array([len(e.gold_pids) for e in items], dtype=float)
    out = {}
    for m in methods:
        covered, ungrounded, kept = [], [], []
        for s in range(len(items[0].kept[m])):
            covered.append([len({e.grounding[t][0] for t in e.kept[m][s]} & e.gold_pids) for e in items])
            ungrounded.append([sum(e.grounding[t][0] is None for t in e.kept[m][s]) for e in items])
            kept.append([len(e.kept[m][s]) for e in items])
        out[m] = {
            "covered": np.array(covered, dtype=float),
            "ungrounded": np.array(ungrounded, dtype=float),
            "kept": np.array(kept, dtype=float),
            "gold": gold,
        }
        if backtrace_setting(m):
            out[m]["no_path"] = np.array([e.no_path[m] for e in items], dtype=float)
    return out


def group_extras(counts: Mapping[str, dict[str, np.ndarray]], members: np.ndarray) -> dict[str, dict]:
    """Supporting-paragraph recall (micro, macro), ungrounded rate, mean kept size, no-path share (means over
    seeds)."""
    out = {}
    for m, c in counts.items():
        cov, ung, kept, gold = (
            c["covered"][:, members],
            c["ungrounded"][:, members],
            c["kept"][:, members],
            c["gold"][members],
        )
        with_gold = gold > 0
        out[m] = {
            "support_recall_micro": mean_over_seeds(ratio(cov.sum(-1), gold.sum())),
            "support_recall_macro": mean_over_seeds(
                [np.mean(row[with_gold] / gold[with_gold]) if with_gold.any() else np.nan for row in cov]
            ),
            "ungrounded_rate": mean_over_seeds(ratio(ung.sum(-1), kept.sum(-1))),
            "mean_kept": mean_over_seeds(kept.mean(-1)) if len(members) else None,
        }
        if "no_path" in c:
            out[m]["no_path_share"] = float(c["no_path"][members].mean())
    return out


def groups_of(items: Sequence[Evaluated]) -> dict[str, list[int]]:
    """all; dataset=d; dataset=d/qtype=q; dataset=d/route=r; route=r; source=s (when several sources)."""
    groups: dict[str, list[int]] = {"all": list(range(len(items)))}
    keys = []
    for i, e in enumerate(items):
        keys.append(
            (
                i,
                [
                    f"dataset={e.dataset}",
                    f"dataset={e.dataset}/qtype={e.qtype}",
                    f"dataset={e.dataset}/route={e.route}",
                    f"route={e.route}",
                ]
                + ([f"source={e.source}"] if e.source else []),
            )
        )
    for i, names in keys:
        for name in names:
            groups.setdefault(name, []).append(i)
    if len({e.source for e in items}) < 2:
        groups = {k: v for k, v in groups.items() if not k.startswith("source=")}
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])))


def evaluate(
    items: Sequence[Evaluated],
    methods: Sequence[str],
    default_method: str,
    *,
    bootstrap_samples: int,
    seed: int,
) -> dict[str, dict]:
    """Scores of every group and level; paired bootstrap differences S_q(default) - control."""
    judged = np.array([e.entailed is not None for e in items], dtype=bool)
    levels = LEVELS + ((ENTAILED,) if judged.any() else ())
    per_level = {level: level_counts(items, level, methods) for level in levels}
    extra = extra_counts(items, methods)
    has_facts = np.array([e.gold_facts is not None for e in items], dtype=bool)
    results: dict[str, dict] = {}
    for name, member_list in groups_of(items).items():
        members = np.array(member_list, dtype=int)
        group = {"trajectories": len(members), "levels": {}}
        for level in levels:
            subset = (
                members
                if level == "paragraph"
                else members[(judged if level == ENTAILED else has_facts)[members]]
            )
            if not len(subset):
                continue
            weights = bootstrap_weights(
                len(subset), bootstrap_samples, seeded_rng(TRAJECTORIES, seed, name, level)
            )
            rel, counts = per_level[level]
            scores, boots = score(counts, rel, subset, weights)
            diffs = {
                control: {
                    metric: score_difference(scores, boots, default_method, control, metric)
                    for metric in ("micro_f1", "micro_precision", "macro_f1")
                }
                for control in (ANSWER_ENTITY, UNFILTERED, RANDOM, AUTHORS_RULE)
            }
            group["levels"][level] = {
                "trajectories": len(subset),
                "methods": scores,
                "backtrace_minus_control": diffs,
            }
        group["extras"] = group_extras(extra, members)
        results[name] = group
    return results


def verdicts(results: Mapping[str, dict], default_method: str, bar: float) -> dict[str, dict]:
    """One plain verdict per dataset: does S_q beat answer-entity beyond the CI; does it reach the bar."""
    out, setting = {}, backtrace_setting(default_method)
    for name, group in results.items():
        if not name.startswith("dataset=") or "/" in name:
            continue
        dataset = name.split("=", 1)[1]
        para = group["levels"]["paragraph"]
        sq, ae = para["methods"][default_method], para["methods"][ANSWER_ENTITY]
        diff = para["backtrace_minus_control"][ANSWER_ENTITY]["micro_f1"]
        p, r, f = (
            sq["micro"]["precision"]["value"],
            sq["micro"]["recall"]["value"],
            sq["micro"]["f1"]["value"],
        )
        lo = diff["ci"][0]
        beats = lo is not None and lo > 0
        reaches = p is not None and r is not None and p >= bar and r >= bar

        def fmt(x):
            return "n/a" if x is None else f"{x:.2f}"

        def ci(c):
            return "[n/a]" if c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"

        scored = f is not None and lo is not None
        if not scored:
            # Nothing to score (P and R undefined): a "does NOT beat" would claim a finding.
            line = (
                f"{dataset}: cannot tell whether S_q ({setting}) beats the answer-entity control "
                f"or reaches the {bar:g} bar: no F1 to compare over its {para['trajectories']} correct "
                "trajectories (S_q or the answer-entity control has nothing to score there: an empty kept "
                "set and no gold-relevant triplet)."
            )
        else:
            line = (
                f"{dataset}: S_q ({setting}) micro F1 {fmt(f)} {ci(sq['micro']['f1']['ci'])} vs "
                "answer-entity "
                f"{fmt(ae['micro']['f1']['value'])} {ci(ae['micro']['f1']['ci'])} -> "
                f"{'BEATS' if beats else 'does NOT beat'} the answer-entity control beyond the 95% CI "
                f"(paired difference {fmt(diff['value'])} {ci(diff['ci'])}); precision {fmt(p)} and recall "
                f"{fmt(r)} "
                f"{'REACH' if reaches else 'do NOT reach'} the {bar:g} bar (paragraph level, "
                f"{para['trajectories']} correct trajectories)."
            )
        authors = para["methods"][AUTHORS_RULE]["micro"]["f1"]
        authors_diff = para["backtrace_minus_control"][AUTHORS_RULE]["micro_f1"]
        line += (
            f" Beside the KnowTrace authors' rule: S_q micro F1 {fmt(f)} vs {fmt(authors['value'])} "
            f"{ci(authors['ci'])} (paired difference {fmt(authors_diff['value'])} {ci(authors_diff['ci'])})."
        )
        out[dataset] = {
            "verdict": ("beats" if beats else "does not beat") if scored else "cannot tell",
            "beats_answer_entity": beats,
            "reaches_bar": reaches,
            "precision": p,
            "recall": r,
            "f1": f,
            "answer_entity_f1": ae["micro"]["f1"]["value"],
            "authors_rule_f1": authors["value"],
            "authors_rule_difference": authors_diff,
            "difference": diff,
            "line": line,
        }
    return out


def summarize_counts(items: Sequence[Evaluated]) -> dict:
    grounded = sum(e.grounding[t][0] is not None for e in items for t in e.triplets)
    total = sum(len(e.triplets) for e in items)
    return {
        "evaluated": len(items),
        "by_dataset": dict(sorted(Counter(e.dataset for e in items).items())),
        "triplets": total,
        "grounded_triplets": grounded,
        "ungrounded_rate_all_triplets": (total - grounded) / total if total else None,
        "sentence_level_trajectories": sum(e.gold_facts is not None for e in items),
    }
