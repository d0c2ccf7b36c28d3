"""The bootstrapping report: per variant, rounds, stop decisions, selected round, test evaluation, verdict.

Reads the metrics every stage wrote (plain JSON under metrics/) and the test trajectories of each
chain's selected round. Whether the reference variant (backtrace) beats each other variant of the run
(``factory.variants.registry``: the random control, the unfiltered set, the authors' rule; each
comparison with the question it answers) is decided on the test split with a paired bootstrap over
(protocol seed, question) pairs: the same
questions are evaluated for every variant, so the difference of EM has a confidence interval that
says plainly when the run cannot tell the variants apart. The report also states the training budget
(equal optimizer steps per variant, or epochs) and the tokens each variant's selected policy was
trained on, next to its EM: a variant that wins by seeing more tokens shows it. This module computes
and formats; templates/bootstrap.md.j2 lays the report out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from factory.bootstrap.protocol import published_rows, test_em_by_dataset
from factory.execution.unusable import unusable_warning
from factory.params.round_sections import BootstrapParams
from factory.utils import paths
from factory.utils.io import read_json
from factory.utils.stats import paired_difference
from factory.utils.templates import fixed, render
from factory.variants import registry

# The relevance and calibration reports score the authors' rule under the name of the variant that
# trains on its selection (one name per selection method: factory/utils/selection.py).
AUTHORS_RULE = registry.AUTHORS_RULE.name


def _read(path: Path) -> dict | None:
    return read_json(path) if path.exists() else None


def mean_std(values: Sequence[float]) -> dict:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    return {
        "mean": statistics.fmean(vals),
        "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
        "n": len(vals),
    }


def chain_rounds(variant: str, seed: int, n_rounds: int) -> list[dict]:
    """One row per round slot of a chain: status, set size, FA ratio, training, held-out EM/F1, decision."""
    rows = []
    for r in range(n_rounds):
        ev = _read(paths.eval_metrics(variant, r, "heldout", seed)) or {}
        tr = _read(paths.stage_metrics("train", variant, r, seed)) or {}
        va = _read(paths.stage_metrics("variants", variant, r, seed)) or {}
        tj = _read(paths.stage_metrics("trajectories", variant, r, seed)) or {}
        de = _read(paths.decision(variant, r, seed)) or {}
        rows.append(
            {
                "round": r,
                "status": tr.get("status") or ev.get("status") or "missing",
                "trajectories": (tj.get("overall") or {}).get("trajectories", tj.get("trajectories")),
                "train_em": (tj.get("overall") or {}).get("em"),
                "unusable": tj.get("unusable"),  # the round's replies the agent could not use
                "examples": va.get("examples", (va.get("counts") or {}).get("examples")),
                "fa_ratio": va.get("fa_ratio"),
                "train_loss": tr.get("mean_loss"),
                "train_init": tr.get("init_policy"),
                "steps": tr.get("steps"),
                "examples_seen": tr.get("examples_seen"),
                "tokens_seen": tr.get("tokens_seen"),
                "heldout_em": None if ev.get("status") == "skipped" else ev.get("em"),
                "heldout_f1": None if ev.get("status") == "skipped" else ev.get("f1"),
                "test": de.get("test"),  # against the best policy before it: difference, 95% CI, improved
                "stop": de.get("stop"),
                "reason": de.get("reason"),
            }
        )
    return rows


def policy_tokens_seen(rows: Sequence[Mapping], round_: int) -> int | None:
    """Tokens the policy after ``round_`` was trained on: its adapter's training (falling back past rounds
    that trained nothing), plus the adapters it continued (train.init: previous). 0 = the base model."""
    total, r = 0, round_
    while r >= 0:
        row = rows[r]
        if row["status"] != "trained":
            r -= 1
            continue
        if row["tokens_seen"] is None:
            return None
        total += int(row["tokens_seen"])
        if row.get("train_init") in (None, "base"):
            break
        r -= 1
    return total


def test_correctness(variant: str, seeds: Sequence[int]) -> dict[tuple[int, str], float]:
    """(protocol seed, question id) -> EM of the chain's selected round on the test split."""
    from schemas import read_rows

    out = {}
    for seed in seeds:
        path = paths.selected_test_data(variant, seed)
        if path.exists():
            for row in read_rows(path, columns=["question_id", "em"]):
                out[(seed, row["question_id"])] = float(row["em"])
    return out


def verdict_line(name: str, other: str, diff: dict) -> str:
    """One plain line: BEATS (CI above 0), does NOT beat (CI below 0) or CANNOT TELL (CI includes 0)."""
    if diff["n"] == 0:
        return f"{name} vs {other}: no shared test questions; no verdict."
    d, (lo, hi) = diff["difference"], diff["ci"]
    span = f"test EM difference {d:+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}] over {diff['n']} questions"
    if lo > 0:
        return f"{name} BEATS {other} on this run ({span})."
    if hi < 0:
        return f"{name} does NOT beat {other}: {other} is better on this run ({span})."
    return f"{name} vs {other}: CANNOT TELL on this run, the interval includes 0 ({span})."


