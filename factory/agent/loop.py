"""The KnowTrace agent loop (docs/design.md §1): runs of trajectory programs, and the lockstep driver.

Each trajectory is a small generator program (``factory.agent.program``): it yields the LLM calls
it needs next and receives their outcomes. Two drivers run programs. The lockstep
driver here (``run_trajectories``) gathers the pending calls of *every* active trajectory into one
``llm.generate`` batch per tick: the local backend's unit of work, whose batches must be a
deterministic function of the params. The continuous driver (``factory.execution.scheduler``) sends
each call as soon as its trajectory needs it, for the openai backend. Both parse the replies,
re-ask unparseable ones with the parse error (``agent.repair_attempts``), and resume a program once
all of its calls are settled; both build records with ``Run``, so a trajectory's record depends
only on the replies to its calls, never on the driver.

Every call is a recorded step; every triplet is grounded in its step's retrieved passages. The
result is one Trajectory record (``schemas.TRAJECTORY``) per question x sample, whatever happens.

Replies are read with the prompt version's output format (``prompts.output_format``); with
constrained decoding on (``llm.constrained``) every call also carries that format's grammar for
its step kind (``step_constraints``), so the model can only write what the parser reads.
"""

from __future__ import annotations

import json
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from factory.agent import prompts
from factory.agent.fields import KINDS
from factory.agent.program import (
    STATUSES,
    STOP_REASONS,
    Call,
    Context,
    Job,
    Tally,
    program_for,
    settle,
    trajectory_id,
)
from factory.agent.step_record import unusable_reason
from factory.llm.base import LLM, ChatRequest, ChatResponse, Constraint, Sampling
from factory.utils.errors import FactoryError
from factory.utils.metrics import exact_match, f1

__all__ = ["STATUSES", "STOP_REASONS", "run_trajectories", "step_constraints", "trajectory_id"]

# ---------------------------------------------------------------- constraints


def step_constraints(version: str, max_pairs: int) -> dict[str, Constraint]:
    """Per step kind, the grammar of ``version``'s output format (regex, GBNF, JSON schema)."""
    from factory.agent import grammar

    fmt = prompts.output_format(version)
    out = {}
    for kind in KINDS:
        node = fmt.grammar(kind, max_pairs)
        schema = fmt.json_schema(kind, max_pairs)
        out[kind] = Constraint(
            name=f"{version}/{kind}/pairs={max_pairs}",
            regex=node.regex(),
            gbnf=grammar.gbnf(node),
            json_schema=json.dumps(schema, ensure_ascii=False) if schema is not None else None,
        )
    return out


def constrained_decoding(params: Any, llm: LLM) -> bool:
    """``llm.constrained``: on, off, or auto (on for the local backend, where no server must support it)."""
    mode = params.llm.constrained
    return mode == "on" or (mode == "auto" and getattr(llm, "backend", "") == "local")


# ---------------------------------------------------------------- a run: jobs and records


