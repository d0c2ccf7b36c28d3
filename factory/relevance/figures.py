"""Figures of reports/relevance.md: the labels against gold facts, and the causal check.

- ``relevance_figure``: paragraph-level micro precision / recall / F1 of S_q and the controls per
  dataset, bars with their 95% bootstrap CIs, one colour and hatch per method, the review's bar;
- ``causal_figure``: a forest plot of the causal check per dataset: accuracy lost without S_q next to
  the loss without a random set of its size (the matched control), their difference, S_q's
  sufficiency and the closed-book accuracy, each with its 95% CI (points of accuracy).

Both say "Nothing to plot" and why when there is nothing scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from factory.relevance.report import CONTROLS, method_label
from factory.utils.plotting import note, nothing_to_plot, pyplot, save, style

HATCHES = ("", "//", "..", "xx", "\\\\")
EFFECTS = (
    ("necessity_sq", "lost without S_q"),
    ("necessity_random", "lost without random |S_q|"),
    ("difference", "difference (S_q - random)"),
    ("sufficiency", "S_q alone keeps (sufficiency)"),
    ("closed_book", "closed-book accuracy"),
)


def _dataset_groups(groups: Mapping) -> list[str]:
    return ["all"] + sorted(g for g in groups if g.startswith("dataset=") and "/" not in g)


def relevance_figure(result: Mapping):
    plt = pyplot()
    if result.get("status") != "ok":
        fig, ax = plt.subplots(figsize=(7, 2))
        nothing_to_plot(ax, f"no relevance scores ({result.get('status')})")
        return fig
    groups = result["groups"]
    names = _dataset_groups(groups)
    methods = [result["default_method"], *CONTROLS]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    width = 0.8 / len(methods)
    drawn = False
    for ax, metric in zip(axes, ("precision", "recall", "f1")):
        for j, m in enumerate(methods):
            xs, ys, err = [], [], [[], []]
            for i, name in enumerate(names):
                cell = groups[name]["levels"]["paragraph"]["methods"][m]["micro"][metric]
                if cell["value"] is None:  # undefined (nothing kept or nothing relevant): said, not drawn
                    x = i + (j - (len(methods) - 1) / 2) * width
                    ax.text(x, 0.01, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color="0.4")
                    continue
                lo, hi = cell["ci"]
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(cell["value"])
                err[0].append(max(0.0, cell["value"] - (lo if lo is not None else cell["value"])))
                err[1].append(max(0.0, (hi if hi is not None else cell["value"]) - cell["value"]))
            drawn |= bool(xs)
            ax.bar(
                xs,
                ys,
                width,
                yerr=err,
                capsize=2,
                label=method_label(m),
                color=style(j)["color"],
                hatch=HATCHES[j % len(HATCHES)],
                edgecolor="white",
            )
        ax.axhline(result["params"]["bar"], color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(names)), [n.replace("dataset=", "") for n in names], rotation=15)
        ax.set_title(f"paragraph-level micro {metric}")
        ax.set_ylim(0, 1.05)
    if not drawn:
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 2))
        nothing_to_plot(ax, "no precision, recall or F1 is defined (nothing kept, nothing gold-relevant)")
        return fig
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(methods), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def _effect_cell(group: Mapping, key: str) -> Mapping | None:
    if key == "closed_book":
        return group.get("accuracy", {}).get("closed_book")
    return group.get("effects", {}).get(key)


def causal_figure(causal: Mapping):
    """Forest plot: one row per dataset x effect, the point estimate with its 95% CI, in points."""
    plt = pyplot()
    if causal.get("status") != "ok":
        fig, ax = plt.subplots(figsize=(7, 2))
        nothing_to_plot(ax, "no counterfactual rows (no correct trajectory was re-asked)")
        return fig
    groups = causal["groups"]
    names = _dataset_groups(groups)
    rows = []  # (y, group, effect index, cell)
    for g in names:
        for k, (key, _) in enumerate(EFFECTS):
            cell = _effect_cell(groups[g], key)
            if cell and cell.get("value") is not None:
                rows.append((g, k, cell))
    fig, ax = plt.subplots(figsize=(8, 1.4 + 0.32 * max(len(rows), 3)))
    if not rows:
        nothing_to_plot(ax, "no effect could be computed (no trajectory whose full-graph answer is correct)")
        return fig
    labels = []
    seen_effects = set()
    for y, (g, k, cell) in enumerate(reversed(rows)):
        value = 100 * cell["value"]
        lo, hi = ((100 * c if c is not None else value) for c in cell["ci"])
        s = style(k)
        ax.errorbar(
            [value],
            [y],
            xerr=[[value - lo], [hi - value]],
            capsize=3,
            color=s["color"],
            marker=s["marker"],
            linestyle="none",
            label=None if k in seen_effects else EFFECTS[k][1],
        )
        seen_effects.add(k)
        # closed-book accuracy is over every re-asked trajectory, the effects over those the full graph keeps
        closed = EFFECTS[k][0] == "closed_book"
        n = groups[g]["trajectories"] if closed else groups[g]["effects"]["trajectories"]
        labels.append(f"{g.replace('dataset=', '')} (n={n}): {EFFECTS[k][1]}")
    lo_x, hi_x = ax.get_xlim()
    ax.set_xlim(min(lo_x, -10), max(hi_x, 10))  # points of accuracy: never a span of a fraction of a point
    if not any(EFFECTS[k][0] != "closed_book" for _, k, _ in rows):
        everyone = groups.get("all", {})
        why = (
            f"the full graph reproduces none of the {everyone.get('trajectories', 0)} re-asked answers"
            if everyone.get("effects", {}).get("trajectories") == 0
            else "the conditions they need were not run"
        )
        note(
            ax, f"No necessity or sufficiency effect:\n{why};\nonly the closed-book accuracy is drawn", y=0.3
        )
    ax.axvline(0, color="grey", linewidth=1, linestyle="--")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("points of accuracy (95% bootstrap CI)")
    ax.set_title("causal check of S_q per dataset (counterfactual re-asking)", fontsize=10)
    handles, texts_ = ax.get_legend_handles_labels()
    order = sorted(range(len(texts_)), key=lambda i: [e[1] for e in EFFECTS].index(texts_[i]))
    ax.legend([handles[i] for i in order], [texts_[i] for i in order], fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def write_figures(result: Mapping, reports: Path) -> list[Path]:
    """reports/relevance.png and reports/causal_effects.png."""
    return [
        save(relevance_figure(result), Path(reports) / "relevance.png", dpi=100),
        save(causal_figure(result.get("causal") or {}), Path(reports) / "causal_effects.png", dpi=100),
    ]