def budget_line(train: Mapping | None) -> str:
    """What the training budget was, in words (train params as a dict)."""
    if not train:
        return "Training budget: not recorded."
    if train.get("budget") == "steps":
        return (
            f"Training budget: equal compute, {train['max_steps']} optimizer steps of "
            f"{train['batch_size']} x {train['grad_accum']} examples per round for every variant "
            "(train.budget: steps; a small set is cycled, a large one stopped early)."
        )
    return (
        f"Training budget: {train['epochs']} epoch(s) per round (train.budget: epochs): a larger set gets "
        "more optimizer steps, so variants differ in compute as well as in data."
    )


def build_summary(params: BootstrapParams, *, train: Mapping | None = None) -> dict:
    """Everything the report shows, as plain data (metrics/summary.json): every chain of
    ``params.variants`` x ``params.seeds`` over the round slots ``params.rounds``, and the verdicts'
    paired bootstrap (``params.ci_samples`` / ``params.ci_seed``). ``train``: params.train as a dict
    (the budget)."""
    variants, seeds, n_rounds = params.variants, params.seeds, len(params.rounds)
    base = _read(paths.base_eval_metrics("heldout")) or {}
    summary: dict = {
        "base_heldout_em": base.get("em"),
        "base_heldout_f1": base.get("f1"),
        "budget": {
            k: (train or {}).get(k) for k in ("budget", "max_steps", "epochs", "batch_size", "grad_accum")
        },
        "variants": {},
        "verdicts": {},
    }
    correctness = {}
    for variant in variants:
        chains = {seed: chain_rounds(variant, seed, n_rounds) for seed in seeds}
        test = _read(paths.METRICS / "test" / f"{variant}.json") or {"chains": {}}
        by_round = []
        for r in range(n_rounds):
            cells = [chains[s][r] for s in seeds]
            by_round.append(
                {
                    "round": r,
                    "heldout_em": mean_std([c["heldout_em"] for c in cells]),
                    "heldout_f1": mean_std([c["heldout_f1"] for c in cells]),
                    "fa_ratio": mean_std([c["fa_ratio"] for c in cells]),
                    "examples": mean_std([c["examples"] for c in cells]),
                    "steps": mean_std([c["steps"] for c in cells]),
                    "tokens_seen": mean_std([c["tokens_seen"] for c in cells]),
                    "status": sorted({c["status"] for c in cells}),
                }
            )
        selected = {str(s): c for s, c in test.get("chains", {}).items()}
        summary["variants"][variant] = {
            "chains": {str(s): rows for s, rows in chains.items()},
            "by_round": by_round,
            "fa_ratio_by_round": [b["fa_ratio"]["mean"] for b in by_round],
            "selected": {
                s: {
                    "round": c.get("selected_round"),
                    "policy": c.get("selected_policy"),
                    "test": c.get("test"),
                    "tokens_seen": _selected_tokens(chains, s, c.get("selected_round")),
                }
                for s, c in selected.items()
            },
            "test_em": mean_std([(c.get("test") or {}).get("em") for c in selected.values()]),
            "test_f1": mean_std([(c.get("test") or {}).get("f1") for c in selected.values()]),
        }
        summary["variants"][variant]["tokens_seen"] = mean_std(
            [sel["tokens_seen"] for sel in summary["variants"][variant]["selected"].values()]
        )
        correctness[variant] = test_correctness(variant, seeds)
    reference = registry.REFERENCE.name
    if reference in variants:
        for other in (v for v in variants if v != reference):
            diff = paired_difference(
                correctness[reference],
                correctness[other],
                samples=params.ci_samples,
                seed=params.ci_seed,
                names=(reference, other),
            )
            summary["verdicts"][f"{reference}_vs_{other}"] = {
                **diff,
                "control": other,
                "question": registry.variant(other).question,
                "line": verdict_line(reference, other, diff),
            }
    return summary


def _selected_tokens(chains: Mapping, seed: str, round_: int | None) -> int | None:
    rows = next((rows for s, rows in chains.items() if str(s) == str(seed)), None)
    if rows is None or round_ is None:
        return None
    return policy_tokens_seen(rows, round_) if round_ >= 0 else 0


def _fmt(cell: dict, digits: int = 3) -> str:
    if cell["mean"] is None:
        return "–"
    return f"{cell['mean']:.{digits}f}" + (f" ± {cell['std']:.{digits}f}" if cell["n"] > 1 else "")


