"""Stage evaluate: greedy inference of a policy on the held-out or test split; EM/F1 by dataset, type, route.

``--variant V --round R`` evaluates the policy after round R (the adapter trained on round R's
set, falling back past rounds that produced none); ``--variant base`` evaluates the base model
(shared by every chain). The questions are ``evaluate.n_questions`` of the split, even across
datasets, drawn with ``evaluate.seed``: the same questions every round, for every protocol seed and
for the base model (the stop rule compares them question by question). The base model's held-out
evaluation, the protocol's first LLM stage, checks every sample of the protocol (training, held-out,
test) against the corpora: one too large stops the run there (``factory.execution.sampling``).
Writes the trajectories (data/eval/...) and the metrics (metrics/eval/...); a round after the stop
point records ``skipped``.
"""

from __future__ import annotations

import logging

from factory.agent.policy import BASE
from factory.agent.setup import sample_pool
from factory.bootstrap.rounds import policy_after
from factory.execution.engine import preflight
from factory.execution.evaluate import evaluate_policy
from factory.execution.sampling import SPLITS, check_samples
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import Round, empty_parquet
from factory.utils import paths
from factory.utils.io import outputs_together
from factory.variants import registry

COMMAND = "evaluate"
HELP = (
    "greedy inference of the policy after a round on the held-out or test split (EM/F1 by dataset, "
    "type, route)"
)
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(
        parser,
        "evaluate the policy after this round (ignored for base)",
        variants=(BASE, *registry.NAMES),
        round_default=0,
    )
    parser.add_argument("--split", choices=("heldout", "test"), default="heldout", help="which split")


def output_paths(variant: str, round_: int, split: str, seed: int):
    """(trajectories parquet, metrics json) of one evaluation."""
    if variant == BASE:
        return paths.base_eval_data(split), paths.base_eval_metrics(split)
    return paths.eval_data(variant, round_, split, seed), paths.eval_metrics(variant, round_, split, seed)


@outputs_together()
def run(params: Params, variant: str, round_: int = 0, split: str = "heldout", seed: int = 0) -> dict:
    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    data_path, metrics_path = output_paths(variant, round_, split, seed)
    rnd = Round(COMMAND, variant, round_, seed, metrics_path=metrics_path, note=split)
    head = rnd.head(round=round_ if variant != BASE else None, split=split)
    reason = rnd.stop_reason()  # None for the base model
    if reason is not None:
        return rnd.skip(head, reason, empty_parquet(data_path, "trajectory"))

    if variant == BASE and split == "heldout":
        # the protocol's first LLM stage: a training or test split too small for its sample stops the run
        # here, not hours later in a round or in select
        check_samples(params, sample_pool(), SPLITS)
    policy = policy_after(variant, round_ if variant != BASE else -1, seed)
    run_id = f"eval/{BASE}/{split}" if variant == BASE else f"eval/{rnd.run_id}/{split}"
    result, _ = evaluate_policy(
        params,
        policy,
        split=split,
        run_id=run_id,
        out_path=data_path,
        desc=f"evaluate {variant} r{round_} {split}",
    )
    metrics = rnd.write_metrics({**head, **result})
    log.info(
        "evaluate %s (policy %s) on %d %s questions: EM %.3f F1 %.3f -> %s",
        variant,
        policy.name,
        metrics["questions"],
        split,
        metrics["em"] or 0.0,
        metrics["f1"] or 0.0,
        metrics_path,
    )
    return metrics
