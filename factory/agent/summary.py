"""Metrics of a set of trajectories: statuses, EM/F1, steps, triplets, tokens, latency, cache use.

Statistics of the policy itself are computed over the ordinary (non-rationalized) trajectories;
rationalized ones (which saw the gold answer as a hint) get their own block, so a hint can never
inflate a round's EM.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from factory.agent.loop import STATUSES, STOP_REASONS


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def trajectory_stats(records: Iterable[Mapping]) -> dict:
    """Counts and means over ``records`` (plain trajectory dicts)."""
    rows = list(records)
    steps = [s for r in rows for s in r["steps"]]
    triplets = [t for r in rows for t in r["triplets"]]
    status = Counter(r["status"] for r in rows)
    stops = Counter(r.get("stop_reason") or "unknown" for r in rows)
    calls = sum(int(r.get("llm_calls") or 0) for r in rows)
    return {
        "trajectories": len(rows),
        "status": {s: status.get(s, 0) for s in STATUSES},
        "stop_reason": {
            s: stops.get(s, 0) for s in (*STOP_REASONS, "unknown") if stops.get(s, 0) or s != "unknown"
        },
        "em": _mean([float(r["em"]) for r in rows]),
        "f1": _mean([float(r["f1"]) for r in rows]),
        "correct": sum(1 for r in rows if r["correct"]),
        "answered_rate": _mean([1.0 if r.get("answer") else 0.0 for r in rows]),
        "mean_steps": _mean([float(len(r["steps"])) for r in rows]),
        "mean_triplets": _mean([float(len(r["triplets"])) for r in rows]),
        "grounded_rate": _mean([1.0 if t.get("source_pid") else 0.0 for t in triplets]),
        "steps_by_kind": dict(sorted(Counter(s["kind"] for s in steps).items())),
        "repaired_steps": sum(1 for s in steps if s["attempts"] > 1),
        "llm_calls": calls,
        "tokens": {
            "prompt": sum(int(r.get("prompt_tokens") or 0) for r in rows),
            "completion": sum(int(r.get("completion_tokens") or 0) for r in rows),
        },
        "latency_s": {
            "total": sum(float(r.get("latency_s") or 0.0) for r in rows),
            "mean_per_call": (sum(float(r.get("latency_s") or 0.0) for r in rows) / calls) if calls else None,
        },
    }


def _by(records: list[Mapping], key: str) -> dict:
    groups: dict[str, list[Mapping]] = {}
    for r in records:
        groups.setdefault(str(r[key]), []).append(r)
    return {name: trajectory_stats(rows) for name, rows in sorted(groups.items())}


def summarize(records: Iterable[Mapping], *, breakdowns: tuple[str, ...] = ("dataset",)) -> dict:
    """Overall stats of the ordinary trajectories, broken down by ``breakdowns``, plus a rationalized
    block."""
    rows = list(records)
    ordinary = [r for r in rows if not r.get("rationalized")]
    rationalized = [r for r in rows if r.get("rationalized")]
    out = {"overall": trajectory_stats(ordinary), "records": len(rows)}
    for key in breakdowns:
        out[f"by_{key}"] = _by(ordinary, key)
    out["rationalized"] = trajectory_stats(rationalized)
    return out
