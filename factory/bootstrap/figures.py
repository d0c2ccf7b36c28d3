"""Figures of the bootstrapping report (reports/figures/), built from metrics/summary.json's data.

- ``em_by_round.png``: held-out EM by round per variant (round ticks are integers, the base model is
  the first tick; error bars = std over protocol seeds where there are several) beside the tokens
  each round's training saw per variant (the compute next to the result);
- ``fa_by_round.png``: the FA ratio by round per variant;
- ``verdicts.png``: the reference variant (backtrace) minus each other variant, test EM difference with
  its 95% paired bootstrap CI.

Series that coincide, and panels with nothing to draw, say so in the figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from factory.utils.plotting import coincide_note, coinciding, note, nothing_to_plot, pyplot, save, style
from factory.variants import registry


def _series(summary: Mapping, key: str) -> dict[str, list[dict]]:
    return {v: [b[key] for b in data["by_round"]] for v, data in summary["variants"].items()}


def _round_axis(ax, rounds: list[int], base: bool) -> None:
    ax.set_xticks(rounds, ["base" if r == -1 and base else str(r) for r in rounds])
    ax.set_xlim(min(rounds) - 0.4, max(rounds) + 0.4)
    ax.set_xlabel("round")


def _line_panel(ax, series: dict[str, list[dict]], ylabel: str, base: float | None = None) -> None:
    """One line per variant over the rounds (the base model's value at round -1 when given)."""
    n_rounds = max((len(v) for v in series.values()), default=0)
    values = {}
    for i, (variant, cells) in enumerate(series.items()):
        xs, ys, err = [], [], []
        if base is not None:
            xs, ys, err = [-1], [base], [0.0]
        for r, cell in enumerate(cells):
            if cell["mean"] is not None:
                xs.append(r)
                ys.append(cell["mean"])
                err.append(cell["std"] if cell["n"] > 1 else 0.0)
        values[variant] = [ys[xs.index(r)] if r in xs else None for r in range(n_rounds)]
        s = style(i)
        # coinciding lines stay visible: each later series is drawn thinner, with a smaller marker
        ax.errorbar(
            xs,
            ys,
            yerr=err if any(err) else None,
            label=_label(variant),
            capsize=3,
            color=s["color"],
            marker=s["marker"],
            linestyle=s["linestyle"],
            linewidth=max(0.8, 2.4 - 0.6 * i),
            markersize=max(3, 9 - 2 * i),
        )
    if not any(v is not None for vals in values.values() for v in vals):
        nothing_to_plot(ax, f"no {ylabel} recorded for any round")
        return
    _round_axis(ax, ([-1] if base is not None else []) + list(range(n_rounds)), base is not None)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    text = coincide_note(coinciding(values), "at every round")
    if text:
        note(ax, text)


def _tokens_panel(ax, series: dict[str, list[dict]]) -> None:
    """Grouped bars: tokens seen by each variant's training, per round."""
    variants = list(series)
    n_rounds = max((len(v) for v in series.values()), default=0)
    width = 0.8 / max(1, len(variants))
    drawn = False
    for i, variant in enumerate(variants):
        xs = [r + (i - (len(variants) - 1) / 2) * width for r in range(n_rounds)]
        ys = [c["mean"] or 0 for c in series[variant]]
        drawn |= any(ys)
        s = style(i)
        ax.bar(xs, ys, width, label=_label(variant), color=s["color"], hatch=("", "//", "..", "xx")[i % 4])
    if not drawn:
        nothing_to_plot(ax, "no round trained (every supervision set was empty or skipped)")
        return
    _round_axis(ax, list(range(n_rounds)), False)
    ax.set_ylabel("tokens seen in training")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")


def em_figure(summary: Mapping):
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    _line_panel(left, _series(summary, "heldout_em"), "held-out EM", base=summary.get("base_heldout_em"))
    left.set_title("held-out EM by round (mean over seeds)")
    _tokens_panel(right, _series(summary, "tokens_seen"))
    right.set_title("tokens seen by each round's training")
    fig.tight_layout()
    return fig


def fa_figure(summary: Mapping):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    _line_panel(ax, _series(summary, "fa_ratio"), "FA ratio")
    ax.set_title("FA ratio by round (tokens removed by backtracing / all)", fontsize=9)
    fig.tight_layout()
    return fig


def _label(variant: str) -> str:
    """A variant's plot label (the registry's; the base model and unknown names as they are)."""
    known = registry.REGISTRY.get(variant)
    return known.label if known else variant


def _versus(key: str, verdict: Mapping) -> str:
    control = verdict.get("control")
    return f"{_label(registry.REFERENCE.name)} − {_label(control)}" if control else key.replace("_", " ")


def verdicts_figure(summary: Mapping):
    """Forest plot: test EM difference backtrace - control with its 95% paired bootstrap CI."""
    plt = pyplot()
    verdicts = {k: v for k, v in (summary.get("verdicts") or {}).items() if v.get("n")}
    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.6 * max(1, len(verdicts))))
    if not verdicts:
        nothing_to_plot(ax, "no test questions shared by backtrace and a control")
        return fig
    for i, (name, v) in enumerate(verdicts.items()):
        lo, hi = v["ci"]
        s = style(i + 1)
        ax.errorbar(
            [v["difference"]],
            [i],
            xerr=[[v["difference"] - lo], [hi - v["difference"]]],
            capsize=4,
            color=s["color"],
            marker=s["marker"],
            linestyle="none",
            label=_versus(name, v),
        )
    ax.axvline(0, color="grey", linewidth=1, linestyle="--")
    ax.set_yticks(range(len(verdicts)), [_versus(k, v) for k, v in verdicts.items()])
    ax.set_ylim(-0.6, len(verdicts) - 0.4)
    ax.set_xlabel("test EM difference (95% paired bootstrap CI)")
    ax.set_title("does backtrace beat the controls?", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


FIGURES = {"em_by_round": em_figure, "fa_by_round": fa_figure, "verdicts": verdicts_figure}


def write_figures(summary: Mapping, figures: Path) -> list[Path]:
    return [save(build(summary), Path(figures) / f"{name}.png") for name, build in FIGURES.items()]
