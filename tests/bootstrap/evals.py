"""Hand-made evaluation artifacts for the stop rule and report tests: per-question EM as the
evaluation stages write it (schemas.TRAJECTORY rows) and the metrics files next to them."""

from __future__ import annotations

from pathlib import Path

from factory.params.round_sections import BootstrapParams, RoundSlot
from factory.utils.io import write_json
from schemas import write_parquet


def rule(max_rounds: int, **fields) -> BootstrapParams:
    """params.bootstrap with ``max_rounds`` round slots; the CI seed 0 unless given."""
    slots = [RoundSlot(round=r, after="init" if r == 0 else f"round_{r - 1}") for r in range(max_rounds)]
    return BootstrapParams(max_rounds=max_rounds, rounds=slots, **{"ci_seed": 0, **fields})


def em(pattern: str, prefix: str = "q") -> dict[str, float]:
    """Per-question EM from a string of 0/1, one character per question (q00, q01, ...)."""
    return {f"{prefix}{i:02d}": float(c) for i, c in enumerate(pattern)}


def eval_rows(scores: dict[str, float], policy: str = "base", split: str = "heldout") -> list[dict]:
    """One greedy trajectory record per question, with the given EM (and nothing else of interest)."""
    return [
        {
            "trajectory_id": f"eval/{policy}/{qid}/k0",
            "question_id": qid,
            "dataset": "hotpotqa",
            "split": split,
            "qtype": "bridge",
            "route": "chain",
            "policy": policy,
            "round": 0,
            "sample": 0,
            "seed": 11,
            "question": f"question {qid}?",
            "answers": ["yes"],
            "prompt_version": "knowtrace-v1",
            "model": "tiny",
            "status": "ok",
            "answer": "yes" if value else "no",
            "em": float(value),
            "f1": float(value),
            "correct": bool(value),
            "rationalized": False,
            "steps": [],
            "triplets": [],
        }
        for qid, value in scores.items()
    ]


def write_eval(data_path: Path, metrics_path: Path, scores: dict[str, float] | None, **metrics) -> None:
    """An evaluation's trajectories and metrics; ``scores=None`` writes a skipped evaluation."""
    if scores is None:
        write_parquet([], data_path, "trajectory")
        write_json(metrics_path, {"status": "skipped", "reason": "an earlier decision stopped this chain"})
        return
    write_parquet(eval_rows(scores), data_path, "trajectory")
    em_ = sum(scores.values()) / len(scores)
    write_json(metrics_path, {"status": "done", "em": em_, "f1": em_, "questions": len(scores), **metrics})
