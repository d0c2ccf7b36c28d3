"""The index stage: the store and BM25 folder written atomically, deterministic, recall on a sample."""

from __future__ import annotations

import json

from factory.utils import paths
from tests.stages.kill import files, run_stage


def _ingested(project, corpora) -> list[str]:
    args = [
        "--set",
        f"corpora={{hotpotqa: [{corpora}/hotpotqa/dev_sample.json], "
        f"2wikimultihopqa: [{corpora}/2wikimultihopqa/dev_sample.json]}}",
    ]
    project.mkdir()
    run_stage(["ingest", *args], project)
    return args


def test_index_is_deterministic_and_a_killed_build_publishes_nothing(tmp_path, corpora):
    reference = tmp_path / "reference"
    args = _ingested(reference, corpora)
    run_stage(["index", *args, "--set", "index.recall_questions=50"], reference)
    expected = files(reference / paths.INDEX_DIR)
    assert "passages/keys.npy" in expected and "bm25/hotpotqa/data.csc.index.npy" in expected
    metrics = json.loads((reference / "metrics" / "retrieval.json").read_text())
    assert metrics["recall_sample"]["questions"] == {"2wikimultihopqa": 50, "hotpotqa": 50}
    assert metrics["recall"]["pooled"]["all"]["questions"] == 100

    project = tmp_path / "project"
    _ingested(project, corpora)
    data = project / "data"

    def building() -> bool:  # the store is being written inside the temporary index folder
        return any(data.glob(".index.tmp-*/passages/*.arrow"))

    assert run_stage(["index", *args, "--set", "index.recall_questions=50"], project, kill_when=building)
    assert not (project / paths.INDEX_DIR).exists()
    run_stage(["index", *args, "--set", "index.recall_questions=50"], project)
    assert files(project / paths.INDEX_DIR) == expected
    assert [p.name for p in data.iterdir() if p.name.startswith(".index")] == []
