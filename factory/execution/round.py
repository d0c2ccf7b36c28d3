"""A round's trajectories: its sample of training questions, generated with the round's policy.

The trajectories stage's work, as ``factory.execution.evaluate`` is the evaluate stage's: the round's
questions (``factory.execution.sampling.round_sample``), ``trajectories.samples`` trajectories each
(+ rationalizations), written shard by shard to the round's file, then the file's statistics.
"""

from __future__ import annotations

import logging

from factory.agent.policy import Policy
from factory.agent.setup import load_inputs, make_policy_llm
from factory.config import Params
from factory.execution.generate import generate_trajectories
from factory.execution.sampling import round_sample
from factory.execution.summary import summarize_file
from factory.llm.base import cache_use

log = logging.getLogger(__name__)


def round_trajectories(
    params: Params, policy: Policy, *, protocol_seed: int, round_: int, out_path, run_id: str, desc: str
) -> tuple[dict, list[dict]]:
    """The round's trajectories written to ``out_path`` (checkpointed per shard: a re-run resumes);
    returns (the metrics of the round: policy, sampling, cache use and the file's statistics, the
    outcome of each record)."""
    t = params.trajectories
    inputs = load_inputs(params)
    chosen, sampling = round_sample(params, inputs.questions, protocol_seed, round_)
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
            samples=t.samples,
            sampling=sampling,
            out_path=out_path,
            run_id=run_id,
            rationalize=t.rationalize,
            desc=desc,
        )
        cache, identity = cache_use(llm), llm.identity
    finally:
        llm.close()
    metrics = {
        "status": "done",
        "policy": policy.name,
        "model": identity,
        "prompt_version": params.agent.prompt_version,
        "questions": len(chosen),
        "samples": t.samples,
        "generation_seed": sampling.seed,
        "temperature": t.temperature,
        "cache": cache,
        **summarize_file(out_path, breakdowns=("dataset", "qtype", "route")),
    }
    return metrics, records


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
    failed = o["status"]["llm_error"] + rat["status"]["llm_error"]
    if failed:
        log.warning(
            "%d trajectories ended in llm_error (reasons in the 'error' column); re-running the stage "
            "retries them, with every successful call answered from the response cache",
            failed,
        )
