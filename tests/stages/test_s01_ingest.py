import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from schemas import QUESTION
from tests.corpora.test_corpora import params_for


def _run_cli(args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "factory.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "FACTORY_NO_PROGRESS": "1"},
    )


def test_ingest_stage_outputs_are_byte_identical_and_counts_add_up(tmp_path, corpora):
    sets = [
        f"corpora={{hotpotqa: [{corpora}/hotpotqa/dev_sample.json], "
        f"2wikimultihopqa: [{corpora}/2wikimultihopqa/dev_sample.json]}}",
    ]
    args = ["ingest", *sum((["--set", s] for s in sets), [])]
    first = _run_cli(args, tmp_path)
    assert first.returncode == 0, first.stderr
    digest = {
        p: (tmp_path / p).read_bytes()
        for p in (
            "data/interim/questions.parquet",
            "data/interim/passages.parquet",
            "data/interim/quarantine.jsonl",
            "metrics/ingest.json",
        )
    }
    second = _run_cli(args, tmp_path)
    assert second.returncode == 0
    assert all((tmp_path / p).read_bytes() == b for p, b in digest.items())
    m = json.loads(digest["metrics/ingest.json"])
    assert (
        m["total"]["read"]
        == m["total"]["ingested"] + m["total"]["quarantined"] + m["total"]["capped"]
        == 839 + 526
    )
    assert len((tmp_path / "data/interim/quarantine.jsonl").read_text().splitlines()) == 3
    assert pq.read_schema(tmp_path / "data/interim/questions.parquet").equals(QUESTION)
    assert (tmp_path / "reports/gx/ingest/index.html").exists()


def test_cli_fail_mode_exit_code_and_message(tmp_path, corpora):
    res = _run_cli(
        [
            "ingest",
            "--set",
            f"corpora={{2wikimultihopqa: [{corpora}/2wikimultihopqa/dev_sample.json]}}",
            "--set",
            "ingest.on_bad_record=fail",
        ],
        tmp_path,
    )
    assert res.returncode == 1
    assert "field 'supporting_facts'" in res.stderr and "Traceback" not in res.stderr


def test_cli_rejects_unknown_and_invalid_params(tmp_path):
    res = _run_cli(["ingest", "--set", "ingest.on_bad_recrd=fail"], tmp_path)
    assert res.returncode == 1
    assert "unknown key ingest.on_bad_recrd: did you mean ingest.on_bad_record?" in res.stderr
    res = _run_cli(["ingest", "--set", "splits.train=2"], tmp_path)
    assert res.returncode == 1 and "splits.train" in res.stderr
    res = _run_cli(["ingest", "--set", "nonsense"], tmp_path)
    assert res.returncode == 1 and "dotted.key=value" in res.stderr
    res = _run_cli(["nostage"], tmp_path)
    assert res.returncode == 2


def test_a_failed_gate_publishes_nothing(tmp_path, corpora, monkeypatch):
    import validators.ingest
    from factory.stages import s01_ingest
    from validators import GateFailed

    real = validators.ingest.IngestChecks.frames

    def with_duplicate_ids(self, known):
        frames = real(self, known)
        ids = frames["questions"]["question_id"]
        frames["questions"]["question_id"] = [ids[0]] * len(ids)
        return frames

    monkeypatch.setattr(validators.ingest.IngestChecks, "frames", with_duplicate_ids)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        GateFailed,
        match=r"questions\.question_id \(data/interim/questions\.parquet\): expect_column_values_to_be_"
        r"unique failed \(839 unexpected; first: hotpotqa/\w+ \(dev_sample\.json\)",
    ):
        s01_ingest.run(params_for({"hotpotqa": [corpora / "hotpotqa" / "dev_sample.json"]}))
    interim = tmp_path / "data" / "interim"
    assert not (interim / "questions.parquet").exists() and not (interim / "passages.parquet").exists()
    assert not list(interim.glob(".*"))  # no staged or temporary file left behind
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "reports/gx/ingest").exists()
    assert (tmp_path / "reports/gx/ingest.failed/index.html").exists()  # the failed run's docs, aside


def test_ingest_killed_mid_write_leaves_the_old_outputs_or_none(tmp_path, corpora):
    """SIGKILL while the tables stream to their staging files: nothing is published under the outputs'
    names (the old outputs stay whole); the re-run writes what an uninterrupted run writes."""
    from tests.stages.kill import files, run_stage

    corpora_set = (
        f"corpora={{hotpotqa: [{corpora}/hotpotqa/dev_sample.json, {corpora}/hotpotqa/train_sample.json], "
        f"musique: [{corpora}/musique/dev_sample.jsonl]}}"
    )
    args = ["ingest", "--set", corpora_set]
    reference = tmp_path / "reference"
    reference.mkdir()
    run_stage(args, reference)
    expected = files(reference / "data" / "interim")

    project = tmp_path / "project"
    interim = project / "data" / "interim"
    project.mkdir()

    def writing() -> bool:
        return any(interim.glob(".*.tmp-*")) if interim.exists() else False

    assert run_stage(args, project, kill_when=writing)
    assert not [p for p in interim.iterdir() if not p.name.startswith(".")]  # no output published
    run_stage(args, project)
    assert files(interim) == expected  # the re-run: same bytes, the killed run's temporaries gone

    other = [*args, "--set", "splits.seed=99"]  # another output underway over the old one
    assert run_stage(other, project, kill_when=writing)
    assert {k: v for k, v in files(interim).items() if not k.startswith(".")} == expected
