"""Labelling through the typed section gives the labels the keyword arguments gave (same bytes).

Before issue 31 the labelling functions took a dozen keyword arguments, each with its default written
again; now they take ``BacktraceParams``. ``golden_labels.json`` holds, per case, those keywords and
the sha256 of the labels rows (every mode x target mode) that the keyword API produced for them, on
hand-built trajectories (the cycle, the answer passage, a name only an embedding links) and on real
LLM-made MuSiQue graphs with their passages (``../shared/external``, read as the calibrate-labels
stage reads them, ``factory.calibration.graphs``). The same rows must
come from ``BacktraceParams(**keywords)``. A deliberate change of the labelling rules changes them:
write the file again with ``python -m tests.backtrace.test_params_section`` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from factory.backtrace.labels import backtrace_modes
from factory.calibration.graphs import passage_sentences, read_graph_files, to_trajectory
from factory.params.label_sections import BacktraceParams
from tests.backtrace import test_answer_passage as answer_passage
from tests.backtrace.cases import cycle_trajectory, fake_embedder, make
from tests.calibration.graphs import SHARED

GOLDEN_PATH = Path(__file__).with_name("golden_labels.json")
GOLDEN = json.loads(GOLDEN_PATH.read_text())


def digest(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def real_inputs() -> list[tuple[dict, dict]]:
    if not SHARED.exists():
        pytest.fail(f"the real graphs are not at {SHARED} (set FACTORY_EXTERNAL)")
    records = read_graph_files([SHARED]).records[: GOLDEN["real_records"]]
    return [(to_trajectory(r), passage_sentences(r)) for r in records]


def hand_inputs() -> list[tuple[dict, dict | None]]:
    nyc = make(
        "Who is the mayor of the city?",
        [[("NYC", "mayor", [("New York City", "mayor", "Eric Adams")])]],
        "The mayor is Eric Adams.",
        "Eric Adams",
    )
    return [(cycle_trajectory(), None), (answer_passage.trajectory(), answer_passage.PASSAGES), (nyc, None)]


def digests(case: dict, real: list[tuple[dict, dict]]) -> list[list[str]]:
    """[trajectory id, digest of its labels rows] per input, under the case's keywords as
    ``BacktraceParams``."""
    params = BacktraceParams(modes=GOLDEN["modes"], target_modes=GOLDEN["target_modes"], **case["keywords"])
    embedder = fake_embedder if case.get("embedder") else None
    inputs = hand_inputs() + (real if case["inputs"] == "all" else [])
    return [
        [t["trajectory_id"], digest(backtrace_modes(t, params, embedder=embedder, passages=passages))]
        for t, passages in inputs
    ]


@pytest.fixture(scope="module")
def real() -> list[tuple[dict, dict]]:
    return real_inputs()


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: ",".join(c["keywords"]) or "defaults")
def test_labels_via_the_typed_section_equal_those_of_the_old_keywords(case, real):
    assert digests(case, real) == case["digests"]


if __name__ == "__main__":  # rewrite the golden file with the current rules (module docstring)
    real = real_inputs()
    golden = {**GOLDEN, "cases": [{**c, "digests": digests(c, real)} for c in GOLDEN["cases"]]}
    GOLDEN_PATH.write_text(json.dumps(golden, indent=1) + "\n")
