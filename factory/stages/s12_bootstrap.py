"""Stage bootstrap: the stopping decision after a round's held-out evaluation (or at a chain's start)."""

from __future__ import annotations

import logging

from factory.agent.policy import BASE
from factory.bootstrap.stop import decide, heldout_scores
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import outputs_together, write_json

COMMAND = "bootstrap"
HELP = (
    "decide after a round whether later rounds run (held-out EM, paired bootstrap CI, min_delta, patience, "
    "max_rounds)"
)
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "the round just evaluated (-1: chain start)", round_default=-1)


@outputs_together()
def run(params: Params, variant: str, seed: int = 0, round_: int = -1) -> None:
    b = params.bootstrap
    base = heldout_scores(BASE)
    if base is None:
        raise FactoryError("the base model's held-out evaluation was skipped; it must run")
    history = [heldout_scores(variant, r, seed) for r in range(round_ + 1)]
    decision = decide(base, history, b)
    out = paths.decision(variant, round_, seed) if round_ >= 0 else paths.init_decision(variant, seed)
    # Only the decision and its numbers: later rounds depend on this file, so a rule change that
    # does not change the decision (e.g. -S bootstrap.max_rounds=3) must not change its bytes.
    # The rule itself is recorded by `select` in metrics/bootstrap/<variant>.json.
    write_json(out, {"variant": variant, "seed": seed, **decision.as_dict()})
    if round_ < 0:
        # the chain's starting point, so that round 0 depends on "the step before" like every other round:
        # the base policy (no adapter) and an empty supervision set
        write_json(
            paths.adapter_dir(variant, 0, seed).parent / "init" / "status.json",
            {"status": "base", "adapter": None},
        )
        write_json(
            paths.supervision_dir(variant, 0, seed).parent / "init" / "stats.json",
            {"status": "init", "examples": 0},
        )
    verdict = f"stop ({decision.reason})" if decision.stop else "continue"
    test = decision.test
    against = ""
    if test is not None:
        lo, hi = test["ci"]
        against = (
            f", EM difference vs round {test['against']} {test['difference']:+.3f} "
            f"(95% CI [{lo:+.3f}, {hi:+.3f}]: {'improved' if test['improved'] else 'no gain'})"
        )
    log.info(
        "bootstrap %s seed %d after round %d: EM history %s%s, best round %d -> %s",
        variant,
        seed,
        round_,
        decision.history,
        against,
        decision.best_round,
        verdict,
    )
