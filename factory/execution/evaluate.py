"""Greedy evaluation of a policy on a split: the same questions for every policy and protocol seed."""

from __future__ import annotations

from factory.agent.policy import Policy
from factory.agent.setup import load_inputs, make_policy_llm
from factory.config import Params
from factory.execution.generate import generate_trajectories
from factory.execution.sampling import evaluation_sample
from factory.execution.summary import summarize_file
from factory.llm.base import cache_use


def evaluate_policy(
    params: Params, policy: Policy, *, split: str, run_id: str, out_path, desc: str = "evaluate"
) -> tuple[dict, list[dict]]:
    """Greedy inference of ``policy`` on ``evaluate.n_questions`` questions of ``split``, written to
    ``out_path``; returns (metrics, the outcome of each trajectory).

    The questions are the same for every policy and every protocol seed: the base model's held-out
    evaluation (one, shared by all chains) pairs question by question with every round's, which the
    paired stop test needs; protocol seeds repeat the training, not the choice of evaluation questions.
    """
    inputs = load_inputs(params)
    chosen, sampling = evaluation_sample(params, inputs.questions, split)
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
            round_=max(policy.round, 0),
            samples=1,
            sampling=sampling,
            out_path=out_path,
            run_id=run_id,
            desc=desc,
        )
        cache, identity = cache_use(llm), llm.identity
    finally:
        llm.close()
    summary = summarize_file(out_path, breakdowns=("dataset", "qtype", "route"))
    summary.pop("rationalized", None)  # evaluation never rationalizes
    overall = summary["overall"]
    metrics = {
        "status": "done",
        "policy": policy.name,
        "policy_round": policy.round,
        "model": identity,
        "prompt_version": params.agent.prompt_version,
        "questions": len(chosen),
        "eval_seed": sampling.seed,
        "em": overall["em"],
        "f1": overall["f1"],
        "cache": cache,
        **summary,
    }
    return metrics, records
