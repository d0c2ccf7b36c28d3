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

from factory.bootstrap.rounds import policy_for
from factory.execution.engine import preflight
from factory.execution.round import log_round, round_trajectories
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import Round, empty_parquet
from factory.utils.io import outputs_together

COMMAND = "trajectories"
HELP = "generate KnowTrace trajectories for one round of a variant's chain (sharded, resumable)"


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round (0 = the base model's trajectories)")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    rnd = Round(COMMAND, variant, round_, seed)
    reason = rnd.stop_reason()
    if reason is not None:
        return rnd.skip(rnd.head(), reason, empty_parquet(rnd.trajectories, "trajectory"))
    policy = policy_for(variant, round_, seed)
    result, records = round_trajectories(
        params,
        policy,
        protocol_seed=seed,
        round_=round_,
        out_path=rnd.trajectories,
        run_id=rnd.run_id,
        desc=f"trajectories {variant} r{round_}",
    )
    metrics = rnd.write_metrics({**rnd.head(), **result})
    label = f"trajectories {variant} round {round_} (seed {seed}, policy {policy.name})"
    log_round(label, metrics, len(records), rnd.trajectories)
    return metrics
