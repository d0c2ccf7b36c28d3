"""Sharded, resumable trajectory generation: what the trajectories and evaluate stages share.

``generate_trajectories`` runs the agent over a question sample in checkpointed shards
(``factory.agent.shards``), optionally adds STaR rationalizations for questions whose samples are
all wrong, checks that every question x sample left exactly one record, and returns the records
of the final file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from factory.agent.loop import run_trajectories
from factory.agent.shards import fingerprint, run_in_shards
from factory.errors import FactoryError
from factory.llm.base import LLM, Sampling


def plan_fingerprint(
    params: Any,
    llm: LLM,
    policy: Any,
    samples: Sequence[int],
    sampling: Sampling,
    run_id: str,
    rationalize: bool,
) -> str:
    """Everything that decides a shard's content; a checkpoint made under another one is discarded."""
    return fingerprint(
        {
            "params": params.digest("agent", "retrieval", "index", "trajectories"),
            "max_new_tokens": params.llm.max_new_tokens,
            "backend": llm.backend,
            "model": llm.identity,
            "policy": getattr(policy, "name", str(policy)),
            "samples": list(samples),
            "sampling": asdict(sampling),
            "run_id": run_id,
            "rationalize": rationalize,
        }
    )


def generate_trajectories(
    params: Any,
    questions: Sequence[dict],
    *,
    llm: LLM,
    retriever: Any,
    passages: Mapping[str, Mapping] | None,
    policy: Any,
    round_: int,
    samples: int,
    sampling: Sampling,
    out_path: str | Path,
    run_id: str,
    rationalize: bool = False,
    desc: str = "trajectories",
    on_shard: Callable[[int], None] | None = None,
) -> list[dict]:
    """Trajectories of ``questions`` x ``samples`` (+ rationalizations) written to ``out_path``; its
    records."""
    sample_ids = list(range(samples))

    def work(shard: list[dict], tick: Callable[[int], None]) -> list[dict]:
        records = run_trajectories(
            shard,
            llm,
            retriever,
            params,
            policy,
            round_,
            sample_ids,
            sampling,
            on_done=lambda _r: tick(1),
            passages=passages,
            run_id=run_id,
        )
        extra: list[dict] = []
        if rationalize:
            wrong = [
                q
                for q in shard
                if not any(r["correct"] for r in records if r["question_id"] == q["question_id"])
            ]
            if wrong:
                extra = run_trajectories(
                    wrong,
                    llm,
                    retriever,
                    params,
                    policy,
                    round_,
                    [samples],
                    sampling,
                    passages=passages,
                    run_id=run_id,
                    rationalized=True,
                )
        by_question: dict[str, list[dict]] = {}
        for r in records + extra:
            by_question.setdefault(r["question_id"], []).append(r)
        return [r for q in shard for r in by_question.get(q["question_id"], [])]

    fp = plan_fingerprint(params, llm, policy, sample_ids, sampling, run_id, rationalize)
    table = run_in_shards(
        list(questions),
        lambda q: q["question_id"],
        params.trajectories.shard_size,
        out_path,
        fp,
        work,
        desc=desc,
        total_ticks=len(questions) * samples,
        on_shard=on_shard,
    )
    records = table.to_pylist()
    check_complete(records, questions, samples)
    return records


def check_complete(records: Sequence[Mapping], questions: Sequence[Mapping], samples: int) -> None:
    """Exactly one ordinary record per question x sample (and at most one rationalization per question)."""
    seen: dict[tuple[str, int, bool], int] = {}
    for r in records:
        key = (r["question_id"], int(r["sample"]), bool(r["rationalized"]))
        seen[key] = seen.get(key, 0) + 1
    problems = []
    for q in questions:
        for s in range(samples):
            n = seen.pop((q["question_id"], s, False), 0)
            if n != 1:
                problems.append(f"{q['question_id']} sample {s}: {n} records")
        if seen.pop((q["question_id"], samples, True), 0) > 1:
            problems.append(f"{q['question_id']}: more than one rationalization")
    problems += [
        f"{qid} sample {s}{' (rationalized)' if rat else ''}: unexpected record"
        for (qid, s, rat) in sorted(seen)
    ]
    if problems:
        raise FactoryError(
            "trajectory records do not add up to one per question x sample: " + "; ".join(problems[:10])
        )
