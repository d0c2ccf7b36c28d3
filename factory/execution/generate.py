"""Resumable trajectory generation: what the trajectories and evaluate stages share.

``generate_trajectories`` runs the agent over a question sample, optionally adds STaR
rationalizations for questions whose samples are all wrong, checks that every question x sample
left exactly one record, and returns how each ended (the records are on disk). Two schedules, one result:

- a backend that takes single requests (``submit``: the openai backend) runs continuously
  (``factory.execution.scheduler``): ``llm.concurrency`` calls in flight over a window of
  ``trajectories.window`` active trajectories, each record journaled the moment it finishes;
- the local backend runs in checkpointed shards of ``trajectories.shard_size`` questions, each in
  lockstep batches (its bf16 outputs depend on the batch, so batches stay a function of the params).

Either way the final file holds the records in plan order (question, then sample, then its
rationalization), so a resumed run, an uninterrupted one and the other schedule write the same
bytes for the same replies (the response cache replays them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from factory.agent.loop import Run, constrained_decoding, run_trajectories
from factory.errors import FactoryError
from factory.execution.shards import Journal, fingerprint, run_in_shards
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
            "constrained": constrained_decoding(params, llm),
            "constraint_field": params.llm.constraint_field if llm.backend == "openai" else None,
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
    """Trajectories of ``questions`` x ``samples`` (+ rationalizations) written to ``out_path``; the
    ``outcome`` of each record, in the file's order (the records themselves are only on disk:
    ``factory.execution.summary.summarize_file`` reads them back a row group at a time).
    ``on_shard(k)`` runs after shard k is on disk (sharded schedule only; tests use it)."""
    sample_ids = list(range(samples))
    fp = plan_fingerprint(params, llm, policy, sample_ids, sampling, run_id, rationalize)
    if hasattr(llm, "submit"):
        records = _generate_continuously(
            params,
            questions,
            llm,
            retriever,
            passages,
            policy,
            round_,
            samples,
            sampling,
            out_path,
            run_id,
            rationalize,
            desc,
            fp,
        )
        check_complete(records, questions, samples)
        return records

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

    run_in_shards(
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
    from schemas import iter_rows

    outcomes = list(iter_rows(out_path, list(OUTCOME_FIELDS)))
    check_complete(outcomes, questions, samples)
    return outcomes


def _generate_continuously(
    params: Any,
    questions: Sequence[dict],
    llm: LLM,
    retriever: Any,
    passages: Mapping[str, Mapping] | None,
    policy: Any,
    round_: int,
    samples: int,
    sampling: Sampling,
    out_path: str | Path,
    run_id: str,
    rationalize: bool,
    desc: str,
    plan_fp: str,
) -> list[dict]:
    """The continuous schedule with a journal; the final file in plan order."""
    from factory.execution.scheduler import run_continuously
    from factory.io import progress

    journal = Journal(out_path, plan_fp, [q["question_id"] for q in questions], key=record_key, keep=outcome)
    try:
        done: dict[tuple[str, int, bool], dict] = dict(journal.kept)
        by_id = {q["question_id"]: q for q in questions}

        def rationalization(qid: str) -> list[tuple[dict, int, bool]]:
            """The hint run of a question once all its samples are in and wrong (and it has none yet)."""
            if not rationalize or (qid, samples, True) in done:
                return []
            mine = [done.get((qid, s, False)) for s in range(samples)]
            if any(r is None for r in mine) or any(r["correct"] for r in mine):
                return []
            return [(by_id[qid], samples, True)]

        todo = [
            (q, s, False)
            for q in questions
            for s in range(samples)
            if (q["question_id"], s, False) not in done
        ]
        todo = [u for q in questions for u in rationalization(q["question_id"])] + todo
        run = Run(
            questions, llm, retriever, params, policy, round_, sampling, passages=passages, run_id=run_id
        )
        window = params.trajectories.window or 8 * params.llm.concurrency
        initial = sum(1 for (_, _, rat) in done if not rat)
        with progress(total=len(questions) * samples, desc=desc, unit="traj", initial=initial) as bar:

            def on_done(record: dict) -> list[tuple[dict, int, bool]]:
                key = record_key(record)
                journal.append(record)
                done[key] = outcome(record)
                if key[2]:
                    return []
                bar.update(1)
                return rationalization(key[0])

            run_continuously(run, todo, window, on_done)
        ordered = [
            key
            for q in questions
            for key in [(q["question_id"], s, False) for s in range(samples)]
            + [(q["question_id"], samples, True)]
            if key in done
        ]
        journal.finish(ordered)
        return [done[key] for key in ordered]
    finally:
        journal.close()


def record_key(record: Mapping) -> tuple[str, int, bool]:
    """A trajectory's place in the plan: (question, sample, rationalized)."""
    return record["question_id"], int(record["sample"]), bool(record["rationalized"])


OUTCOME_FIELDS = ("trajectory_id", "question_id", "sample", "rationalized", "status", "correct", "em", "f1")


def outcome(record: Mapping) -> dict:
    """What the drivers keep of a finished trajectory (its record is on disk): who it is and how it
    ended; ``generate_trajectories`` returns these, in plan order."""
    return {name: record[name] for name in OUTCOME_FIELDS}


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
