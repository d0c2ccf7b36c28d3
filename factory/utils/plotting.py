"""What every figure of the reports shares: one style per series, notes, deterministic PNGs.

Series get a colour (Okabe-Ito, readable by colour-blind readers), a marker and a line style of their
own, so that lines drawn on top of one another stay distinguishable; ``coinciding`` finds such series
and ``note`` says so inside the figure. ``nothing_to_plot`` is the figure of a report with no data: a
sentence, not empty axes. Figures are built by functions that return the matplotlib Figure (tests read
what was drawn) and saved by ``save`` without the matplotlib version in the PNG, so the same data give
the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
NOTHING = "Nothing to plot"


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(i: int) -> dict:
    """Colour, marker and line style of the i-th series (all three differ between neighbours)."""
    return {
        "color": COLORS[i % len(COLORS)],
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
    }


def coinciding(series: Mapping[str, Sequence[float | None]]) -> list[list[str]]:
    """Groups (of two or more names) of series with the same values at every point."""
    groups: dict[tuple, list[str]] = {}
    for name, values in series.items():
        key = tuple(None if v is None else round(float(v), 9) for v in values)
        if any(v is not None for v in key):
            groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def coincide_note(groups: Sequence[Sequence[str]], where: str = "at every point") -> str | None:
    if not groups:
        return None
    parts = [" and ".join([", ".join(g[:-1]), g[-1]] if len(g) > 2 else g) for g in groups]
    return "; ".join(parts) + f" coincide {where} (drawn on top of one another)"


def note(ax, text: str, y: float = 0.03) -> None:
    """A sentence inside the axes (bottom centre), on a white box so that lines do not hide it."""
    ax.text(
        0.5,
        y,
        text,
        transform=ax.transAxes,
        ha="center",
        va="bottom",
        fontsize=8,
        wrap=True,
        bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.9, "boxstyle": "round,pad=0.3"},
    )


def nothing_to_plot(ax, why: str) -> None:
    """Replace the axes' content by 'Nothing to plot: <why>'."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, f"{NOTHING}: {why}", transform=ax.transAxes, ha="center", va="center", wrap=True)


def save(fig, path: str | Path, dpi: int = 110) -> Path:
    """Write the figure to ``path`` (atomically, with the stage's other outputs: ``factory.utils.io``)."""
    from factory.utils.io import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip("."), metadata={"Software": None})
    pyplot().close(fig)
    return path


def texts(fig) -> list[str]:
    """Every text a figure shows (titles, labels, notes, tick labels), for tests and checks."""
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]
