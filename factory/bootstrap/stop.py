"""The stopping rule of bootstrapping (docs/design.md §5): after each round, does the chain go on?

After each round, the new policy's held-out EM is compared with the
best policy so far (the base model included). The round improves when its EM rises by at least
``min_delta`` (a float tolerance keeps 0.15 - 0.10 equal to 0.05; a rise of nothing is no rise)
and, under ``stop_test: paired_bootstrap``, when the lower bound of the 95% paired bootstrap
interval of the per-question EM difference against that best policy is above 0: the held-out
questions are the same every round, so one question flipping is noise, not progress. When no round
has improved for ``patience`` rounds, or ``max_rounds`` rounds have run, later rounds are skipped.

The rule reads per-question held-out EM (data/eval/...parquet), the same questions every round
and for the base model; each decision records, per round, the difference against the best policy
before it, its 95% CI and a digest of the scores it used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from factory.agent.policy import BASE
from factory.params.round_sections import BootstrapParams
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import read_json
from factory.utils.stats import TOLERANCE, paired_difference, scores_digest
from schemas import read_rows


def heldout_scores(variant: str, round_: int = -1, seed: int = 0) -> dict[str, float] | None:
    """Per-question held-out EM (question id -> EM) of the policy after a round (variant 'base': the
    base model's evaluation); None when that round's evaluation was skipped."""
    if variant == BASE:
        metrics_path, data_path = paths.base_eval_metrics("heldout"), paths.base_eval_data("heldout")
    else:
        metrics_path = paths.eval_metrics(variant, round_, "heldout", seed)
        data_path = paths.eval_data(variant, round_, "heldout", seed)
    if not metrics_path.exists():
        raise FactoryError(f"{metrics_path} is missing: evaluate that policy on the held-out split first")
    if read_json(metrics_path).get("status") == "skipped":
        return None
    if not data_path.exists():
        raise FactoryError(f"{data_path} is missing: evaluate that policy on the held-out split first")
    scores: dict[str, float] = {}
    for row in read_rows(data_path, columns=["question_id", "em", "rationalized"]):
        if row["rationalized"]:
            continue
        if row["question_id"] in scores:
            raise FactoryError(
                f"{data_path}: question {row['question_id']!r} evaluated twice (field 'question_id')"
            )
        scores[row["question_id"]] = float(row["em"])
    if not scores:
        raise FactoryError(f"{data_path} holds no evaluated question")
    return scores


STOP_TESTS = ("threshold", "paired_bootstrap")


def round_test(
    scores: Mapping[str, float],
    best: Mapping[str, float],
    *,
    round_: int,
    against: int,
    min_delta: float,
    stop_test: str,
    samples: int,
    seed: int,
) -> dict:
    """Does round ``round_`` (per-question held-out EM ``scores``) improve on the best policy so far
    (round ``against``, -1 = base; its scores ``best``)? Both were evaluated on the same questions."""
    if stop_test not in STOP_TESTS:
        raise FactoryError(f"bootstrap.stop_test must be one of {STOP_TESTS} (got {stop_test!r})")
    if set(scores) != set(best):
        only = sorted(set(scores) ^ set(best))
        raise FactoryError(
            f"round {round_} and {'the base model' if against < 0 else f'round {against}'} were evaluated on "
            f"different held-out questions (e.g. {only[:3]}); the paired test needs the same questions: "
            "re-run the chain's evaluations with the same evaluate.* params"
        )
    em, best_em = _mean(scores), _mean(best)
    gain = em - best_em
    paired = paired_difference(scores, best, samples=samples, seed=seed, names=(round_, against))
    rises = gain > TOLERANCE and gain >= min_delta - TOLERANCE
    lower = paired["ci"][0]
    significant = lower is not None and lower > TOLERANCE
    return {
        "round": round_,
        "against": against,
        "em": em,
        "best_em": best_em,
        "difference": paired["difference"],
        "ci": paired["ci"],
        "n": paired["n"],
        "rises": rises,  # EM rose by at least min_delta: the threshold test alone
        "ci_above_zero": significant,
        "improved": rises and (significant or stop_test == "threshold"),
        "digest": scores_digest(scores),
    }


def _mean(scores: Mapping[str, float]) -> float:
    if not scores:
        raise FactoryError("an evaluation with no question cannot be compared")
    return float(sum(scores.values()) / len(scores))


@dataclass
class Decision:
    round: int  # the round just evaluated (-1: chain start)
    base_em: float
    history: list[float | None]  # held-out EM after each round 0..round; None = round skipped
    best_round: int  # -1 = the base model is best
    best_em: float
    stale_rounds: int  # rounds since the last improvement
    stop: bool  # True: rounds after this one are skipped
    reason: str | None
    # per round 0..round: the test against the best policy before it (None = round skipped)
    tests: list[dict | None] = field(default_factory=list)
    test: dict | None = None  # the test of the round just evaluated (difference, 95% CI, improved)
    base_digest: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def decide(
    base: Mapping[str, float], history: Sequence[Mapping[str, float] | None], params: BootstrapParams
) -> Decision:
    """Apply the stopping rule (``params``: min_delta, patience, max_rounds, stop_test and the paired
    bootstrap's ci_samples / ci_seed) to per-question held-out EM (question id -> 0/1) of the base model
    and of each round so far (None = a skipped round)."""
    min_delta, patience, stop_test = params.min_delta, params.patience, params.stop_test
    best_round, best_scores, stale = -1, base, 0
    reason = None
    tests: list[dict | None] = []
    ems: list[float | None] = []
    for r, scores in enumerate(history):
        if scores is None:
            tests.append(None)
            ems.append(None)
            reason = reason or "an earlier decision stopped this chain"
            continue
        test = round_test(
            scores,
            best_scores,
            round_=r,
            against=best_round,
            min_delta=min_delta,
            stop_test=stop_test,
            samples=params.ci_samples,
            seed=params.ci_seed,
        )
        tests.append(test)
        ems.append(test["em"])
        if test["improved"]:
            best_round, best_scores, stale = r, scores, 0
        else:
            stale += 1
        if reason is None and stale >= patience:
            test_name = "" if stop_test == "threshold" else " with a 95% paired bootstrap CI above 0"
            reason = (
                f"held-out EM has not risen by at least {min_delta}{test_name} for {stale} round(s) "
                f"(patience {patience})"
            )
    if reason is None and len(history) >= params.max_rounds:
        reason = f"max_rounds ({params.max_rounds}) reached"
    return Decision(
        len(history) - 1,
        _mean(base),
        ems,
        best_round,
        _mean(best_scores),
        stale,
        reason is not None,
        reason,
        tests,
        tests[-1] if tests else None,
        scores_digest(base),
    )
