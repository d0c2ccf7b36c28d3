"""The backtrace stage's metrics: label statistics per mode x target mode, overall, by dataset and by
route. They accumulate a labels row at a time (``LabelSummary.add``), so the stage never holds the
rows as dicts, and summaries of parts of a round merge (``LabelSummary.merge``): the stage's tasks
summarize their own rows. The FA ratios are summed exactly (``math.fsum`` of every value), so a
mean does not depend on the order in which rows or parts arrive."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from typing import Any


class _Stats:
    def __init__(self) -> None:
        self.n = self.correct = self.no_path = self.no_path_correct = self.admin = 0
        self.kept = self.triplets = self.filtered = self.total = 0
        self.fa = array("d")  # every FA ratio of a correct trajectory, summed exactly at the end

    def add(self, r: Mapping, triplets: int) -> None:
        self.n += 1
        self.no_path += 0 if r["path_found"] else 1
        self.kept += len(r["kept_triplet_ids"])
        self.triplets += triplets
        self.admin += r["admin_dropped"]
        if r["correct"]:
            self.correct += 1
            self.fa.append(r["fa_ratio"])
            self.no_path_correct += 0 if r["path_found"] else 1
            self.filtered += r["filtered_tokens"]
            self.total += r["total_tokens"]

    def merge(self, other: _Stats) -> None:
        for name in ("n", "correct", "no_path", "no_path_correct", "admin", "kept", "triplets", "filtered"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.total += other.total
        self.fa.extend(other.fa)

    def result(self) -> dict[str, Any]:
        def mean(total: float, count: int) -> float | None:
            return total / count if count else None

        return {
            "trajectories": self.n,
            "correct": self.correct,
            "mean_fa_ratio_correct": mean(math.fsum(self.fa), self.correct),
            "no_path_share": mean(float(self.no_path), self.n),
            "no_path_share_correct": mean(float(self.no_path_correct), self.correct),
            "mean_kept_triplets": mean(float(self.kept), self.n),
            "mean_triplets": mean(float(self.triplets), self.n),
            "admin_dropped": self.admin,
            "filtered_tokens_correct": self.filtered,
            "total_tokens_correct": self.total,
        }


class LabelSummary:
    """Per 'mode/target_mode': stats overall, by dataset and by route. ``meta`` maps a trajectory id
    to (dataset, route, number of triplets)."""

    def __init__(self, meta: Mapping[str, tuple[str, str, int]]):
        self.meta = meta
        self.groups: dict[str, tuple[_Stats, dict[str, _Stats], dict[str, _Stats]]] = {}

    def add(self, r: Mapping) -> None:
        dataset, route, triplets = self.meta[r["trajectory_id"]]
        key = f"{r['mode']}/{r['target_mode']}"
        overall, by_dataset, by_route = self.groups.setdefault(key, (_Stats(), {}, {}))
        overall.add(r, triplets)
        by_dataset.setdefault(dataset, _Stats()).add(r, triplets)
        by_route.setdefault(route, _Stats()).add(r, triplets)

    def merge(self, other: LabelSummary) -> None:
        """Add the counts of ``other`` (a summary of other trajectories) to these."""
        for key, (overall, by_dataset, by_route) in other.groups.items():
            mine = self.groups.setdefault(key, (_Stats(), {}, {}))
            mine[0].merge(overall)
            for theirs, ours in ((by_dataset, mine[1]), (by_route, mine[2])):
                for name, stats in theirs.items():
                    ours.setdefault(name, _Stats()).merge(stats)

    def result(self) -> dict[str, Any]:
        return {
            key: {
                "all": overall.result(),
                "by_dataset": {k: v.result() for k, v in sorted(by_dataset.items())},
                "by_route": {k: v.result() for k, v in sorted(by_route.items())},
            }
            for key, (overall, by_dataset, by_route) in sorted(self.groups.items())
        }
