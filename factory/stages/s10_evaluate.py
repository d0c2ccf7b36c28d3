"""Stage evaluate: greedy inference of a policy on the held-out or test split; EM/F1 by dataset, type, route.

``--variant V --round R`` evaluates the policy after round R (the adapter trained on round R's
set, falling back past rounds that produced none); ``--variant base`` evaluates the base model
(shared by every chain). The questions are ``evaluate.n_questions`` of the split, even across
datasets, drawn with ``evaluate.seed`` + 1000 x protocol seed: the same questions every round.
Writes the trajectories (data/eval/...) and the metrics (metrics/eval/...); a round after the stop
point records ``skipped``.
"""

from __future__ import annotations

import logging

from factory import paths
from factory.agent.generate import generate_trajectories
from factory.agent.sampling import derived_seed, sample_questions
from factory.agent.summary import summarize
from factory.config import VARIANTS, Params
from factory.io import write_json
from factory.llm.base import Sampling
from factory.rounds import BASE, policy_after, skip_reason
from factory.stages import chain_arguments
from factory.stages.s04_trajectories import load_inputs, make_policy_llm
from schemas import write_parquet

COMMAND = "evaluate"
HELP = "greedy inference of the policy after a round on the held-out or test split (EM/F1 by dataset, type, route)"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "evaluate the policy after this round (ignored for base)", variants=(BASE, *VARIANTS), round_default=0)
    parser.add_argument("--split", choices=("heldout", "test"), default="heldout", help="which split")


def output_paths(variant: str, round_: int, split: str, seed: int):
    """(trajectories parquet, metrics json) of one evaluation."""
    if variant == BASE:
        return paths.base_eval_data(split), paths.base_eval_metrics(split)
    return paths.eval_data(variant, round_, split, seed), paths.eval_metrics(variant, round_, split, seed)


def evaluate_policy(params: Params, policy, *, split: str, seed: int, run_id: str, out_path=None, desc: str = "evaluate") -> tuple[dict, list[dict]]:
    """Greedy inference of ``policy`` on ``evaluate.n_questions`` questions of ``split`` (the same
    questions for every policy of a protocol seed); returns (metrics, trajectory records)."""
    e = params.evaluate
    eval_seed = derived_seed(e.seed, seed)
    questions, passages, retriever = load_inputs(params)
    chosen = sample_questions(questions, e.n_questions, seed=eval_seed, split=split)
    sampling = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=params.llm.max_new_tokens, seed=eval_seed)
    llm = make_policy_llm(params, policy)
    try:
        records = generate_trajectories(
            params, chosen, llm=llm, retriever=retriever, passages=passages, policy=policy,
            round_=max(policy.round, 0), samples=1, sampling=sampling, out_path=out_path, run_id=run_id, desc=desc,
        )
        cache = {"hits": int(getattr(llm, "hits", 0)), "misses": int(getattr(llm, "misses", 0))}
        identity = llm.identity
    finally:
        llm.close()
    summary = summarize(records, breakdowns=("dataset", "qtype", "route"))
    summary.pop("rationalized", None)  # evaluation never rationalizes
    overall = summary["overall"]
    metrics = {
        "status": "done", "policy": policy.name, "policy_round": policy.round, "model": identity,
        "prompt_version": params.agent.prompt_version, "questions": len(chosen), "eval_seed": eval_seed,
        "em": overall["em"], "f1": overall["f1"], "cache": cache, **summary,
    }
    return metrics, records


def run(params: Params, variant: str, round_: int = 0, split: str = "heldout", seed: int = 0) -> dict:
    data_path, metrics_path = output_paths(variant, round_, split, seed)
    head = {"variant": variant, "round": round_ if variant != BASE else None, "seed": seed, "split": split}
    reason = skip_reason(variant, round_, seed) if variant != BASE else None
    if reason is not None:
        write_parquet([], data_path, "trajectory")
        metrics = {**head, "status": "skipped", "reason": reason}
        write_json(metrics_path, metrics)
        log.info("evaluate %s round %d (seed %d, %s): skipped (%s)", variant, round_, seed, split, reason)
        return metrics

    policy = policy_after(variant, round_ if variant != BASE else -1, seed)
    run_id = f"eval/{BASE}/{split}" if variant == BASE else f"eval/{variant}/seed_{seed}/round_{round_}/{split}"
    result, _ = evaluate_policy(params, policy, split=split, seed=seed, run_id=run_id, out_path=data_path,
                                desc=f"evaluate {variant} r{round_} {split}")
    metrics = {**head, **result}
    write_json(metrics_path, metrics)
    log.info("evaluate %s (policy %s) on %d %s questions: EM %.3f F1 %.3f -> %s",
             variant, policy.name, metrics["questions"], split, metrics["em"] or 0.0, metrics["f1"] or 0.0, metrics_path)
    return metrics
