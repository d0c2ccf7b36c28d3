"""`dvc plots show` with the offline template (factory.utils.dvc_plots): the page draws its charts in a real
browser without network (DVC's own page would load Vega from a CDN)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from factory.utils import dvc_plots
from tests.browser import browser, console_errors, evaluate, load  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


def test_the_template_inlines_the_libraries_and_keeps_dvcs_placeholders(tmp_path):
    path = dvc_plots.write(tmp_path / "offline.html")
    text = path.read_text()
    assert "{plot_divs}" in text and "{refresh_tag}" in text and "{scripts}" not in text
    assert "window.vegaEmbed=" in text and "cdn.jsdelivr" not in text and "<script src" not in text
    assert dvc_plots.write(path).read_text() == text  # stable


def test_the_repository_names_the_template_dvc_uses():
    config = (ROOT / ".dvc" / "config").read_text()
    assert "html_template = plots/offline.html" in config  # relative to .dvc/
    assert "/plots/offline.html" in (ROOT / ".dvc" / ".gitignore").read_text()  # generated, not committed


@pytest.mark.slow
def test_dvc_plots_show_renders_offline_in_a_browser(tmp_path, browser):  # noqa: F811
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    dvc = str(Path(sys.executable).parent / "dvc")

    def sh(*args):
        done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    dvc_plots.write(tmp_path / ".dvc" / "plots" / "offline.html")
    sh(dvc, "config", "plots.html_template", "plots/offline.html")
    (tmp_path / "loss.tsv").write_text("step\tloss\n1\t2.5\n2\t1.9\n3\t1.4\n")
    (tmp_path / "em.csv").write_text("round,backtrace,random\n-1,0.1,0.1\n0,0.2,0.1\n1,0.25,0.15\n")
    (tmp_path / "dvc.yaml").write_text(
        "plots:\n  - loss.tsv:\n      x: step\n  - em.csv:\n      x: round\n      y: [backtrace, random]\n"
    )
    sh(dvc, "plots", "show", "-o", "out")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "cdn.jsdelivr" not in page and page.count("vegaEmbed(") == 2
    load(browser, (tmp_path / "out" / "index.html").as_uri())
    drawn = evaluate(
        browser,
        "new Promise(r => setTimeout(() => r([...document.querySelectorAll('div[id] svg, div[id] canvas')]"
        ".filter(e => e.getBoundingClientRect().width > 100).length), 1500))",
    )
    assert drawn == 2
    marks = evaluate(browser, "document.querySelectorAll('path.mark-line, g.mark-line path').length")
    assert marks >= 3  # one line for the loss, two for EM
    assert console_errors(browser) == []
