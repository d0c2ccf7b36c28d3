"""A damaged artifact (a flipped byte, a file cut short) stops the stage reading it, naming the file and how
to restore it; and under DVC the message about previous outputs says what DVC did to them."""

from __future__ import annotations

import errno
import random
import shutil
from pathlib import Path

import pytest

from factory import cli
from factory.cli import main
from factory.retrieval.store import PassageStore
from factory.utils.errors import FactoryError
from factory.utils.io import loading_weights, read_jsonl, write_jsonl
from schemas import read_rows, write_parquet

RESTORE = (
    r"restore it with `dvc checkout --force {0}` \(the copy in DVC's cache\), or `dvc pull --force {0}` "
    r"from a remote that checks what it downloads \(`dvc remote modify <name> verify true`\)"
)


def _passages(path: Path) -> None:
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    rows = [
        {
            "pid": f"p{i}",
            "dataset": "hotpotqa",
            "title": f"T{i}",
            "sentences": ["s"],
            "text": " ".join(rng.choice(words) for _ in range(30)),
        }
        for i in range(300)
    ]
    write_parquet(rows, path, "passage")


def _flip(path: Path, at: float) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_passages_is_named_with_how_to_restore_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = Path("data/interim/passages.parquet")
    _passages(path)
    _flip(path, 0.5)  # inside a compressed data page: the footer still opens
    said = RESTORE.format("data/interim/passages.parquet") + r"; or `factory ingest` rewrites it"
    with pytest.raises(FactoryError, match=r"^data/interim/passages.parquet is damaged \(ZSTD .*\): " + said):
        PassageStore.write(path, "data/index")  # the index stage's read (was "ZSTD decompression failed")
    with pytest.raises(FactoryError, match=r"passages.parquet is damaged \(ZSTD"):
        read_rows(path)
    with pytest.raises(FactoryError, match=r"passages.parquet is damaged \(ZSTD"):
        read_rows(path, ["text"], where={"pid": ["p1"]})  # streamed
    path.write_bytes(path.read_bytes()[:-100])  # cut short: the footer is gone
    with pytest.raises(FactoryError, match=r"is damaged \(not a readable parquet file: .*\): " + said):
        read_rows(path)


def test_a_cut_jsonl_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = Path("data/calibration/questions.jsonl")
    write_jsonl(path, [{"a": 1}, {"a": 2}])
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(
        FactoryError, match=r"questions.jsonl is damaged \(line 2 is not JSON: .*\): restore it"
    ):
        list(read_jsonl(path))
    path.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(FactoryError, match=r"questions.jsonl is damaged \(not UTF-8 text"):
        list(read_jsonl(path))


def test_a_truncated_model_safetensors_is_named(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    model_dir = tmp_path / "base"
    shutil.copytree(tiny_model_dir, model_dir)
    weights = model_dir / "model.safetensors"
    weights.write_bytes(
        weights.read_bytes()[:64]
    )  # was "unexpected SafetensorError: ... incomplete metadata"
    with pytest.raises(FactoryError, match=rf"^{weights} is damaged \(.*\): " + RESTORE.format(weights)):
        with loading_weights(model_dir):
            AutoModelForCausalLM.from_pretrained(model_dir)
    with pytest.raises(ZeroDivisionError):  # any other error passes through as it is
        with loading_weights(model_dir):
            raise ZeroDivisionError


def _disk_full(params):
    raise OSError(errno.ENOSPC, "No space left on device", "data/index/bm25")


@pytest.mark.parametrize(
    ("dvc_stage", "said"),
    [
        (None, "The stage's outputs are as they were."),
        (
            "index",
            "DVC removed the stage's outputs before running it: `dvc checkout index` brings them back.",
        ),
    ],
)
def test_the_message_about_previous_outputs_is_true_under_dvc(monkeypatch, capsys, dvc_stage, said):
    import factory.stages.s03_index as index

    monkeypatch.setattr(index, "run", _disk_full)
    if dvc_stage:
        monkeypatch.setenv("DVC_STAGE", dvc_stage)  # what `dvc repro` sets (measured on DVC 3.67)
    else:
        monkeypatch.delenv("DVC_STAGE", raising=False)
    assert main(["index"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "the disk is full" in err and err.rstrip().endswith(said)
