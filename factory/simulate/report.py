"""Backtracing precision/recall on simulated trajectories, as a function of noise (tables + figure).

``score_rows`` backtraces every simulated trajectory under every mode x target mode, and applies the
KnowTrace authors' rule (``factory.backtrace.authors_rule``; its rows have mode and target mode
``authors_rule``), and compares the kept triplets with the true contributive set: micro precision,
recall and F1 over triplets, and the share of trajectories with no path found, for all trajectories
and per dataset and route. Precision is ``None`` when nothing was kept in a cell (undefined, shown
as "–"). The report sets the project's default S_q and the authors' rule side by side per dataset;
its markup is in templates/backtrace_sensitivity.md.j2 (package data).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factory.backtrace.authors_rule import authors_rule
from factory.backtrace.labels import backtrace_modes
from factory.backtrace.linking import Embedder
from factory.params.label_sections import BacktraceParams
from factory.simulate.trajectories import Simulated
from factory.utils.io import write_text
from factory.utils.plotting import save
from factory.utils.selection import AUTHORS_RULE
from factory.utils.templates import fixed, render


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r else 0.0


def score_rows(
    sims: Sequence[Simulated], params: BacktraceParams, embedder: Embedder | None = None
) -> list[dict]:
    """One row per simulated trajectory x (``params.modes`` x ``params.target_modes``, and the authors'
    rule) with tp / fp / fn over triplets; ``embedder``: the loaded ``params.embedding_model``."""
    rows = []
    for sim in sims:
        kept_sets = [
            (labels["mode"], labels["target_mode"], set(labels["kept_triplet_ids"]), labels["fa_ratio"])
            for labels in backtrace_modes(sim.trajectory, params, embedder=embedder)
        ]
        kept_sets.append((AUTHORS_RULE, AUTHORS_RULE, authors_rule(sim.trajectory)["kept_triplet_ids"], None))
        truth = set(sim.truth["true_triplet_ids"])
        for mode, target_mode, kept, fa_ratio in kept_sets:
            rows.append(
                {
                    "trajectory_id": sim.trajectory["trajectory_id"],
                    "dataset": sim.truth["dataset"],
                    "route": sim.truth["route"],
                    "noise": sim.truth["noise"],
                    "mode": mode,
                    "target_mode": target_mode,
                    "tp": len(kept & truth),
                    "fp": len(kept - truth),
                    "fn": len(truth - kept),
                    "path_found": bool(kept),
                    "fa_ratio": fa_ratio,
                }
            )
    return rows


def aggregate(rows: Sequence[dict]) -> list[dict]:
    """Micro P/R/F1 and no-path share per (noise, mode, target mode, group); group is ``all``,
    ``dataset=<name>`` or ``route=<name>``. Sorted deterministically."""
    cells: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in rows:
        for group in ("all", f"dataset={r['dataset']}", f"route={r['route']}"):
            c = cells[(r["noise"], r["mode"], r["target_mode"], group)]
            c[0] += r["tp"]
            c[1] += r["fp"]
            c[2] += r["fn"]
            c[3] += 1
            c[4] += 0 if r["path_found"] else 1
    out = []
    for (noise, mode, target_mode, group), (tp, fp, fn, n, no_path) in sorted(cells.items()):
        p, rec = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        out.append(
            {
                "noise": noise,
                "mode": mode,
                "target_mode": target_mode,
                "group": group,
                "trajectories": n,
                "tp": tp,
                "fp": fp,
                "fn": fn,
                "precision": p,
                "recall": rec,
                "f1": _f1(p, rec),
                "no_path": no_path / n,
            }
        )
    return out


def _fmt(v: float | None) -> str:
    return fixed(v, 3, "–")


def _cell(results: list[dict], **key: Any) -> dict | None:
    for r in results:
        if all(r[k] == v for k, v in key.items()):
            return r
    return None


def _default_combo(metrics: dict, default: tuple[str, str]) -> tuple[str, str]:
    """The (mode, target mode) the report features: the supervision set's, else the first labelled."""
    modes, targets = metrics["modes"], metrics["target_modes"]
    return (
        default[0] if default[0] in modes else modes[0],
        default[1] if default[1] in targets else targets[0],
    )


def _scores(c: dict | None) -> dict | None:
    """A cell's numbers as the report prints them; None where the run has no such cell."""
    if c is None:
        return None
    return {
        "precision": _fmt(c["precision"]),
        "recall": _fmt(c["recall"]),
        "f1": _fmt(c["f1"]),
        "no_path": f"{c['no_path']:.2f}",
    }


def _row(metrics: dict, **key: Any) -> list[dict | None]:
    """The scores of the cell ``key`` (mode, target mode, group) at every noise level."""
    return [_scores(_cell(metrics["results"], noise=x, **key)) for x in metrics["noise_levels"]]


