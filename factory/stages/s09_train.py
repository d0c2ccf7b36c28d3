"""Stage train: LoRA SFT of one round of a variant's chain on its supervision set.

Writes models/<V>/seed_<S>/round_<R>/ (adapter/, loss_curve.json, training_config.json,
status.json) and metrics/train/<V>/seed_<S>/round_<R>.json. A round after the stop point is
recorded ``skipped``; a round whose supervision set is empty is recorded ``empty``; neither
leaves an adapter, so the next round falls back to the last trained policy (factory.rounds).
Runs unchanged under ``accelerate launch`` (only rank 0 writes).
"""

from __future__ import annotations

import logging
from pathlib import Path

from factory import paths
from factory.config import Params
from factory.errors import FactoryError
from factory.io import write_json
from factory.rounds import policy_for, skip_reason
from factory.train import SKIPPED, is_main_process, reset_output, train_lora, write_status
from schemas import read_rows

COMMAND = "train"
HELP = "LoRA fine-tuning of a variant's round on its supervision set (loss on assistant tokens only)"
UNTRAINABLE_POLICIES = ("scripted", "simulated")  # test/demo generators: never trained on
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("--variant", required=True, help="supervision variant (backtrace, random, unfiltered)")
    parser.add_argument("--round", dest="round_", type=int, required=True, help="bootstrapping round (1..max_rounds)")
    parser.add_argument("--seed", type=int, default=0, help="protocol seed of the chain (one of bootstrap.seeds)")


def base_model_path(params: Params) -> Path:
    """The local base model folder: llm.model for the local backend, model.dir when serving via openai."""
    path = Path(params.llm.model if params.llm.backend == "local" else params.model.dir)
    if not (path / "config.json").exists():
        raise FactoryError(f"base model folder {path} not found (run `factory prepare-model` first)")
    return path


def check_trainable(rows: list[dict], variant: str, source: Path) -> None:
    """Refuse sets from scripted/simulated generators or from another variant's chain."""
    for row in rows:
        if row["policy"] in UNTRAINABLE_POLICIES:
            raise FactoryError(
                f"{source}: example {row['example_id']!r} comes from the {row['policy']!r} policy (field 'policy'); "
                "scripted and simulated trajectories are for tests and demos and are never trained on"
            )
        if row["variant"] != variant:
            raise FactoryError(f"{source}: example {row['example_id']!r} belongs to variant {row['variant']!r} (field 'variant'), not {variant!r}")


def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    out = paths.adapter_dir(variant, round_, seed)
    metrics_path = paths.stage_metrics("train", variant, round_, seed)
    head = {"variant": variant, "round": round_, "seed": seed}
    reason = skip_reason(variant, round_, seed)
    if reason:
        reset_output(out)
        write_status(out, SKIPPED, reason)
        metrics = {**head, "status": SKIPPED, "reason": reason}
        if is_main_process():
            write_json(metrics_path, metrics)
        log.info("train %s round %d (seed %d): skipped: %s", variant, round_, seed, reason)
        return metrics

    source = paths.supervision_dir(variant, round_, seed) / "train.parquet"
    if not source.exists():
        raise FactoryError(f"{source} is missing: run `factory variants --variant {variant} --round {round_} --seed {seed}` first")
    rows = read_rows(source)
    check_trainable(rows, variant, source)
    head["examples_in_set"] = len(rows)
    init_adapter, init_policy = None, "base"
    if params.train.init == "previous":
        previous = policy_for(variant, round_, seed)
        init_adapter, init_policy = previous.adapter, previous.name
        if previous.adapter is not None:
            # The continued adapter has already seen the (accumulated) examples of its own rounds.
            rows = [r for r in rows if r["round"] > previous.round]
    # Effective seed of this chain (common rule: param seed + 1000 * protocol seed).
    train_params = params.train.model_copy(update={"seed": params.train.seed + 1000 * seed})
    log.info("train %s round %d (seed %d): %d examples from %s, init %s", variant, round_, seed, len(rows), source, init_policy)
    result = train_lora(rows, base_model_path(params), out, train_params, init_adapter)
    metrics = {**head, **result, "init_policy": init_policy, "supervision": str(source)}
    if is_main_process():
        write_json(metrics_path, metrics)
    return metrics
