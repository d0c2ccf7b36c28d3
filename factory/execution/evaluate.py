"""Greedy evaluation of a policy on a split: the same questions for every policy and protocol seed."""

from __future__ import annotations

from factory.agent.policy import Policy
from factory.execution.round import generate_sample
from factory.execution.sampling import evaluation_sample
from factory.execution.summary import summarize_file
from factory.params.config import Params


def evaluate_policy(
    params: Params, policy: Policy, *, split: str, run_id: str, out_path, desc: str = "evaluate"
) -> tuple[dict, list[dict]]:
    """Greedy inference of ``policy`` on ``evaluate.n_questions`` questions of ``split``, written to
    ``out_path``; returns (metrics, the outcome of each trajectory).

    The questions are the same for every policy and every protocol seed: the base model's held-out
    evaluation (one, shared by all chains) pairs question by question with every round's, which the
    paired stop test needs; protocol seeds repeat the training, not the choice of evaluation questions.
    """
    generated = generate_sample(
        params,
        policy,
        lambda questions: evaluation_sample(params, questions, split),
        splits=(split,),
        round_=max(policy.round, 0),
        samples=1,
        out_path=out_path,
        run_id=run_id,
        desc=desc,
    )
    summary = summarize_file(out_path, breakdowns=("dataset", "qtype", "route"))
    summary.pop("rationalized", None)  # evaluation never rationalizes
    overall = summary["overall"]
    metrics = {
        "status": "done",
        "policy": policy.name,
        "policy_round": policy.round,
        "model": generated.model,
        "prompt_version": params.agent.prompt_version,
        "questions": generated.questions,
        "asked": params.evaluate.n_questions,  # more than questions: evaluate.allow_fewer let it run short
        "eval_seed": generated.sampling.seed,
        "em": overall["em"],
        "f1": overall["f1"],
        "cache": generated.cache,
        **summary,
    }
    return metrics, generated.records
