"""Stage trajectories: KnowTrace trajectories for one round of a variant's chain.

Round R samples ``trajectories.n_questions`` training questions (seed = trajectories.seed + 1000 x
protocol seed, + R when ``resample_each_round``), runs ``samples`` trajectories per question with the
policy that generates round R (the base model for round 0, else the adapter trained on round R-1)
and writes data/trajectories/<V>/seed_<S>/round_<R>.parquet: exactly one record per question x
sample, with a status (+ one rationalization per all-wrong question when ``trajectories.rationalize``).
Work is checkpointed per shard: killing the process and re-running continues where it stopped and
writes the same file. A round after the stop point writes an empty file and a ``skipped`` record.
"""

from __future__ import annotations

import logging

from factory import paths
from factory.agent.setup import load_inputs, make_policy_llm
from factory.bootstrap.rounds import policy_for, skip_reason
from factory.config import Params
from factory.execution.engine import preflight
from factory.execution.generate import generate_trajectories
from factory.execution.sampling import round_sample
from factory.execution.summary import summarize_file
from factory.io import outputs_together, write_json
from factory.stages import chain_arguments
from schemas import write_parquet

COMMAND = "trajectories"
HELP = "generate KnowTrace trajectories for one round of a variant's chain (sharded, resumable)"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round (0 = the base model's trajectories)")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    out = paths.trajectories(variant, round_, seed)
    metrics_path = paths.stage_metrics("trajectories", variant, round_, seed)
    head = {"variant": variant, "round": round_, "seed": seed}
    reason = skip_reason(variant, round_, seed)
    if reason is not None:
        write_parquet([], out, "trajectory")
        metrics = {**head, "status": "skipped", "reason": reason}
        write_json(metrics_path, metrics)
        log.info("trajectories %s round %d (seed %d): skipped (%s)", variant, round_, seed, reason)
        return metrics

    t = params.trajectories
    policy = policy_for(variant, round_, seed)
    inputs = load_inputs(params)
    chosen, sampling = round_sample(params, inputs.questions, seed, round_)
    chosen = inputs.rows(chosen)
    gen_seed = sampling.seed
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
            out_path=out,
            run_id=f"{variant}/seed_{seed}/round_{round_}",
            rationalize=t.rationalize,
            desc=f"trajectories {variant} r{round_}",
        )
        cache = {"hits": int(getattr(llm, "hits", 0)), "misses": int(getattr(llm, "misses", 0))}
        identity = llm.identity
    finally:
        llm.close()
    metrics = {
        **head,
        "status": "done",
        "policy": policy.name,
        "model": identity,
        "prompt_version": params.agent.prompt_version,
        "questions": len(chosen),
        "samples": t.samples,
        "generation_seed": gen_seed,
        "temperature": t.temperature,
        "cache": cache,
        **summarize_file(out, breakdowns=("dataset", "qtype", "route")),
    }
    write_json(metrics_path, metrics)
    o, rat = metrics["overall"], metrics["rationalized"]
    log.info(
        "trajectories %s round %d (seed %d, policy %s): %d records; %d ordinary: status %s, EM %.3f; "
        "%d rationalized: status %s, correct %d; cache %d hits / %d misses -> %s",
        variant,
        round_,
        seed,
        policy.name,
        len(records),
        o["trajectories"],
        o["status"],
        o["em"] or 0.0,
        rat["trajectories"],
        rat["status"],
        rat["correct"],
        cache["hits"],
        cache["misses"],
        out,
    )
    failed = o["status"]["llm_error"] + rat["status"]["llm_error"]
    if failed:
        log.warning(
            "%d trajectories ended in llm_error (reasons in the 'error' column); re-running the stage "
            "retries them, with every successful call answered from the response cache",
            failed,
        )
    return metrics
