"""The README's picture, made from the current code and a run: ``make images`` (after ``make demo``).

docs/img/audit.png is the first real-graph card of reports/audit.html (factory.calibration.cards: the
calibration questions the audit page samples), from its top to the end of its graph, screenshot by
headless Chromium as the audit page's test drives it. docs/img/audit.png.json records which card and
the SHA-256 of its HTML as the code renders it from params.yaml and the calibration graph files;
tests/test_readme_images.py renders the card again and fails when the code now draws something else.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGE = ROOT / "docs" / "img" / "audit.png"
RECORD = IMAGE.with_name(IMAGE.name + ".json")
PAGE = ROOT / "reports" / "audit.html"
# the card from its top to the bottom of its graph (the triplet table below it stays on the page)
CLIP = """(() => {
  const card = document.querySelector('section.card');
  const top = card.getBoundingClientRect(), svg = card.querySelector('svg');
  const bottom = svg ? svg.getBoundingClientRect().bottom + 12 : top.bottom;
  return JSON.stringify({x: top.x, y: top.y + window.scrollY, width: top.width, height: bottom - top.y});
})()"""


def first_card(root: Path = ROOT) -> tuple[str, str]:
    """(question id, HTML) of the audit page's first real-graph card, rendered by the current code from
    params.yaml and the graph files it names (relative to ``root``, as DVC runs the stages)."""
    from factory.calibration.calibrate import calibrate
    from factory.calibration.cards import cards, sample_rows
    from factory.calibration.graphs import read_graph_files
    from factory.params.config import load_params

    params = load_params(root / "params.yaml")
    graphs = read_graph_files(root / g for g in params.calibration.graphs)
    _, rows = calibrate(graphs, params.backtrace, params.relevance)
    per, seed = params.calibration.audit_questions, params.report.audit_seed
    first = sample_rows(rows, per, seed)[0]
    html = cards(graphs.records, [first], 1, seed, params.backtrace.mode)[0]
    return first["question_id"], str(html)


def digest(html: str) -> str:
    return hashlib.sha256(html.encode()).hexdigest()


def main() -> int:
    from tests.browser import chromium, evaluate, load

    question_id, html = first_card()
    if not PAGE.exists() or html not in PAGE.read_text(encoding="utf-8"):
        print(
            f"{PAGE.relative_to(ROOT)} does not hold the card the current code draws for {question_id}: run "
            "`make demo` (or `dvc repro validate_labels`) first.",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory() as profile, chromium(Path(profile)) as browser:
        load(browser, PAGE.as_uri())
        clip = {**json.loads(evaluate(browser, CLIP)), "scale": 1}
        shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
    IMAGE.write_bytes(base64.b64decode(shot["data"]))
    source = "reports/audit.html, its first real-graph card (factory.calibration.cards), top to graph"
    record = {"image": IMAGE.name, "question_id": question_id, "card_sha256": digest(html), "source": source}
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"wrote {IMAGE.relative_to(ROOT)} ({question_id}) and {RECORD.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
