"""A stage's outputs change together or not at all, and what goes wrong says what it is: a hand-edited
artifact (caught on read, before any output is touched), a full disk, a path in the way. The projects
are made from the shared corpora."""

from __future__ import annotations

import errno
import importlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from factory import cli
from factory.cli import main
from factory.utils import io, paths
from tests.stages.test_s08_variants import _traj, _write_round, question_pool, workdir  # noqa: F401
from tests.stages.test_s10_train import decide

OUTPUT_ROOTS = ("data", "metrics", "reports", "models", "dvclive")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file a stage may write (hidden ones included: a left temporary shows)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for top in OUTPUT_ROOTS
        for p in sorted((root / top).rglob("*"))
        if p.is_file()
    }


def corpora_set(corpora: Path) -> list[str]:
    return [
        "--set",
        f"corpora={{hotpotqa: [{corpora}/hotpotqa/train_sample.json], "
        f"musique: [{corpora}/musique/train_sample.jsonl]}}",
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpora):
    """The ingest and index outputs of two shared corpus files, built once."""
    root = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert main(["ingest", *corpora_set(corpora)]) == 0
        assert main(["index", "--set", "index.recall_questions=20"]) == 0
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    """A copy of ``built`` to run stages in."""
    for top in ("data", "metrics", "reports"):
        shutil.copytree(built / top, tmp_path / top)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_stage_publishes_its_outputs_together():
    """Each stage's ``run`` is wrapped in ``factory.utils.io.outputs_together`` (the behaviour is tested on
    the stages below)."""
    unwrapped = []
    for command, module_name in cli.stage_names().items():
        run = importlib.import_module(f"factory.stages.{module_name}").run
        cells = [c.cell_contents for c in getattr(run, "__closure__", None) or ()]
        if not any(getattr(c, "func", None) is io.outputs_together.__wrapped__ for c in cells):
            unwrapped.append(command)
    assert not unwrapped


def test_an_index_whose_recall_fails_leaves_the_old_index_and_metrics(project, monkeypatch):
    before = snapshot(project)

    def fails(*args, **kwargs):
        raise RuntimeError("recall failed")

    monkeypatch.setattr("factory.stages.s03_index.supporting_recall", fails)
    assert main(["index", "--set", "index.k1=1.2", "--set", "index.recall_questions=20"]) == cli.EXIT_FAILURE
    assert snapshot(project) == before  # the new index never replaced the old one


def _full_disk_at_the_metrics(monkeypatch, code: int) -> None:
    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(".ingest.json.tmp-"):
            raise OSError(code, errno.errorcode[code])  # a write on a full disk names no file
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def _arrow_full_disk_at_the_passages(monkeypatch, code: int) -> None:
    real = pq.ParquetWriter.write_table

    def write_table(self, *args, **kwargs):
        if ".passages.parquet" in str(self.where):  # Arrow's errors carry the errno in the text only
            raise OSError(f"Error writing bytes to file. Detail: [errno {code}] {errno.errorcode[code]}")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)


