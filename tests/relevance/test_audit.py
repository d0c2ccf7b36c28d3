"""reports/audit.html: what the page holds, that it is self-contained and deterministic, and that a
real browser (headless Chromium over the DevTools protocol) renders it without console errors."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from factory import paths
from factory.cli import main
from schemas import read_rows
from tests.stages.test_s08_validate_labels import (  # noqa: F401
    DATASETS,
    _write_counterfactual,
    _write_inputs,
    corpus_sample,
)

ARGV = ["validate-labels", "--set", "relevance.bootstrap_samples=30", "--set", "relevance.random_seeds=2"]
CHROMIUM = os.environ.get("FACTORY_CHROMIUM", "/usr/bin/chromium")


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
    assert sections(html) == [] and "Nothing to audit: no correct trajectory was found" in html


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


# ------------------------------------------------------------------ the browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """A minimal Chrome DevTools protocol client over one page's websocket."""

    def __init__(self, url: str):
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=64 * 2**20, open_timeout=20)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))


@pytest.fixture
def browser(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (.ci/run does) for the browser check")
    port = _free_port()
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}",
         f"--remote-debugging-port={port}", "--remote-allow-origins=*", "--window-size=1200,900",
         "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline, pages = time.monotonic() + 30, []
        while not pages:
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"chromium did not open its DevTools port (exit code {proc.poll()})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [p for p in json.load(r) if p.get("type") == "page"]
            except OSError:
                time.sleep(0.2)
        client = DevTools(pages[0]["webSocketDebuggerUrl"])
        yield client
        client.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_real_browser_renders_the_page_without_console_errors(audit_page, browser, tmp_path):
    for domain in ("Page", "Runtime", "Log"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=audit_page.as_uri())
    browser.wait_for("Page.loadEventFired")
    count = browser.call(
        "Runtime.evaluate", expression="document.querySelectorAll('section.trajectory').length"
    )
    assert count["result"]["value"] == len(sections(audit_page.read_text())) == 3 * len(DATASETS)
    svgs = browser.call(
        "Runtime.evaluate",
        expression="[...document.querySelectorAll('section.trajectory svg')]"
        ".filter(s => s.getBoundingClientRect().width > 100).length",
    )
    assert svgs["result"]["value"] == 3 * len(DATASETS)  # every graph laid out with a size
    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    (tmp_path / "audit.png").write_bytes(shot)
    from PIL import Image

    image = Image.open(tmp_path / "audit.png").convert("L")
    assert image.size[0] >= 1000 and len(set(image.getdata())) > 16  # not a blank page
    errors = [
        e for e in browser.events
        if (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
        or e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]  # fmt: skip
    assert errors == []
