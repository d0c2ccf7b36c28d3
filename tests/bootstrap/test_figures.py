"""The bootstrapping report's figures, rendered from hand-made summaries: what each one draws."""

from __future__ import annotations

import matplotlib.colors as mcolors
import pytest

from factory.bootstrap.figures import em_figure, fa_figure, verdicts_figure, write_figures
from factory.utils.plotting import NOTHING, texts


def cell(mean, std=0.0, n=1):
    return {"mean": mean, "std": std if mean is not None else None, "n": n if mean is not None else 0}


def summary(em: dict, tokens: dict, fa: dict | None = None, base=0.1, verdicts=None) -> dict:
    variants = {}
    for v in em:
        variants[v] = {
            "by_round": [
                {
                    "round": r,
                    "heldout_em": cell(e),
                    "tokens_seen": cell(t),
                    "fa_ratio": cell((fa or {}).get(v, [None] * 9)[r]),
                }
                for r, (e, t) in enumerate(zip(em[v], tokens[v]))
            ]
        }
    return {"base_heldout_em": base, "variants": variants, "verdicts": verdicts or {}}


def _lines(ax):
    """The data line of each series (errorbar containers carry the series' label)."""
    from matplotlib.container import ErrorbarContainer

    out = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            c.lines[0].set_label(c.get_label())
            out.append(c.lines[0])
    return out


def test_em_by_round_has_integer_round_ticks_one_styled_line_per_variant_and_the_tokens_beside():
    s = summary(
        {"backtrace": [0.2, 0.3], "random": [0.1, 0.1], "unfiltered": [0.15, 0.25]},
        {"backtrace": [1000, 1100], "random": [1200, 1300], "unfiltered": [1500, 1600]},
    )
    fig = em_figure(s)
    em, tokens = fig.axes
    assert list(em.get_xticks()) == [-1, 0, 1]
    assert [t.get_text() for t in em.get_xticklabels()] == ["base", "0", "1"]
    lines = _lines(em)
    # each variant's label from the registry
    assert [line.get_label() for line in lines] == [
        "backtrace (S_q)",
        "random (matched size)",
        "unfiltered (STaR)",
    ]
    assert len({mcolors.to_hex(line.get_color()) for line in lines}) == 3
    assert len({line.get_marker() for line in lines}) == 3
    assert list(lines[0].get_ydata()) == [0.1, 0.2, 0.3]  # the base model first, then rounds 0, 1
    assert not any("coincide" in t for t in texts(fig))
    bars = [p for c in tokens.containers for p in c]
    assert len(tokens.containers) == 3 and len(bars) == 6
    assert sorted(b.get_height() for b in bars) == [1000, 1100, 1200, 1300, 1500, 1600]
    assert len({mcolors.to_hex(c[0].get_facecolor()) for c in tokens.containers}) == 3
    assert list(tokens.get_xticks()) == [0, 1]


def test_coinciding_series_are_named_in_the_figure():
    s = summary(
        {"backtrace": [0.0, 0.0], "random": [0.0, 0.0], "unfiltered": [0.0, 0.0]},
        {"backtrace": [10, 10], "random": [10, 10], "unfiltered": [10, 10]},
        base=0.0,
    )
    notes = [t for t in texts(em_figure(s)) if "coincide" in t]
    assert notes == ["backtrace, random and unfiltered coincide at every round (drawn on top of one another)"]


def test_error_bars_show_the_spread_over_seeds():
    s = summary({"backtrace": [0.2], "random": [0.1]}, {"backtrace": [5], "random": [5]})
    s["variants"]["backtrace"]["by_round"][0]["heldout_em"] = cell(0.2, std=0.05, n=3)
    fig = em_figure(s)
    caps = [c for c in fig.axes[0].containers if c.has_yerr]
    assert len(caps) == 1 and caps[0].get_label() == "backtrace (S_q)"


def test_nothing_to_plot_is_said_not_drawn_as_empty_axes():
    s = summary({"backtrace": [None, None]}, {"backtrace": [None, None]}, base=None)
    fig = em_figure(s)
    said = [t for t in texts(fig) if t.startswith(NOTHING)]
    assert said == [
        "Nothing to plot: no held-out EM recorded for any round",
        "Nothing to plot: no round trained (every supervision set was empty or skipped)",
    ]
    assert [t for t in texts(fa_figure(s)) if t.startswith(NOTHING)] == [
        "Nothing to plot: no FA ratio recorded for any round"
    ]
    assert [t for t in texts(verdicts_figure(s)) if t.startswith(NOTHING)]


def test_fa_ratio_uses_round_ticks_only():
    s = summary(
        {"backtrace": [0.4, 0.5], "random": [0.3, 0.2]},
        {"backtrace": [1, 1], "random": [1, 1]},
        fa={"backtrace": [0.4, 0.5], "random": [0.3, 0.2]},
    )
    ax = fa_figure(s).axes[0]
    assert list(ax.get_xticks()) == [0, 1]
    assert len(_lines(ax)) == 2


def test_verdicts_draw_each_difference_with_its_ci():
    verdicts = {
        "backtrace_vs_random": {"difference": 0.1, "ci": [-0.05, 0.2], "n": 40},
        "backtrace_vs_unfiltered": {"difference": -0.02, "ci": [-0.1, 0.04], "n": 40},
    }
    s = summary({"backtrace": [0.2]}, {"backtrace": [1]}, verdicts=verdicts)
    ax = verdicts_figure(s).axes[0]
    bars = [c for c in ax.containers if c.has_xerr]
    assert len(bars) == 2
    segments = [seg for c in bars for seg in c.lines[2][0].get_segments()]
    spans = [tuple(round(x, 6) for x in (seg[0][0], seg[1][0])) for seg in segments]
    assert spans == [(-0.05, 0.2), (-0.1, 0.04)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["backtrace vs random", "backtrace vs unfiltered"]


def test_written_pngs_are_deterministic(tmp_path):
    s = summary({"backtrace": [0.2, 0.3], "random": [0.1, 0.1]}, {"backtrace": [5, 6], "random": [5, 6]})
    first = {p.name: p.read_bytes() for p in write_figures(s, tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in write_figures(s, tmp_path / "b")}
    assert set(first) == {"em_by_round.png", "fa_by_round.png", "verdicts.png"}
    assert first == second
    assert all(b.startswith(b"\x89PNG") and b"Matplotlib" not in b for b in first.values())


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
