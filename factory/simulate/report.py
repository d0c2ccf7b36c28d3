"""Backtracing precision/recall on simulated trajectories, as a function of noise (tables + figure).

``score_rows`` backtraces every simulated trajectory under every mode x target mode, and applies the
KnowTrace authors' rule (``factory.backtrace.authors_rule``; its rows have mode and target mode
``authors_rule``), and compares the kept triplets with the true contributive set: micro precision,
recall and F1 over triplets, and the share of trajectories with no path found, for all trajectories
and per dataset and route. Precision is ``None`` when nothing was kept in a cell (undefined, shown
as "–"). The report sets the project's default S_q and the authors' rule side by side per dataset.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factory.backtrace.authors_rule import AUTHORS_RULE, authors_rule
from factory.backtrace.labels import backtrace_modes
from factory.backtrace.linking import Embedder
from factory.config import BacktraceParams
from factory.simulate.trajectories import Simulated
from factory.utils.io import write_text
from factory.utils.plotting import save


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
    return "–" if v is None else f"{v:.3f}"


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


def render_markdown(metrics: dict, default: tuple[str, str]) -> str:
    """reports/backtrace_sensitivity.md from the metrics of ``factory simulate``; ``default``: the
    supervision set's (backtrace.mode, backtrace.target_mode), featured in the summary tables."""
    res = metrics["results"]
    noises = metrics["noise_levels"]
    modes, targets = metrics["modes"], metrics["target_modes"]
    dm, dt = _default_combo(metrics, default)
    lines = [
        "# Backtracing sensitivity to trajectory noise (simulated trajectories)",
        "",
        (
            f"{metrics['trajectories']} simulated trajectories ({metrics['questions']} real questions x "
            f"{len(noises)} noise levels; "
            "policy `simulated`, never trainable). Each trajectory looks up a question's gold facts "
            "(2Wiki evidences, MuSiQue "
            "decompositions, HotpotQA supporting sentences), so its true contributive triplets are "
            "known; noise level x adds "
            "distractor triplets, spurious edges, reversed relations, missing hops, surface variants of "
            "names and an unfaithful "
            "final thought (rules: `factory/simulate/trajectories.py`). Cells: micro precision / recall "
            "over triplets, F1, and the share of "
            "trajectories with no path found."
        ),
        "",
        f"Seed {metrics['seed']}; questions per dataset: {metrics['questions_by_dataset']}.",
        "",
    ]

    def table(title: str, rows: list[tuple[str, dict]]) -> None:
        lines.extend(
            [
                f"## {title}",
                "",
                "| | " + " | ".join(f"x={x:g}" for x in noises) + " |",
                "|---|" + "---|" * len(noises),
            ]
        )
        for label, key in rows:
            cells = []
            for x in noises:
                c = _cell(res, noise=x, **key)
                cells.append(
                    "n/a"
                    if c is None
                    else f"P {_fmt(c['precision'])} / R {_fmt(c['recall'])} / F1 {_fmt(c['f1'])} / no "
                    f"path {c['no_path']:.2f}"
                )
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")

    table(
        f"Modes (target mode `{dt}`)",
        [(f"`{m}`", {"mode": m, "target_mode": dt, "group": "all"}) for m in modes],
    )
    table(
        f"Target modes (mode `{dm}`)",
        [(f"`{t}`", {"mode": dm, "target_mode": t, "group": "all"}) for t in targets],
    )
    groups = sorted({r["group"] for r in res if r["group"] != "all"})
    table(
        f"By dataset and route (`{dm}`, `{dt}`)",
        [(g, {"mode": dm, "target_mode": dt, "group": g}) for g in groups],
    )
    side_by_side = []
    for g in ["all"] + sorted(g for g in groups if g.startswith("dataset=")):
        side_by_side.append((f"{g}: project S_q", {"mode": dm, "target_mode": dt, "group": g}))
        side_by_side.append(
            (f"{g}: authors' rule", {"mode": AUTHORS_RULE, "target_mode": AUTHORS_RULE, "group": g})
        )
    table(
        f"Project (`{dm}`, `{dt}`) vs the KnowTrace authors' rule, per dataset",
        side_by_side,
    )
    lines.extend(
        [
            "The authors' rule (`factory/backtrace/authors_rule.py`) reads each completion's first triplet "
            "only, as raw strings; initial entities are names found in the first lookup, targets names "
            "found in the final thought and answer.",
            "",
            "## Reading",
            "",
        ]
    )
    lo, hi = (
        _cell(res, noise=noises[0], mode=dm, target_mode=dt, group="all"),
        _cell(res, noise=noises[-1], mode=dm, target_mode=dt, group="all"),
    )
    if lo and hi:
        lines.append(
            f"- Default (`{dm}`, `{dt}`): F1 {_fmt(lo['f1'])} at x={noises[0]:g} and {_fmt(hi['f1'])} at "
            f"x={noises[-1]:g} "
            f"(precision {_fmt(lo['precision'])} -> {_fmt(hi['precision'])}, recall {_fmt(lo['recall'])} "
            f"-> {_fmt(hi['recall'])}; "
            f"no path {lo['no_path']:.2f} -> {hi['no_path']:.2f})."
        )
    for x in (noises[0], noises[-1]):
        ours = _cell(res, noise=x, mode=dm, target_mode=dt, group="all")
        theirs = _cell(res, noise=x, mode=AUTHORS_RULE, target_mode=AUTHORS_RULE, group="all")
        if ours and theirs:
            lines.append(
                f"- At x={x:g}: project S_q F1 {_fmt(ours['f1'])} (no path {ours['no_path']:.2f}) vs the "
                f"authors' rule {_fmt(theirs['f1'])} (no path {theirs['no_path']:.2f})."
            )
    at_top = [
        (c["f1"] if c["f1"] is not None else -1, m, t)
        for m in modes
        for t in targets
        if (c := _cell(res, noise=noises[-1], mode=m, target_mode=t, group="all"))
    ]
    if at_top:
        best = max(at_top)
        lines.append(
            f"- Highest F1 at x={noises[-1]:g}: `{best[1]}` / `{best[2]}` "
            f"({_fmt(best[0] if best[0] >= 0 else None)})."
        )
    lines.append(
        "- `gold_answer` is an oracle (it reads the gold answer); `question_only` is the no-answer control."
    )
    lines.append("")
    lines.append("![precision, recall and F1 against noise](backtrace_sensitivity.png)")
    return "\n".join(lines) + "\n"


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
