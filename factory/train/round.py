"""What the train stage needs around ``fit_lora`` for one round: the base model's folder, the checks
on the set, where the adapter starts (``train.init``) and the folders of a round that trains nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from factory.agent.policy import Policy, is_untrainable
from factory.params.config import Params
from factory.train.live import write_untrained
from factory.train.lora import SKIPPED, is_main_process, reset_output, write_status
from factory.utils.errors import FactoryError


def base_model_path(params: Params) -> Path:
    """The local base model folder: llm.model for the local backend, model.dir when serving via openai."""
    path = Path(params.llm.model if params.llm.backend == "local" else params.model.dir)
    if not (path / "config.json").exists():
        raise FactoryError(f"base model folder {path} not found (run `factory prepare-model` first)")
    return path


def check_trainable(rows: list[dict], variant: str, source: Path) -> None:
    """Refuse sets from scripted/simulated generators or from another variant's chain."""
    for row in rows:
        if is_untrainable(row["policy"]):
            raise FactoryError(
                f"{source}: example {row['example_id']!r} comes from the {row['policy']!r} policy (field "
                "'policy'); "
                "scripted and simulated trajectories are for tests and demos and are never trained on"
            )
        if row["variant"] != variant:
            raise FactoryError(
                f"{source}: example {row['example_id']!r} belongs to variant {row['variant']!r} (field "
                f"'variant'), not {variant!r}"
            )


def starting_point(rows: Sequence[dict], previous: Policy | None) -> tuple[list[dict], Path | None, str]:
    """(the examples to train on, the adapter to continue or None, the name of the starting policy):
    from the base model when ``previous`` is None (``train.init: base``), else from ``previous``, the
    policy after the round before, which has already seen the (accumulated) examples of its own rounds."""
    if previous is None or previous.adapter is None:
        return list(rows), None, previous.name if previous is not None else "base"
    return [r for r in rows if r["round"] > previous.round], previous.adapter, previous.name


def write_skipped(out: Path, live_dir: Path, reason: str) -> None:
    """The model folder (status.json: skipped, no adapter) and DVCLive folder of a skipped round."""
    reset_output(out)
    write_status(out, SKIPPED, reason)
    if is_main_process():
        write_untrained(live_dir, SKIPPED)
