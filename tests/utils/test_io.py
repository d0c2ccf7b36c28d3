"""Files a stage writes: deterministic JSON, atomic replacement, errors that name what rewrites a file.
(Publishing a stage's outputs together is tested in tests/stages/test_outputs_together.py.)"""

from __future__ import annotations

import errno
import gc

import pytest

from factory.utils import io, paths
from factory.utils.errors import FactoryError
from factory.utils.progress import Progress


def test_json_is_the_same_bytes_whatever_the_key_order_and_float_noise(tmp_path):
    a = io.write_json(
        tmp_path / "a.json", {"z": 0.1 + 0.2, "a": {"y": [1 / 3, (2.0000000001,)], "b": "café"}}
    )
    b = io.write_json(tmp_path / "b.json", {"a": {"b": "café", "y": [0.333333, [2.0]]}, "z": 0.3})
    assert a.read_bytes() == b.read_bytes()
    assert a.read_text(encoding="utf-8") == (
        '{\n  "a": {\n    "b": "café",\n    "y": [\n      0.333333,\n      [\n        2.0\n      ]\n'
        '    ]\n  },\n  "z": 0.3\n}\n'
    )


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = io.write_jsonl(tmp_path / "rows.jsonl", [{"b": 1, "a": "é"}])
    assert out.read_text(encoding="utf-8") == '{"a": "é", "b": 1}\n'

    def rows():
        yield {"id": 1}
        raise RuntimeError("killed half-way")

    with pytest.raises(RuntimeError):
        io.write_jsonl(out, rows())
    assert list(io.read_jsonl(out)) == [{"a": "é", "b": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_what_a_killed_writer_left_is_removed_on_the_next_write(tmp_path):
    (tmp_path / ".m.json.tmp-99999").write_text("half")
    (tmp_path / ".m.json.old-99999").mkdir()
    io.write_json(tmp_path / "m.json", {"ok": True})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_a_folder_replaces_the_old_one_whole(tmp_path):
    folder = tmp_path / "index"
    io.write_text(folder / "stale.txt", "from the last run")
    with io.atomic_path(folder) as tmp:
        tmp.mkdir()
        (tmp / "fresh.txt").write_text("new")
    assert sorted(p.name for p in folder.iterdir()) == ["fresh.txt"]


def test_a_missing_or_broken_json_names_the_command_that_rewrites_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        FactoryError,
        match=r"^metrics/bootstrap/random/seed_3/round_2\.json is missing: "
        r"`factory bootstrap --variant random --round 2 --seed 3` rewrites it$",
    ):
        io.read_json(paths.decision("random", 2, 3))
    io.write_text("notes.json", '{"cut": ')
    with pytest.raises(FactoryError, match=r"^notes\.json is not valid JSON \(.*\): write it again$"):
        io.read_json("notes.json")


def test_an_os_error_without_a_file_name_gets_the_output_being_written():
    with pytest.raises(OSError) as caught, io.naming("metrics/ingest.json"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert caught.value.filename == "metrics/ingest.json"


def test_the_garbage_collector_comes_back_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError), io.gc_paused():
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()


def test_progress_is_a_bar_with_counts_that_passes_every_item_through(monkeypatch, capsys):
    monkeypatch.delenv("FACTORY_NO_PROGRESS", raising=False)
    with io.progress(iter("abc"), total=3, desc="rows", unit="row") as bar:
        assert isinstance(bar, Progress) and list(bar) == ["a", "b", "c"]
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("rows: 100%|") and "| 3/3 row [" in last
    monkeypatch.setenv("FACTORY_NO_PROGRESS", "1")  # what the tests and quiet runs set
    with io.progress(iter("abc"), total=3, desc="rows") as bar:
        assert list(bar) == ["a", "b", "c"]
    assert capsys.readouterr().err == ""
