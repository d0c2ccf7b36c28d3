"""The policy that generates trajectories: the base model or the LoRA adapter of a round.

Which round's policy generates what is ``factory.bootstrap.rounds``; its backend is built by
``factory.agent.setup``. The scripted and simulated generators (tests, analysis) are policies too,
and ``assert_trainable`` keeps them out of every training set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from factory.utils.errors import FactoryError

BASE = "base"
UNTRAINABLE_POLICIES = ("scripted", "simulated")  # test/analysis generators: never trained on


@dataclass(frozen=True)
class Policy:
    name: str  # "base" or "<variant>-r<round>" (+ "-s<seed>" for protocol seeds other than 0)
    adapter: Path | None  # LoRA adapter folder; None = the base model
    round: int  # the round whose set trained it (-1 = base)


def is_untrainable(policy: str) -> bool:
    """True for the scripted and simulated generators (also with a suffix, e.g. ``scripted-x``)."""
    return policy in UNTRAINABLE_POLICIES or policy.startswith(tuple(p + "-" for p in UNTRAINABLE_POLICIES))


def assert_trainable(records: Iterable[Mapping], what: str = "supervision") -> None:
    """Refuse trajectories or examples of the scripted or simulated policies: they must never be trained
    on."""
    bad = Counter(str(r.get("policy")) for r in records if is_untrainable(str(r.get("policy") or "")))
    if bad:
        found = ", ".join(f"{n} record(s) of policy {p!r} (field 'policy')" for p, n in sorted(bad.items()))
        raise FactoryError(
            f"refusing to build {what} from {found}: scripted and simulated trajectories are for tests "
            "and analysis only"
        )
