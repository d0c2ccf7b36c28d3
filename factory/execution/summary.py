"""Metrics of a set of trajectories: statuses, EM/F1, steps, triplets, tokens, latency, cache use.

Statistics of the policy itself are computed over the ordinary (non-rationalized) trajectories;
rationalized ones (which saw the gold answer as a hint) get their own block, so a hint can never
inflate a round's EM. The statistics accumulate a record at a time (``Stats``), so
``summarize_file`` reads a trajectories file a row group at a time, and only the columns it counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from factory.agent.loop import STATUSES, STOP_REASONS
from factory.agent.step_record import unusable_reason

# What the statistics read of a trajectory (parquet paths: a step's kind and attempts, a triplet's pid)
COLUMNS = [
    "dataset",
    "qtype",
    "route",
    "status",
    "stop_reason",
    "em",
    "f1",
    "correct",
    "answer",
    "rationalized",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "steps.list.element.kind",
    "steps.list.element.attempts",
    "steps.list.element.status",
    "steps.list.element.error",
    "triplets.list.element.source_pid",
]


class Stats:
    """Counts and sums over the trajectories added; ``result()`` gives the means."""

    def __init__(self) -> None:
        self.n = self.correct = self.answered = self.steps = self.triplets = self.grounded = 0
        self.repaired = self.calls = self.prompt = self.completion = 0
        self.em = self.f1 = self.latency = 0.0
        self.status: Counter = Counter()
        self.stops: Counter = Counter()
        self.kinds: Counter = Counter()
        self.unusable: Counter = Counter()  # replies the agent could not use, by reason

    def add(self, r: Mapping) -> None:
        self.n += 1
        self.status[r["status"]] += 1
        self.stops[r.get("stop_reason") or "unknown"] += 1
        self.em += float(r["em"])
        self.f1 += float(r["f1"])
        self.correct += 1 if r["correct"] else 0
        self.answered += 1 if r.get("answer") else 0
        self.steps += len(r["steps"])
        self.triplets += len(r["triplets"])
        self.grounded += sum(1 for t in r["triplets"] if t.get("source_pid"))
        for s in r["steps"]:
            self.kinds[s["kind"]] += 1
            self.repaired += 1 if s["attempts"] > 1 else 0
            reason = unusable_reason(s.get("status") or "ok", s.get("error"))
            if reason is not None:
                self.unusable[reason] += int(s["attempts"])
        self.calls += int(r.get("llm_calls") or 0)
        self.prompt += int(r.get("prompt_tokens") or 0)
        self.completion += int(r.get("completion_tokens") or 0)
        self.latency += float(r.get("latency_s") or 0.0)

    def result(self) -> dict:
        n = self.n

        def mean(total: float, count: int) -> float | None:
            return total / count if count else None

        return {
            "trajectories": n,
            "status": {s: self.status.get(s, 0) for s in STATUSES},
            "stop_reason": {
                s: self.stops.get(s, 0)
                for s in (*STOP_REASONS, "unknown")
                if self.stops.get(s, 0) or s != "unknown"
            },
            "em": mean(self.em, n),
            "f1": mean(self.f1, n),
            "correct": self.correct,
            "answered_rate": mean(float(self.answered), n),
            "mean_steps": mean(float(self.steps), n),
            "mean_triplets": mean(float(self.triplets), n),
            "grounded_rate": mean(float(self.grounded), self.triplets),
            "steps_by_kind": dict(sorted(self.kinds.items())),
            "repaired_steps": self.repaired,
            "llm_calls": self.calls,
            "unusable_replies": dict(sorted(self.unusable.items())),
            "tokens": {"prompt": self.prompt, "completion": self.completion},
            "latency_s": {"total": self.latency, "mean_per_call": mean(self.latency, self.calls)},
        }


def trajectory_stats(records: Iterable[Mapping]) -> dict:
    """Counts and means over ``records`` (plain trajectory dicts)."""
    stats = Stats()
    for r in records:
        stats.add(r)
    return stats.result()


def summarize(records: Iterable[Mapping], *, breakdowns: tuple[str, ...] = ("dataset",)) -> dict:
    """Overall stats of the ordinary trajectories, broken down by ``breakdowns``, plus a rationalized
    block."""
    overall, rationalized = Stats(), Stats()
    groups: dict[str, dict[str, Stats]] = {key: {} for key in breakdowns}
    n = 0
    for r in records:
        n += 1
        if r.get("rationalized"):
            rationalized.add(r)
            continue
        overall.add(r)
        for key in breakdowns:
            groups[key].setdefault(str(r[key]), Stats()).add(r)
    out = {"overall": overall.result(), "records": n}
    for key in breakdowns:
        out[f"by_{key}"] = {name: s.result() for name, s in sorted(groups[key].items())}
    out["rationalized"] = rationalized.result()
    return out


def summarize_file(path: str | Path, *, breakdowns: tuple[str, ...] = ("dataset",)) -> dict:
    """``summarize`` of a trajectories file, streamed."""
    from schemas import iter_rows

    return summarize(iter_rows(path, COLUMNS), breakdowns=breakdowns)
