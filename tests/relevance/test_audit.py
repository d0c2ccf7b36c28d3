"""reports/audit.html: what the page holds, that it is self-contained and deterministic, and that a
real browser (headless Chromium over the DevTools protocol) renders it without console errors."""

from __future__ import annotations

import base64
import re
import shutil

import pytest

from factory.cli import main
from factory.utils import paths
from schemas import read_rows
from tests.browser import browser, console_errors, evaluate, load  # noqa: F401
from tests.stages.test_s15_validate_labels import (  # noqa: F401
    DATASETS,
    _write_counterfactual,
    _write_inputs,
    corpus_sample,
)

ARGV = ["validate-labels", "--set", "relevance.bootstrap_samples=30", "--set", "relevance.random_seeds=2"]


@pytest.fixture
def audit_page(tmp_path, monkeypatch, corpus_sample):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    _write_inputs(*corpus_sample)
    trajectories = read_rows(paths.trajectories("backtrace", 1, 0))
    _write_counterfactual(trajectories, read_rows(paths.labels("backtrace", 1, 0)))
    assert main(ARGV) == 0
    return tmp_path / paths.REPORTS / "audit.html"


def sections(html: str) -> list[str]:
    return re.findall(r'<section class="trajectory".*?</section>', html, flags=re.S)


def test_the_page_shows_each_sampled_trajectory_with_its_labels_graph_sources_and_counterfactuals(audit_page):
    html = audit_page.read_text()
    found = sections(html)
    assert len(found) == 3 * len(DATASETS)  # report.audit_trajectories per dataset
    assert [re.search(r"<h2>(\w+):", s).group(1) for s in found] == sorted(DATASETS * 3)
    labels = {
        r["trajectory_id"]: r
        for r in read_rows(paths.labels("backtrace", 1, 0))
        if (r["mode"], r["target_mode"]) == ("undirected_shortest", "thought_and_answer")
    }
    for s in found:
        tid = re.search(r'id="([^"]+)"', s).group(1)
        marks = dict(re.findall(r'<span class="tag">step (\d+) \w+: (KEPT|DROPPED)</span>', s))
        assert {int(i) for i, m in marks.items() if m == "KEPT"} == set(labels[tid]["kept_step_indices"])
        assert "Gold answer <b>" in s
        assert s.count("<svg") == 1
        edges = re.findall(r'<g class="edge ([^"]*)"', s)
        assert any("sq" in e.split() for e in edges) and any("sq" not in e.split() for e in edges)
        assert any("gold" in e.split() for e in edges)
        assert "— source: " in s  # each edge's source passage on hover (SVG <title>)
        for condition in ("full", "without_sq", "only_sq", "without_random", "closed_book"):
            assert f"<td>{condition}</td>" in s
    # self-contained: no script, no external resource (the SVG namespace is an identifier, not a fetch)
    assert "<script" not in html and " src=" not in html and "<link" not in html
    assert set(re.findall(r"https?://[^\"' ]+", html)) == {"http://www.w3.org/2000/svg"}
    first = audit_page.read_bytes()
    assert main(ARGV) == 0
    assert audit_page.read_bytes() == first


def test_the_sample_size_is_a_param_and_nothing_to_audit_is_said(audit_page):
    assert main([*ARGV, "--set", "report.audit_trajectories=1"]) == 0
    assert len(sections(audit_page.read_text())) == len(DATASETS)
    shutil.rmtree("data/trajectories")
    assert main(ARGV) == 0
    html = audit_page.read_text()
    assert sections(html) == [] and "Nothing to audit: no correct trajectory in any round" in html


def test_dropped_steps_and_pairs_are_marked(audit_page):
    from factory.relevance.audit import trajectory_section
    from factory.relevance.check import Source

    t = read_rows(paths.trajectories("backtrace", 1, 0))[0]
    explore = next(s for s in t["steps"] if s["kind"] == "explore")
    complete = next(s for s in t["steps"] if s["kind"] == "complete")
    labels = {"kept_triplet_ids": [], "kept_step_indices": [explore["index"]], "kept_pair_ids": []}
    passages = {p["pid"]: p for p in read_rows(paths.PASSAGES)}
    html = trajectory_section(Source("x", [t], []), t, labels, {}, passages, [], 0.5)
    assert f"step {complete['index']} complete: DROPPED" in html
    assert f"step {explore['index']} explore: KEPT" in html
    assert "[dropped] " in html and "[kept] " not in html
    assert 'class="edge sq' not in html  # nothing in S_q: no edge drawn as kept
    assert "Not re-asked by the counterfactual stage" in html


def test_text_from_the_data_is_escaped_and_cannot_break_the_page():
    from factory.relevance.audit import trajectory_section
    from factory.relevance.check import Source
    from factory.simulate.assemble import build_trajectory

    answer = "O'Brien & Co"
    q = {"question_id": "q1", "question": 'Who wrote "<script>x()</script>"?', "answers": [answer]}
    t = build_trajectory(
        q, [[("<b>A</b>", "wrote", [("<b>A</b>", "wrote", answer)])]], "t", answer, trajectory_id='x"y'
    )
    html = trajectory_section(Source("s", [t], []), t, None, {}, {}, [], 0.5)
    assert "<script>" not in html and "<b>A</b>" not in html
    assert "Who wrote &quot;&lt;script&gt;x()&lt;/script&gt;&quot;?" in html
    # in attributes too, with the entities the page has always had
    assert 'id="x&quot;y"' in html and "<b>O&#x27;Brien &amp; Co</b>" in html


# ------------------------------------------------------------------ the browser


def test_a_real_browser_renders_the_page_without_console_errors(audit_page, browser, tmp_path):  # noqa: F811
    load(browser, audit_page.as_uri())
    count = evaluate(browser, "document.querySelectorAll('section.trajectory').length")
    assert count == len(sections(audit_page.read_text())) == 3 * len(DATASETS)
    laid_out = evaluate(
        browser,
        "[...document.querySelectorAll('section.trajectory svg')]"
        ".filter(s => s.getBoundingClientRect().width > 100).length",
    )
    assert laid_out == 3 * len(DATASETS)  # every graph drawn with a size
    shot = tmp_path / "audit.png"
    shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size[0] >= 1000 and len(set(image.getdata())) > 16  # not a blank page
    assert console_errors(browser) == []
