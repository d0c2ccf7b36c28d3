"""Stage select: per variant, pick each chain's best round and evaluate it once on the test split.

The best round comes from the chain's last stop decision (held-out EM; -1 = the base model stayed
best). The test split is touched here only, once per chain, for that round. Writes the chain
decisions and test numbers to metrics/bootstrap/<variant>.json and metrics/test/<variant>.json, and
the test trajectories to data/eval/<variant>/selected/seed_<s>_test.parquet.
"""

from __future__ import annotations

import logging

from factory.bootstrap.rounds import policy_after
from factory.execution.evaluate import evaluate_policy
from factory.params.config import Params
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import outputs_together, read_json, write_json

COMMAND = "select"
HELP = "pick each chain's best round by held-out EM and evaluate it once on the test split"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("--variant", required=True, help="supervision variant (all its protocol seeds)")


def last_decision(variant: str, seed: int, max_slots: int) -> dict:
    """The latest decision of a chain (the one after its last round slot that has one)."""
    for r in range(max_slots - 1, -1, -1):
        path = paths.decision(variant, r, seed)
        if path.exists():
            return read_json(path)
    path = paths.init_decision(variant, seed)
    if not path.exists():
        raise FactoryError(f"no bootstrap decision for {variant} seed {seed}: run its rounds first")
    return read_json(path)


@outputs_together()
def run(params: Params, variant: str) -> dict:
    chains = {}
    for seed in params.bootstrap.seeds:
        decision = last_decision(variant, seed, len(params.bootstrap.rounds))
        policy = policy_after(variant, decision["best_round"], seed)
        metrics, _ = evaluate_policy(
            params,
            policy,
            split="test",
            run_id=f"test/{variant}/seed_{seed}/selected",
            out_path=paths.selected_test_data(variant, seed),
            desc=f"test {variant} seed {seed}",
        )
        chains[str(seed)] = {
            "decision": decision,
            "selected_round": decision["best_round"],
            "selected_policy": policy.name,
            "heldout_em": decision["best_em"],
            "test": {
                k: metrics[k]
                for k in ("em", "f1", "questions", "asked", "by_dataset", "by_route", "by_qtype")
                if k in metrics
            },
        }
        log.info(
            "select %s seed %d: round %d (%s), held-out EM %.3f, test EM %.3f",
            variant,
            seed,
            decision["best_round"],
            policy.name,
            decision["best_em"],
            metrics["em"] or 0.0,
        )
    write_json(
        paths.METRICS / "bootstrap" / f"{variant}.json",
        {
            "variant": variant,
            "rule": {
                "min_delta": params.bootstrap.min_delta,
                "patience": params.bootstrap.patience,
                "max_rounds": params.bootstrap.max_rounds,
                "stop_test": params.bootstrap.stop_test,
                "ci_samples": params.bootstrap.ci_samples,
                "ci_seed": params.bootstrap.ci_seed,
            },
            "chains": {
                s: {k: c[k] for k in ("decision", "selected_round", "selected_policy", "heldout_em")}
                for s, c in chains.items()
            },
        },
    )
    summary = {
        "variant": variant,
        "chains": {
            s: {k: c[k] for k in ("selected_round", "selected_policy", "test")} for s, c in chains.items()
        },
    }
    write_json(paths.METRICS / "test" / f"{variant}.json", summary)
    return summary