def _best(metrics: dict, noise: float) -> dict | None:
    """The mode x target mode with the highest F1 at ``noise`` (a tie: the last by name); None without
    cells."""
    at_noise = [
        (c["f1"] if c["f1"] is not None else -1, m, t)
        for m in metrics["modes"]
        for t in metrics["target_modes"]
        if (c := _cell(metrics["results"], noise=noise, mode=m, target_mode=t, group="all"))
    ]
    if not at_noise:
        return None
    f1, mode, target_mode = max(at_noise)
    return {"mode": mode, "target_mode": target_mode, "f1": _fmt(f1 if f1 >= 0 else None)}


def _at_noise(metrics: dict, x: float, ours: dict, authors: dict) -> dict:
    """The scores of S_q (the cell ``ours``) and of the authors' rule over all trajectories at noise ``x``."""
    return {
        "x": f"{x:g}",
        "ours": _scores(_cell(metrics["results"], noise=x, **ours, group="all")),
        "theirs": _scores(_cell(metrics["results"], noise=x, **authors, group="all")),
    }


def render_markdown(metrics: dict, default: tuple[str, str]) -> str:
    """reports/backtrace_sensitivity.md from the metrics of ``factory simulate``; ``default``: the
    supervision set's (backtrace.mode, backtrace.target_mode), featured in the summary tables."""
    noises = metrics["noise_levels"]
    dm, dt = _default_combo(metrics, default)
    ours, authors = {"mode": dm, "target_mode": dt}, {"mode": AUTHORS_RULE, "target_mode": AUTHORS_RULE}
    groups = sorted({r["group"] for r in metrics["results"] if r["group"] != "all"})
    return render(
        "factory.simulate",
        "backtrace_sensitivity.md.j2",
        metrics=metrics,
        noises=[f"{x:g}" for x in noises],
        mode=dm,
        target_mode=dt,
        by_mode=[(m, _row(metrics, mode=m, target_mode=dt, group="all")) for m in metrics["modes"]],
        by_target_mode=[
            (t, _row(metrics, mode=dm, target_mode=t, group="all")) for t in metrics["target_modes"]
        ],
        by_group=[(g, _row(metrics, **ours, group=g)) for g in groups],
        versus_authors=[
            (g, _row(metrics, **ours, group=g), _row(metrics, **authors, group=g))
            for g in ["all"] + [g for g in groups if g.startswith("dataset=")]
        ],
        ends=[_at_noise(metrics, x, ours, authors) for x in (noises[0], noises[-1])],
        best=_best(metrics, noises[-1]),
    )


def plot(metrics: dict, default: tuple[str, str], path: str | Path) -> Path:
    """reports/backtrace_sensitivity.png: F1 per mode, F1 per target mode, P/R per dataset (``default``
    as in ``render_markdown``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res, noises = metrics["results"], metrics["noise_levels"]
    modes, targets = metrics["modes"], metrics["target_modes"]
    dm, dt = _default_combo(metrics, default)

    def series(key: str, **sel: Any) -> list[float]:
        out = []
        for x in noises:
            c = _cell(res, noise=x, **sel)
            out.append(float("nan") if c is None or c[key] is None else c[key])
        return out

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for m in modes:
        axes[0].plot(noises, series("f1", mode=m, target_mode=dt, group="all"), marker="o", label=m)
    axes[0].plot(
        noises,
        series("f1", mode=AUTHORS_RULE, target_mode=AUTHORS_RULE, group="all"),
        marker="x",
        linestyle=":",
        color="black",
        label="authors' rule",
    )
    axes[0].set_title(f"F1 by mode (targets: {dt})")
    for t in targets:
        axes[1].plot(noises, series("f1", mode=dm, target_mode=t, group="all"), marker="o", label=t)
    axes[1].set_title(f"F1 by target mode ({dm})")
    for g in sorted({r["group"] for r in res if r["group"].startswith("dataset=")}):
        line = axes[2].plot(
            noises, series("precision", mode=dm, target_mode=dt, group=g), marker="o", label=f"{g[8:]} P"
        )[0]
        axes[2].plot(
            noises,
            series("recall", mode=dm, target_mode=dt, group=g),
            marker="s",
            linestyle="--",
            color=line.get_color(),
            label=f"{g[8:]} R",
        )
    axes[2].set_title("Precision (solid) / recall (dashed) by dataset")
    for ax in axes:
        ax.set_xlabel("noise level x")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)


def write_report(metrics: dict, default: tuple[str, str], md_path: str | Path, png_path: str | Path) -> None:
    write_text(md_path, render_markdown(metrics, default))
    plot(metrics, default, png_path)
