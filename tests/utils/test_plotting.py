"""Figures: the same data give the same PNG bytes, written with the stage's other outputs; every series
is told apart from its neighbours; series drawn on top of one another are found and named."""

from __future__ import annotations

import pytest

from factory.utils import io, plotting


def _figure(values):
    fig, ax = plotting.pyplot().subplots(figsize=(3, 2))
    for i, (name, ys) in enumerate(values.items()):
        ax.plot(range(len(ys)), ys, label=name, **plotting.style(i))
    ax.legend()
    return fig


def test_the_same_data_give_the_same_png_bytes_without_the_matplotlib_version(tmp_path):
    data = {"backtrace": [0.2, 0.3], "random": [0.1, 0.25]}
    fig = _figure(data)
    first = plotting.save(fig, tmp_path / "a.png").read_bytes()
    second = plotting.save(_figure(data), tmp_path / "b.png").read_bytes()
    other = plotting.save(_figure({**data, "random": [0.1, 0.2]}), tmp_path / "c.png").read_bytes()
    assert first.startswith(b"\x89PNG") and first == second and other != first
    assert b"Matplotlib" not in first and b"Software" not in first
    assert not plotting.pyplot().fignum_exists(fig.number)  # a saved figure is closed


def test_a_figure_of_a_failing_stage_is_not_written(tmp_path):
    with pytest.raises(RuntimeError), io.outputs_together():
        plotting.save(_figure({"x": [1, 2]}), tmp_path / "em.png")
        raise RuntimeError("the stage fails after drawing")
    assert list(tmp_path.iterdir()) == []


def test_neighbouring_series_differ_in_colour_marker_and_line_style():
    styles = [plotting.style(i) for i in range(20)]
    for a, b in zip(styles, styles[1:]):
        assert all(a[k] != b[k] for k in ("color", "marker", "linestyle")), (a, b)
    assert len({(s["color"], s["marker"]) for s in styles[:8]}) == 8


def test_coinciding_series_are_grouped_and_named():
    series = {"a": [0.1, 0.2], "b": [0.1, 0.2 + 1e-12], "c": [0.1, 0.2], "d": [0.1, 0.3],
              "e": [None, None], "f": [None, None], "g": [0.1, 0.3]}  # fmt: skip
    groups = plotting.coinciding(series)
    assert groups == [["a", "b", "c"], ["d", "g"]]  # series with no value at all draw nothing
    assert plotting.coincide_note(groups, "at every round") == (
        "a, b and c; d and g coincide at every round (drawn on top of one another)"
    )
    assert plotting.coinciding({"a": [0.1], "b": [0.2]}) == [] and plotting.coincide_note([]) is None


def test_nothing_to_plot_says_why_instead_of_drawing_empty_axes():
    fig, ax = plotting.pyplot().subplots()
    plotting.nothing_to_plot(ax, "no round trained")
    assert not ax.axison and plotting.texts(fig) == ["Nothing to plot: no round trained"]
    plotting.pyplot().close(fig)
