"""Round bookkeeping for bootstrapping: which policy generates a round, when to stop.

Round 0 is the base model. Round r (1..R_max) generates trajectories with the policy after round
r-1, trains on them and yields the policy after round r. A round whose training set was empty (or
that was skipped) produces no adapter: the policy after it is the policy before it.

The stopping rule (DESIGN §5): after each round, held-out EM is compared with the best so far
(round 0 included); when it has not improved by more than ``min_delta`` for ``patience`` rounds,
or ``max_rounds`` is reached, later rounds are skipped. DVC cannot stop a loop, so skipped rounds
still run as stages and record ``skipped``; the report picks the best round.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from factory import paths
from factory.errors import FactoryError

BASE = "base"


@dataclass(frozen=True)
class Policy:
    name: str  # "base" or "<variant>-r<round>" (+ "-s<seed>" for protocol seeds other than 0)
    adapter: Path | None  # LoRA adapter folder; None = the base model
    round: int  # the round that trained it (0 = base)


def policy_name(variant: str, round_: int, seed: int = 0) -> str:
    return BASE if round_ == 0 else f"{variant}-r{round_}" + (f"-s{seed}" if seed else "")


def read_status(variant: str, round_: int, seed: int = 0) -> dict:
    path = paths.adapter_dir(variant, round_, seed) / "status.json"
    if not path.exists():
        raise FactoryError(f"{path} is missing: round {round_} of {variant} (seed {seed}) has not been trained yet")
    return json.loads(path.read_text())


def policy_after(variant: str, round_: int, seed: int = 0) -> Policy:
    """The policy once round ``round_`` is done (0 = base); falls back past empty/skipped rounds."""
    if variant == BASE or round_ <= 0:
        return Policy(BASE, None, 0)
    status = read_status(variant, round_, seed)
    if status.get("status") == "trained":
        return Policy(policy_name(variant, round_, seed), paths.adapter_dir(variant, round_, seed) / "adapter", round_)
    return policy_after(variant, round_ - 1, seed)


def policy_for(variant: str, round_: int, seed: int = 0) -> Policy:
    """The policy that generates round ``round_``'s trajectories (the one after round r-1)."""
    if round_ < 1:
        raise FactoryError(f"rounds start at 1 (got {round_}); round 0 is the base model")
    return policy_after(variant, round_ - 1, seed)


def skip_reason(variant: str, round_: int, seed: int = 0) -> str | None:
    """Why round ``round_`` must not run (the stop decision taken after round r-1), or None."""
    if variant == BASE or round_ <= 1:
        return None
    path = paths.decision(variant, round_ - 1, seed)
    if not path.exists():
        raise FactoryError(f"{path} is missing: run the bootstrap decision of round {round_ - 1} first")
    decision = json.loads(path.read_text())
    return decision["reason"] if decision["stop"] else None


@dataclass
class Decision:
    round: int
    history: list[float | None]  # held-out EM by round, index 0 = base; None = round skipped
    best_round: int
    best_em: float
    stale_rounds: int  # rounds since the last improvement
    stop: bool  # True: rounds after this one are skipped
    reason: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def decide(history: list[float | None], *, min_delta: float, patience: int, max_rounds: int) -> Decision:
    """Apply the stopping rule to held-out EM by round (index 0 = base, None = skipped round)."""
    if not history or history[0] is None:
        raise ValueError("history must start with the base model's held-out EM")
    best_round, best_em, stale = 0, float(history[0]), 0
    stop_reason = None
    for r, em in enumerate(history[1:], start=1):
        if em is None:
            stop_reason = stop_reason or "an earlier round stopped the chain"
            continue
        if em > best_em + min_delta:
            best_round, best_em, stale = r, float(em), 0
        else:
            stale += 1
        if stop_reason is None and stale >= patience:
            stop_reason = f"held-out EM has not improved by more than {min_delta} for {stale} round(s) (patience {patience})"
    current = len(history) - 1
    if stop_reason is None and current >= max_rounds:
        stop_reason = f"max_rounds ({max_rounds}) reached"
    return Decision(current, list(history), best_round, best_em, stale, stop_reason is not None, stop_reason)
