"""The files the bootstrapping summary (``factory.bootstrap.report.build_summary``) yields beside the
report: metrics/headline.json (the run's headline numbers, the only DVC metrics) and the plot series
and figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from factory.bootstrap.report import AUTHORS_RULE, mean_std
from factory.variants import registry


def write_plots(summary: dict, plots_dir: Path, figures: Path) -> None:
    """CSV series for `dvc plots` (EM and FA ratio by round per variant) and the PNG figures
    (factory.bootstrap.figures)."""
    from factory.bootstrap.figures import write_figures
    from factory.utils.io import write_text

    variants = list(summary["variants"])
    n_rounds = max((len(v["by_round"]) for v in summary["variants"].values()), default=0)
    em_rows = [["round", *variants], ["-1", *[_csv(summary["base_heldout_em"]) for _ in variants]]]
    fa_rows = [["round", *variants]]
    for r in range(n_rounds):
        em_rows.append(
            [str(r), *[_csv(summary["variants"][v]["by_round"][r]["heldout_em"]["mean"]) for v in variants]]
        )
        fa_rows.append(
            [str(r), *[_csv(summary["variants"][v]["by_round"][r]["fa_ratio"]["mean"]) for v in variants]]
        )
    write_text(plots_dir / "em_by_round.csv", "\n".join(",".join(r) for r in em_rows) + "\n")
    write_text(plots_dir / "fa_by_round.csv", "\n".join(",".join(r) for r in fa_rows) + "\n")
    write_figures(summary, figures)


def headline(summary: dict, relevance: Mapping | None, calibration: Mapping | None = None) -> dict:
    """metrics/headline.json, the one file dvc.yaml declares as DVC metrics: what `dvc exp show` compares.
    Per variant the selected round (a list with several protocol seeds; -1 = the base model) and its
    held-out and test EM (means over seeds); for the labels, on this run's trajectories S_q's paragraph
    micro F1 against the gold supporting facts beside the KnowTrace authors' rule's and the causal
    effect (accuracy lost without S_q minus accuracy lost without a random set of its size), and on real
    LLM-made graphs (``calibration``: metrics/calibration.json) S_q's and the authors' rule's paragraph
    F1. The detail stays in the other metrics files and the reports."""
    out: dict = {}
    for variant, data in summary["variants"].items():
        selected = data["selected"]
        rounds = [sel["round"] for sel in selected.values()]
        heldout = [
            _selected_heldout(summary, data["chains"].get(s, []), sel["round"]) for s, sel in selected.items()
        ]
        out[variant] = {
            "round": rounds[0] if len(rounds) == 1 else rounds,
            "heldout_em": mean_std(heldout)["mean"],
            "test_em": data["test_em"]["mean"],
        }
    out["labels"] = _label_headline(relevance or {})
    real = (calibration or {}).get("all") or {}
    out["labels"]["real_graphs_backtrace_f1"] = (real.get(registry.REFERENCE.name) or {}).get("f1")
    out["labels"]["real_graphs_authors_rule_f1"] = (real.get(AUTHORS_RULE) or {}).get("f1")
    return out


def _selected_heldout(summary: dict, rows: Sequence[Mapping], round_: int | None) -> float | None:
    if round_ is None:
        return None
    if round_ < 0:
        return summary["base_heldout_em"]
    return next((row["heldout_em"] for row in rows if row["round"] == round_), None)


def _label_headline(relevance: Mapping) -> dict:
    methods = (
        relevance.get("groups", {}).get("all", {}).get("levels", {}).get("paragraph", {}).get("methods", {})
    )

    def f1(method: str | None) -> float | None:
        return ((methods.get(method) or {}).get("micro", {}).get("f1") or {}).get("value")

    effects = (relevance.get("causal") or {}).get("groups", {}).get("all", {}).get("effects", {})
    return {
        "backtrace_f1": f1(relevance.get("default_method")),
        "authors_rule_f1": f1(AUTHORS_RULE),
        "causal_effect": (effects.get("difference") or {}).get("value"),
    }


def _csv(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"