def decision_line(seed: str, row: Mapping) -> str | None:
    """'seed 0, round 1: held-out EM 0.250 vs round 0 0.167: difference +0.083, 95% CI [...] -> no gain;
    stop (reason)' -- the stop test of one round, as the decision file recorded it."""
    test = row.get("test")
    if row.get("stop") is None:
        return None
    then = f"stop ({row['reason']})" if row["stop"] else "continue"
    if test is None:
        return f"seed {seed}, round {row['round']}: skipped; {then}."
    against = "the base model" if test["against"] < 0 else f"round {test['against']}"
    lo, hi = test["ci"]
    return (
        f"seed {seed}, round {row['round']}: held-out EM {fixed(test['em'], 3, '–')} "
        f"vs {against} {fixed(test['best_em'], 3, '–')}: "
        f"difference {test['difference']:+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}] over {test['n']} questions "
        f"-> {'gain' if test['improved'] else 'no gain'}{_why(test)}; {then}."
    )


def _why(test: Mapping) -> str:
    """Which half of the stop test decided, where the two halves disagree."""
    if "rises" not in test:
        return ""
    if test["improved"] and not test["ci_above_zero"]:
        return " (by the threshold test; the CI includes 0)"
    if not test["improved"] and test["rises"] and not test["ci_above_zero"]:
        return " (the rise is within the noise: the CI includes 0)"
    if not test["improved"] and test["ci_above_zero"] and not test["rises"]:
        return " (the CI is above 0 but the rise is below min_delta)"
    return ""


def _selected(seed: str, sel: Mapping) -> dict:
    """The round a chain selected, its policy, the tokens it was trained on and its test scores."""
    test = sel.get("test") or {}
    tokens = sel.get("tokens_seen")
    return {
        "seed": seed,
        "round": sel["round"],
        "policy": sel["policy"],
        "tokens_seen": "–" if tokens is None else tokens,
        "em": test.get("em"),
        "f1": test.get("f1"),
        "questions": test.get("questions"),
    }


def _variant(name: str, data: Mapping) -> dict:
    """A variant's section: its rounds (means over seeds), stop decisions, selected rounds, test EM by
    route (mean over seeds)."""
    by_route: dict[str, list] = {}
    for sel in data["selected"].values():
        for route, stats in ((sel.get("test") or {}).get("by_route") or {}).items():
            by_route.setdefault(route, []).append(stats.get("em"))
    rounds = [
        [
            str(b["round"]),
            ", ".join(b["status"]),
            *(_fmt(b[k], 0) for k in ("examples", "steps", "tokens_seen")),
            *(_fmt(b[k]) for k in ("fa_ratio", "heldout_em", "heldout_f1")),
        ]
        for b in data["by_round"]
    ]
    decisions = [decision_line(seed, row) for seed, rows in data["chains"].items() for row in rows]

    warnings = [
        f"seed {seed}, round {row['round']}: {line}"
        for seed, rows in data["chains"].items()
        for row in rows
        if (line := unusable_warning(row.get("unusable"))) is not None
    ]
    return {
        "warnings": warnings,
        "name": name,
        "rounds": rounds,
        "decisions": [line for line in decisions if line is not None],
        "selected": [_selected(seed, sel) for seed, sel in data["selected"].items()],
        "by_route": [(route, _fmt(mean_std(ems))) for route, ems in sorted(by_route.items())],
    }


def render_markdown(
    summary: dict, relevance: dict | None, seeds: Sequence[int], calibration: dict | None = None
) -> str:
    """reports/bootstrap.md (templates/bootstrap.md.j2): verdicts, test EM per variant, each variant's
    rounds and decisions, the labeller on real graphs (``calibration``: metrics/calibration.json) and the
    relevance verdicts."""
    base = summary["base_heldout_em"]
    variants = summary["variants"]
    return render(
        "factory.bootstrap",
        "bootstrap.md.j2",
        seeds=list(seeds),
        base_heldout_em="–" if base is None else base,
        budget=budget_line(summary.get("budget")),
        short_samples=summary.get("short_samples") or [],
        verdicts=list(summary["verdicts"].values()),
        test=[
            [name, _fmt(data["test_em"]), _fmt(data["test_f1"]), _fmt(data["tokens_seen"], 0)]
            for name, data in variants.items()
        ],
        variants=[_variant(name, data) for name, data in variants.items()],
        protocol=_protocol(summary),
        relevance=[v["line"] for v in ((relevance or {}).get("verdicts") or {}).values()],
        calibration=[v["line"] for g, v in ((calibration or {}).get("verdicts") or {}).items() if g == "all"]
        if (calibration or {}).get("status") == "ok"
        else [],
    )


def _protocol(summary: Mapping) -> dict | None:
    """The test protocol section: what the test EM was measured on, EM by dataset, published figures
    beside it (factory.bootstrap.protocol); None without a ``test_protocol`` in the summary."""
    protocol = summary.get("test_protocol")
    if not protocol:
        return None
    datasets = [d["dataset"] for d in protocol["by_dataset"]]
    return {
        **protocol,
        "datasets": datasets,
        "em_by_dataset": test_em_by_dataset(summary, datasets),
        "published": published_rows(datasets),
    }
