"""The backtrace stage's metrics: label statistics per mode x target mode, overall, by dataset and by
route."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _stats(rows: list[dict], triplets: dict[str, int]) -> dict[str, Any]:
    correct = [r for r in rows if r["correct"]]
    return {
        "trajectories": len(rows),
        "correct": len(correct),
        "mean_fa_ratio_correct": _mean([r["fa_ratio"] for r in correct]),
        "no_path_share": _mean([0.0 if r["path_found"] else 1.0 for r in rows]),
        "no_path_share_correct": _mean([0.0 if r["path_found"] else 1.0 for r in correct]),
        "mean_kept_triplets": _mean([float(len(r["kept_triplet_ids"])) for r in rows]),
        "mean_triplets": _mean([float(triplets[r["trajectory_id"]]) for r in rows]),
        "admin_dropped": sum(r["admin_dropped"] for r in rows),
        "filtered_tokens_correct": sum(r["filtered_tokens"] for r in correct),
        "total_tokens_correct": sum(r["total_tokens"] for r in correct),
    }


def summarise(trajectories: list[dict], labels: list[dict]) -> dict[str, Any]:
    """Per 'mode/target_mode': stats overall, by dataset and by route."""
    meta = {t["trajectory_id"]: (t["dataset"], t["route"]) for t in trajectories}
    triplets = {t["trajectory_id"]: len(t["triplets"]) for t in trajectories}
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in labels:
        groups[f"{r['mode']}/{r['target_mode']}"].append(r)
    out = {}
    for key, rows in sorted(groups.items()):
        by_dataset, by_route = defaultdict(list), defaultdict(list)
        for r in rows:
            dataset, route = meta[r["trajectory_id"]]
            by_dataset[dataset].append(r)
            by_route[route].append(r)
        out[key] = {
            "all": _stats(rows, triplets),
            "by_dataset": {k: _stats(v, triplets) for k, v in sorted(by_dataset.items())},
            "by_route": {k: _stats(v, triplets) for k, v in sorted(by_route.items())},
        }
    return out
