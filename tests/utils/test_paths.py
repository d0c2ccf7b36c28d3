"""Each artifact's path lies inside the output dvc.yaml declares for it, and the command ``producer`` names
to rewrite it (what a user is told when it is missing or hand-edited) is the command DVC runs for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.utils import paths
from schemas import ARTIFACTS
from tests.test_dvc_yaml import DVC, _declared, _render

V, S, R = "random", 2, 3  # seed and round differ: a swapped pair shows
ITEM = {"variant": V, "seed": S, "r": {"round": R, "after": f"round_{R - 1}"}}
ARTIFACT_FILES = [
    paths.QUESTIONS,
    paths.PASSAGES,
    paths.QUARANTINE,
    paths.CONTAMINATION,
    paths.EVAL_QUESTIONS,
    paths.ROUTES_PREDICTED,
    paths.trajectories(V, R, S),
    paths.labels(V, R, S),
    paths.counterfactual(V, R, S),
    paths.supervision_dir(V, R, S) / "train.parquet",
    paths.trace_dir(V, R, S) / "sft.parquet",
    paths.trace_dir(V, R, S) / "rl.parquet",
    paths.base_eval_data("heldout"),
    paths.eval_data(V, R, "heldout", S),
    paths.selected_test_data(V, S),
    paths.ENTAILMENT,
    paths.SIMULATED_DIR / "trajectories.parquet",
    paths.base_eval_metrics("heldout"),
    paths.eval_metrics(V, R, "heldout", S),
    paths.decision(V, R, S),
    paths.init_decision(V, S),
    paths.METRICS / "summary.json",
    paths.METRICS / "relevance.json",
    paths.adapter_dir(V, R, S) / "status.json",
]


def _stage_writing(path: Path) -> dict:
    """The one dvc.yaml stage instance with an output that is ``path`` or a folder holding it."""
    found = []
    for stage in DVC.values():
        item = V if "foreach" in stage else ITEM
        body = stage.get("do", stage)
        if any(path == Path(out) or Path(out) in path.parents for out in _declared(body, item)):
            found.append(_render(body["cmd"], item))
    assert len(found) == 1, f"{path} is written by {found or 'no stage'}"
    return found[0]


def _parsed(command: str) -> tuple[str, dict[str, str]]:
    """A command's name and its options, in any order."""
    words = command.split()
    return " ".join(words[:2]), dict(zip(words[2::2], words[3::2]))


def test_every_named_artifact_is_checked_here():
    assert len(ARTIFACT_FILES) == len(paths._PRODUCERS)


@pytest.mark.parametrize("path", ARTIFACT_FILES, ids=str)
def test_the_command_that_rewrites_an_artifact_is_the_one_dvc_runs(path, tmp_path):
    artifact, command = paths.producer(path)
    assert _parsed(command) == _parsed(_stage_writing(path))
    assert artifact is None or artifact in ARTIFACTS
    assert paths.producer(tmp_path / path) == (artifact, command)  # an absolute path is found too


@pytest.mark.parametrize(
    "path",
    ["mydata/interim/questions.parquet", "data/labels/random/seed_2/round_3.parquet.bak", "notes.json"],
)
def test_a_path_that_is_no_artifact_has_no_producer(path):
    assert paths.producer(path) == (None, None)