@pytest.mark.parametrize(
    ("inject", "code", "said"),
    [
        (_full_disk_at_the_metrics, errno.ENOSPC, "metrics/ingest.json: the disk is full"),
        (_arrow_full_disk_at_the_passages, errno.ENOSPC, "data/interim/passages.parquet: the disk is full"),
        (_arrow_full_disk_at_the_passages, errno.EFBIG, "data/interim/passages.parquet: the file grew past"),
    ],
    ids=["ENOSPC at the metrics", "ENOSPC in Arrow", "EFBIG in Arrow"],
)
def test_a_full_disk_at_any_output_of_ingest_changes_none(
    project, corpora, monkeypatch, capsys, inject, code, said
):
    before = snapshot(project)
    inject(monkeypatch, code)
    capsys.readouterr()
    assert main(["ingest", *corpora_set(corpora), "--set", "splits.seed=99"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert said in err and "The stage's outputs are as they were." in err and "unexpected" not in err
    assert snapshot(project) == before


def _null_text(path: Path) -> None:
    frame = pd.read_parquet(path)
    frame.loc[3, "text"] = None
    frame.to_parquet(path)


def _drop_supporting(path: Path) -> None:
    pd.read_parquet(path).drop(columns=["supporting"]).to_parquet(path)


def _answers_as_text(path: Path) -> None:
    table = pq.read_table(path)
    answers = pa.array([json.dumps(a) for a in table.column("answers").to_pylist()])
    pq.write_table(table.set_column(table.schema.get_field_index("answers"), "answers", answers), path)


@pytest.mark.parametrize(
    ("edit", "artifact", "said"),
    [
        (_null_text, paths.PASSAGES, "column 'text' has 1 null but is required"),
        (_drop_supporting, paths.QUESTIONS, "column 'supporting' is missing"),
        (_answers_as_text, paths.QUESTIONS, "column 'answers' is string, not list<item: string>"),
    ],
    ids=["nulls in text", "a column dropped", "a list turned into a string"],
)
def test_a_hand_edited_artifact_is_refused_before_any_output_changes(project, capsys, edit, artifact, said):
    edit(project / artifact)
    before = snapshot(project)
    capsys.readouterr()
    assert main(["index", "--set", "index.k1=1.2", "--set", "index.recall_questions=20"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert f"{artifact} does not match the " in err and said in err
    assert "`factory ingest` rewrites it" in err and "unexpected" not in err
    assert snapshot(project) == before


def test_an_artifact_rewritten_with_the_same_values_is_read(project):
    for artifact in (paths.QUESTIONS, paths.PASSAGES):  # pandas: nullable columns, wider integers, an
        pd.read_parquet(project / artifact).to_parquet(project / artifact)  # all-null column typed null
    assert main(["index", "--set", "index.recall_questions=20"]) == 0


def test_an_unwritable_output_folder_is_named(project, corpora, monkeypatch, capsys):
    before = snapshot(project)
    real = pq.ParquetWriter.__init__

    def denied(self, where, *args, **kwargs):  # what Arrow says in a folder this user cannot write
        if ".questions.parquet" in str(where):  # (chmod cannot show it: tests may run as root)
            raise OSError(f"Failed to open local file '{where}'. Detail: [errno 13] Permission denied")
        real(self, where, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "__init__", denied)
    assert main(["ingest", *corpora_set(corpora), "--set", "splits.seed=99"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert (
        "factory ingest: data/interim/questions.parquet: permission denied: make it readable/writable" in err
    )
    assert snapshot(project) == before


def test_paths_in_the_way_are_named(tmp_path, monkeypatch, corpora, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").write_text("a file where the data folder goes")
    assert main(["ingest", *corpora_set(corpora)]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "data/interim: a part of the path is a file where a folder is expected" in err
    assert "unexpected" not in err
    (tmp_path / "data").unlink()
    folder = f"corpora={{hotpotqa: [{corpora}/hotpotqa]}}"
    assert main(["ingest", "--set", folder]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert f"corpus file {corpora}/hotpotqa is a folder, not a file" in err and "unexpected" not in err


def test_variants_failing_at_its_metrics_keep_the_old_set(workdir, question_pool, monkeypatch, capsys):  # noqa: F811
    train = question_pool["train"]
    _write_round("backtrace", 0, [_traj(q, "backtrace", 0) for q in train[:3]])
    assert main(["variants", "--variant", "backtrace", "--round", "0"]) == 0
    before = snapshot(workdir)
    assert (workdir / paths.supervision_dir("backtrace", 0) / "train.jsonl").read_text()
    _write_round("backtrace", 0, [_traj(q, "backtrace", 0) for q in train[2:6]])  # a new round to build
    _full_disk_at(monkeypatch, paths.stage_metrics("variants", "backtrace", 0).name)
    assert main(["variants", "--variant", "backtrace", "--round", "0"]) == cli.EXIT_FAILURE
    assert "the disk is full" in capsys.readouterr().err
    after = snapshot(workdir)
    inputs = ("data/trajectories", "data/labels")
    assert {k: v for k, v in after.items() if not k.startswith(inputs)} == {
        k: v for k, v in before.items() if not k.startswith(inputs)
    }


def test_a_skipped_training_round_failing_at_its_metrics_keeps_the_old_folders(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    decide("backtrace", -1, stop=True)
    assert main(["train", "--variant", "backtrace", "--round", "0"]) == 0
    assert (tmp_path / paths.adapter_dir("backtrace", 0) / "status.json").exists()
    assert (tmp_path / paths.live_dir("backtrace", 0) / "metrics.json").exists()
    before = snapshot(tmp_path)
    path = tmp_path / paths.init_decision("backtrace", 0)
    path.write_text(json.dumps({"stop": True, "reason": "another reason"}))
    _full_disk_at(monkeypatch, paths.stage_metrics("train", "backtrace", 0).name)
    assert main(["train", "--variant", "backtrace", "--round", "0"]) == cli.EXIT_FAILURE
    assert "the disk is full" in capsys.readouterr().err
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("metrics/bootstrap")} == {
        k: v for k, v in before.items() if not k.startswith("metrics/bootstrap")
    }


def _full_disk_at(monkeypatch, name: str) -> None:
    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(f".{name}.tmp-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def test_outputs_wait_under_their_temporaries_and_read_back_from_there(tmp_path):
    from schemas import read_rows, write_parquet

    out, checkpoint = tmp_path / "out.json", tmp_path / "work" / "checkpoint.json"
    removed = []
    with pytest.raises(RuntimeError), io.outputs_together():
        io.write_json(out, {"a": 1})
        with io.immediate():
            io.write_json(checkpoint, {"done": 1})  # work state: on disk at once
        io.after_publishing(removed.append, "never")
        assert not out.exists() and io.read_json(out) == {"a": 1} and checkpoint.exists()
        raise RuntimeError("the stage fails")
    assert not out.exists() and removed == [] and not list(tmp_path.glob(".*"))
    table = tmp_path / "t.parquet"
    with io.outputs_together():
        write_parquet(
            [{"pid": "p", "dataset": "d", "title": "t", "text": "x", "sentences": ["x"]}], table, "passage"
        )
        assert not table.exists() and read_rows(table)[0]["pid"] == "p"
        io.after_publishing(removed.append, "published")
    assert table.exists() and removed == ["published"]


def test_a_hand_edited_json_input_names_the_command_that_rewrites_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / paths.init_decision("backtrace", 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"stop": false, "reason": ')  # cut short
    assert main(["train", "--variant", "backtrace", "--round", "0"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "metrics/bootstrap/backtrace/seed_0/init.json is not valid JSON" in err
    assert "`factory bootstrap --variant backtrace --seed 0` rewrites it" in err and "unexpected" not in err
    assert [p for p in snapshot(tmp_path) if not p.startswith("metrics/bootstrap")] == []  # nothing written
