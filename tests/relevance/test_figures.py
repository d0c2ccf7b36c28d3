"""reports/relevance.png and reports/causal_effects.png from hand-made results: what they draw."""

from __future__ import annotations

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import pytest

from factory.relevance.figures import causal_figure, relevance_figure, write_figures
from factory.utils.plotting import NOTHING, texts

METHODS = (
    "backtrace/undirected_shortest/thought_and_answer",
    "authors_rule",
    "answer_entity",
    "random",
    "unfiltered",
)


def c(value, lo=None, hi=None):
    return {"value": value, "ci": [lo, hi]}


def relevance_result(value=0.5) -> dict:
    def level():
        return {
            "methods": {
                m: {
                    "micro": {
                        k: c(value if value is None else value + 0.1 * j, 0.1, 0.9)
                        for k in ("precision", "recall", "f1")
                    }
                }
                for j, m in enumerate(METHODS)
            }
        }

    return {
        "status": "ok",
        "default_method": METHODS[0],
        "params": {"bar": 0.8},
        "groups": {
            g: {"levels": {"paragraph": level()}} for g in ("all", "dataset=hotpotqa", "dataset=musique")
        },
    }


def test_relevance_bars_one_colour_per_series_with_cis():
    fig = relevance_figure(relevance_result())
    ax = fig.axes[0]
    assert len(ax.containers) == 10  # 5 bar series + their error bars
    bars = [cont for cont in ax.containers if hasattr(cont, "patches")]
    assert [b.get_label() for b in bars] == [
        "S_q undirected_shortest/thought_and_answer",
        "KnowTrace authors' rule",
        "answer-entity only",
        "random at matched size",
        "unfiltered (keep all)",
    ]
    assert len({mcolors.to_hex(b.patches[0].get_facecolor()) for b in bars}) == 5
    assert all(len(b.patches) == 3 for b in bars)  # all + 2 datasets
    legend = fig.legends[0]
    assert len({mcolors.to_hex(h.get_facecolor()) for h in legend.legend_handles}) == 5
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all", "hotpotqa", "musique"]


@pytest.mark.parametrize(
    "result, why",
    [
        ({"status": "no_correct_trajectories"}, "no relevance scores (no_correct_trajectories)"),
        (relevance_result(None), "no precision, recall or F1 is defined"),
    ],
)
def test_relevance_with_nothing_scored_says_so(result, why):
    fig = relevance_figure(result)
    said = [t for t in texts(fig) if t.startswith(NOTHING)]
    assert len(said) == 1 and why in said[0]
    assert all(not ax.axison for ax in fig.axes)


def causal_result() -> dict:
    def group(n, nec_sq, nec_rand, cb):
        return {
            "trajectories": n,
            "accuracy": {"full": c(1.0, 1.0, 1.0), "closed_book": c(cb, 0.0, cb + 0.1)},
            "effects": {
                "trajectories": n,
                "necessity_sq": c(nec_sq, nec_sq - 0.2, nec_sq + 0.1),
                "necessity_random": c(nec_rand, 0.0, nec_rand + 0.2),
                "difference": c(nec_sq - nec_rand, -0.3, 0.4),
                "sufficiency": c(None),  # not computed: no row
            },
        }

    return {
        "status": "ok",
        "groups": {
            "all": group(12, 0.5, 0.1, 0.2),
            "dataset=hotpotqa": group(7, 0.4, 0.2, 0.1),
            "dataset=hotpotqa/route=chain": group(3, 0.9, 0.0, 0.0),
        },
    }


def test_causal_forest_plot_has_one_row_per_dataset_and_effect_with_its_ci():
    fig = causal_figure(causal_result())
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # sub-groups (route, qtype) are left to the tables; sufficiency without a value draws no row
    assert len(labels) == 8
    assert labels[-1] == "all (n=12): lost without S_q"
    assert "hotpotqa (n=7): lost without random |S_q|" in labels
    assert not any("sufficiency" in lab for lab in labels)
    bars = [cont for cont in ax.containers if cont.has_xerr]
    assert len(bars) == 8
    top = bars[-1]  # drawn last = the first row: all, necessity S_q, in points
    assert top.lines[0].get_xdata()[0] == pytest.approx(50)
    seg = top.lines[2][0].get_segments()[0]
    assert (seg[0][0], seg[1][0]) == pytest.approx((30, 60))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "lost without S_q",
        "lost without random |S_q|",
        "difference (S_q - random)",
        "closed-book accuracy",
    ]
    colours = {mcolors.to_hex(h.get_color()) for h in ax.get_legend().legend_handles}
    assert len(colours) == 4


def test_causal_without_rows_says_there_is_nothing_to_plot(tmp_path):
    said = [t for t in texts(causal_figure({"status": "no_rows"})) if t.startswith(NOTHING)]
    assert said == ["Nothing to plot: no counterfactual rows (no correct trajectory was re-asked)"]
    paths = write_figures({"status": "no_trajectories", "causal": {"status": "no_rows"}}, tmp_path)
    assert [p.name for p in paths] == ["relevance.png", "causal_effects.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_a_causal_check_with_no_effect_says_why_in_the_figure():
    group = {
        "trajectories": 6,
        "accuracy": {"full": c(0.0, 0.0, 0.0), "closed_book": c(0.0, 0.0, 0.0)},
        "effects": {"trajectories": 0, "full_failed": 6, "necessity_sq": c(None), "sufficiency": c(None)},
    }
    fig = causal_figure({"status": "ok", "groups": {"all": group}})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["all (n=6): closed-book accuracy"]
    assert any("the full graph reproduces none of the 6 re-asked answers" in t for t in texts(fig))
    assert ax.get_xlim()[0] <= -10 and ax.get_xlim()[1] >= 10


def test_undefined_scores_are_marked_na_not_left_blank():
    result = relevance_result()
    cell = result["groups"]["dataset=musique"]["levels"]["paragraph"]["methods"][METHODS[0]]["micro"]
    cell["precision"] = c(None)
    fig = relevance_figure(result)
    assert [t.get_text() for t in fig.axes[0].texts] == ["n/a"]
