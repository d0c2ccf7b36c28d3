"""Trajectories of a policy on a sample of questions: a round's (``round_trajectories``, the trajectories
stage's work) and, through ``generate_sample``, an evaluation's (``factory.execution.evaluate``).

A round's questions come from ``factory.execution.sampling.round_sample``: ``trajectories.samples``
trajectories each (+ rationalizations), written shard by shard to the round's file, then the file's
statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from factory.agent.policy import Policy
from factory.agent.setup import load_inputs, make_policy_llm, sample_pool
from factory.execution.generate import generate_trajectories
from factory.execution.sampling import check_samples, round_sample
from factory.execution.summary import summarize_file
from factory.execution.unusable import unusable_share, unusable_warning
from factory.llm.base import Sampling, cache_use
from factory.params.config import Params

log = logging.getLogger(__name__)


@dataclass
class Generated:
    questions: int  # questions sampled
    sampling: Sampling
    records: list[dict]  # the outcome of each trajectory, in the file's order
    model: str  # the backend's identity (model + adapter hash)
    cache: dict[str, int]  # response cache hits and misses


def generate_sample(
    params: Params,
    policy: Policy,
    draw: Callable[[list[dict]], tuple[list[dict], Sampling]],
    *,
    splits: tuple[str, ...],
    round_: int,
    samples: int,
    out_path,
    run_id: str,
    desc: str,
    rationalize: bool = False,
) -> Generated:
    """Trajectories of ``policy`` on the questions ``draw(questions)`` picks from the ingested ones (with
    their sampling), ``samples`` per question, written to ``out_path`` (checkpointed per shard: a
    re-run resumes). ``splits``: the splits ``draw`` samples, checked first (``check_samples``)."""
    questions = sample_pool()
    check_samples(params, questions, splits)  # a split too small for its sample: refused before any work
    inputs = load_inputs(params, questions)
    chosen, sampling = draw(inputs.questions)
    chosen = inputs.rows(chosen)
    llm = make_policy_llm(params, policy)
    try:
        records = generate_trajectories(
            params,
            chosen,
            llm=llm,
            retriever=inputs.retriever,
            passages=inputs.passages,
            policy=policy,
            round_=round_,
            samples=samples,
            sampling=sampling,
            out_path=out_path,
            run_id=run_id,
            rationalize=rationalize,
            desc=desc,
        )
        return Generated(len(chosen), sampling, records, llm.identity, cache_use(llm))
    finally:
        llm.close()


def round_trajectories(
    params: Params, policy: Policy, *, protocol_seed: int, round_: int, out_path, run_id: str, desc: str
) -> tuple[dict, list[dict]]:
    """The round's trajectories written to ``out_path``; returns (the metrics of the round: policy,
    sampling, cache use and the file's statistics, the outcome of each record)."""
    t = params.trajectories
    generated = generate_sample(
        params,
        policy,
        lambda questions: round_sample(params, questions, protocol_seed, round_),
        splits=("train",),
        round_=round_,
        samples=t.samples,
        out_path=out_path,
        run_id=run_id,
        desc=desc,
        rationalize=t.rationalize,
    )
    metrics = {
        "status": "done",
        "policy": policy.name,
        "model": generated.model,
        "prompt_version": params.agent.prompt_version,
        "questions": generated.questions,
        "asked": t.n_questions,  # more than questions: the split held fewer (trajectories.allow_fewer)
        "samples": t.samples,
        "generation_seed": generated.sampling.seed,
        "temperature": t.temperature,
        "cache": generated.cache,
        **summarize_file(out_path, breakdowns=("dataset", "qtype", "route")),
    }
    metrics["unusable"] = unusable_share(metrics)
    return metrics, generated.records


def log_round(label: str, metrics: dict, records: int, out_path) -> None:
    """The round's line (records, statuses, EM, rationalized, cache) and a warning for failed calls."""
    o, rat, cache = metrics["overall"], metrics["rationalized"], metrics["cache"]
    log.info(
        "%s: %d records; %d ordinary: status %s, EM %.3f; %d rationalized: status %s, correct %d; "
        "cache %d hits / %d misses -> %s",
        label,
        records,
        o["trajectories"],
        o["status"],
        o["em"] or 0.0,
        rat["trajectories"],
        rat["status"],
        rat["correct"],
        cache["hits"],
        cache["misses"],
        out_path,
    )
    warning = unusable_warning(metrics.get("unusable"))
    if warning is not None:
        log.warning("%s: %s", label, warning)
    failed = o["status"]["llm_error"] + rat["status"]["llm_error"]
    if failed:
        log.warning(
            "%d trajectories ended in llm_error (reasons in the 'error' column); re-running the stage "
            "retries them, with every successful call answered from the response cache",
            failed,
        )
