"""Round bookkeeping for bootstrapping: which policy generates a round, when to stop.

Numbering (issue 3): round 0's trajectories come from the base model; training on round r's set
gives the adapter ``<variant>-r<r>`` (models/<variant>/seed_<s>/round_<r>/), which generates round
r+1. A round whose training set was empty (or that was skipped) produces no adapter: the policy
after it is the policy before it.

The stopping rule itself is factory.bootstrap.stop; its decisions are read here. DVC cannot stop a
loop, so rounds after a stop still run as stages and record ``skipped``; the report picks the best
round. Each chain starts with an ``init`` decision (the base model's held-out EM) so that every
round, round 0 included, depends on "the decision after the previous step" in the same way.
"""

from __future__ import annotations

from factory.agent.policy import BASE, Policy
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import read_json

INIT = "init"


def policy_name(variant: str, round_: int, seed: int = 0) -> str:
    return BASE if round_ < 0 else f"{variant}-r{round_}" + (f"-s{seed}" if seed else "")


def previous_step(round_: int) -> str:
    """Name of the step before ``round_`` in a chain's folders: 'init' or 'round_<r-1>'."""
    return INIT if round_ <= 0 else f"round_{round_ - 1}"


def read_status(variant: str, round_: int, seed: int = 0) -> dict:
    path = paths.adapter_dir(variant, round_, seed) / "status.json"
    if not path.exists():
        raise FactoryError(
            f"{path} is missing: round {round_} of {variant} (seed {seed}) has not been trained yet"
        )
    return read_json(path)


def policy_after(variant: str, round_: int, seed: int = 0) -> Policy:
    """The policy once round ``round_`` is trained (round < 0: the base model); falls back past
    rounds that produced no adapter (empty set, skipped)."""
    if variant == BASE or round_ < 0:
        return Policy(BASE, None, -1)
    status = read_status(variant, round_, seed)
    if status.get("status") == "trained":
        return Policy(
            policy_name(variant, round_, seed), paths.adapter_dir(variant, round_, seed) / "adapter", round_
        )
    return policy_after(variant, round_ - 1, seed)


def policy_for(variant: str, round_: int, seed: int = 0) -> Policy:
    """The policy that generates round ``round_``'s trajectories: base for round 0, else the one after r-1."""
    if round_ < 0:
        raise FactoryError(f"rounds start at 0 (got {round_})")
    return policy_after(variant, round_ - 1, seed)


def read_decision(variant: str, round_: int, seed: int = 0) -> dict:
    """The decision taken after ``round_`` (round -1: the chain's init decision)."""
    path = paths.decision(variant, round_, seed) if round_ >= 0 else paths.init_decision(variant, seed)
    if not path.exists():
        step = f"round {round_}" if round_ >= 0 else "the chain start"
        raise FactoryError(
            f"{path} is missing: run the bootstrap decision of {step} first (`dvc repro` runs them in order)"
        )
    return read_json(path)


def skip_reason(variant: str, round_: int, seed: int = 0) -> str | None:
    """Why round ``round_`` must not run (the decision taken after the previous step), or None."""
    if variant == BASE:
        return None
    decision = read_decision(variant, round_ - 1, seed)
    return decision["reason"] if decision["stop"] else None