class Run:
    """What the drivers share: the context of the programs, job creation and record building.

    ``questions``: their passages form the pool of retrieval unless ``passages`` (pid -> passage, a
    store or dict) is given, which comes first. ``policy``: a ``factory.agent.policy.Policy`` (its name
    is recorded; a scripted LLM records ``scripted``). ``run_id`` prefixes trajectory ids (default
    ``<policy>/round_<r>``).
    """

    def __init__(
        self,
        questions: Sequence[dict],
        llm: LLM,
        retriever: Any,
        params: Any,
        policy: Any,
        round_: int,
        sampling: Sampling,
        *,
        passages: Mapping[str, Mapping] | None = None,
        run_id: str | None = None,
    ):
        from factory.agent.grounding import ground_triplet  # imported here: the loop module stays light

        pool: dict[str, Mapping] = {}
        for q in questions:
            for p in q.get("passages") or []:
                pool.setdefault(p["pid"], p)
        if passages is not None:  # a store (or dict) of passages first, the questions' own pools after
            pool = ChainMap(passages, pool)
        version = params.agent.prompt_version
        stop = prompts.prompt_set(version).stop  # unknown version: fail before any call
        constraints = None
        if constrained_decoding(params, llm):
            constraints = step_constraints(version, params.agent.max_pairs)
            check = getattr(getattr(llm, "inner", llm), "constraint_fields", None)
            if check is not None:  # a server field that cannot carry this syntax: fail before any call
                check(ChatRequest((), constraint=constraints["explore"]))
        self.ctx = Context(
            params, retriever, pool, version, ground_triplet, prompts.output_format(version), constraints
        )
        self.sampling = replace(sampling, stop=tuple(dict.fromkeys((*sampling.stop, *stop))))
        self.llm = llm
        self.round = int(round_)
        self.recorded_policy = "scripted" if getattr(llm, "backend", "") == "scripted" else policy.name
        self.run = run_id or f"{self.recorded_policy}/round_{round_}"
        self.model = str(llm.identity)
        self.jobs = 0
        self._mark_unusable = getattr(llm, "mark_unusable", None)  # a cached backend's

    def job(self, q: dict, sample: int, rationalized: bool = False) -> Job:
        tid = trajectory_id(self.run, q["question_id"], sample, rationalized)
        hint = (q.get("answers") or [None])[0] if rationalized else None
        if rationalized and not hint:
            raise FactoryError(
                f"question {q['question_id']!r}: rationalization needs a gold answer "
                "(field 'answers' is empty)"
            )
        self.jobs += 1
        return Job(self.jobs - 1, q, sample, tid, program_for(self.ctx, q, tid, hint), Tally(), rationalized)

    def record(self, job: Job, fields: dict) -> dict:
        q = job.question
        record = {
            "trajectory_id": job.tid,
            "question_id": q["question_id"],
            "dataset": q["dataset"],
            "split": q["split"],
            "qtype": q["qtype"],
            "route": q["route"],
            "policy": self.recorded_policy,
            "round": self.round,
            "sample": job.sample,
            "seed": int(self.sampling.seed),
            "question": q["question"],
            "answers": list(q["answers"]),
            "prompt_version": self.ctx.version,
            "model": self.model,
            **fields,
            "em": exact_match(fields["answer"], q["answers"]) if fields["answer"] is not None else 0.0,
            "f1": f1(fields["answer"], q["answers"]) if fields["answer"] is not None else 0.0,
            "rationalized": bool(job.rationalized),
            "llm_calls": job.tally.calls,
            "prompt_tokens": job.tally.prompt_tokens,
            "completion_tokens": job.tally.completion_tokens,
            "latency_s": job.tally.latency_s,
        }
        record["correct"] = record["em"] == 1.0
        return record

    def settle(self, job: Job, call: Call, response: ChatResponse) -> None:
        job.tally.add(response)
        settle(call, response, self.ctx.version, self.ctx.params.agent.repair_attempts)
        out = call.outcome
        if out is not None and call.replies and self._mark_unusable is not None:
            reason = unusable_reason(out.status, out.error)
            if reason is not None:  # every attempt of the call: a re-run asks it afresh
                self._mark_unusable(call.replies, reason)


# ---------------------------------------------------------------- the lockstep driver


def run_trajectories(
    run: Run,
    questions: Sequence[dict],
    samples: int | Sequence[int],
    on_done: Callable[[dict], None] | None = None,
    *,
    on_progress: Callable[[float], None] | None = None,
    rationalized: bool = False,
) -> list[dict]:
    """Run one trajectory per question x sample of ``run`` (a ``Run``: the model, retriever, params, policy,
    round and sampling), all in lockstep; records in (question, sample) order.

    ``samples``: how many per question (or the sample indices). ``rationalized``: give each trajectory
    the gold answer as a hint; the recorded prompts stay hint-free. ``on_done`` gets each record as soon
    as it is finished; ``on_progress`` gets, after every batch, how much of the unfinished trajectories
    is done (in trajectories, from their calls against ``step_budget``): a long lockstep run's progress.
    """
    sample_ids = list(range(samples)) if isinstance(samples, int) else [int(s) for s in samples]
    llm = run.llm
    jobs = [run.job(q, s, rationalized) for q in questions for s in sample_ids]
    results: list[dict | None] = [None] * len(jobs)

    active: list[Job] = []
    for job in jobs:
        job.calls = next(job.program)
        active.append(job)
    while active:
        pending = [(job, call) for job in active for call in job.calls if call.outcome is None]
        requests = [job.request(call, run.sampling) for job, call in pending]
        responses = llm.generate(requests)
        if len(responses) != len(requests):
            raise FactoryError(
                f"LLM backend {llm.backend!r} returned {len(responses)} responses for {len(requests)} "
                "requests"
            )
        for (job, call), response in zip(pending, responses):
            run.settle(job, call, response)
        still: list[Job] = []
        for job in active:
            if any(call.outcome is None for call in job.calls):
                still.append(job)
                continue
            try:
                job.calls = job.program.send([call.outcome for call in job.calls])
                still.append(job)
            except StopIteration as stop:
                record = run.record(job, stop.value)
                results[job.index] = record
                if on_done is not None:
                    on_done(record)
        active = still
        if on_progress is not None:
            budget = step_budget(run.ctx.params.agent)
            on_progress(sum(min(job.tally.calls / budget, 0.9) for job in active))
    return [r for r in results if r is not None]


def step_budget(agent: Any) -> int:
    """The calls a trajectory makes at most without repairs: each iteration's explore step and one
    completion per pair, then the final answer (for progress estimates only)."""
    return agent.max_iterations * (1 + agent.max_pairs) + 1
