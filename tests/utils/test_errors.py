"""An operating-system error reaches the user as one paragraph: the path, what happened, what to do."""

from __future__ import annotations

import errno
import os

import pytest

from factory.utils.errors import BadRecord, os_error_message


def _raised(action) -> OSError:
    with pytest.raises(OSError) as caught:
        action()
    return caught.value


def test_real_os_errors_name_the_path_and_what_to_do(tmp_path):
    missing, folder, a_file = tmp_path / "nope.json", tmp_path / "folder", tmp_path / "a_file"
    folder.mkdir()
    a_file.write_text("x")
    said = {
        "missing": os_error_message(_raised(lambda: missing.read_text())),
        "folder": os_error_message(_raised(lambda: folder.write_text("x"))),
        "under a file": os_error_message(_raised(lambda: (a_file / "sub").mkdir())),
    }
    where = "relative paths start at the folder factory runs in"
    assert said["missing"] == f"{missing}: it does not exist: check the path ({where})"
    assert said["folder"].startswith(f"{folder}: it is a folder where a file is expected: move")
    assert said["under a file"].startswith(f"{a_file / 'sub'}: a part of the path is a file where a folder")
    assert all("\n" not in m and "Errno" not in m for m in said.values())


def test_a_full_disk_without_a_file_name_still_says_what_to_do():
    assert os_error_message(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))) == (
        "the disk is full: free space on it (or work on a larger disk) and re-run"
    )


def test_an_arrow_error_with_the_errno_in_its_text_is_read_from_the_text():
    exc = OSError(
        f"Failed to open local file '/out/x.parquet'. Detail: [errno {errno.EDQUOT}] Quota exceeded"
    )
    said = "/out/x.parquet: the disk quota is used up: free space (or raise the quota) and re-run"
    assert os_error_message(exc) == said


def test_an_outputs_temporary_is_named_by_the_output():
    exc = OSError(errno.EROFS, "Read-only file system", "metrics/eval/.round_1_heldout.json.tmp-4242")
    said = "metrics/eval/round_1_heldout.json: the file system is read-only: work in a writable folder"
    assert os_error_message(exc) == said


def test_an_error_without_advice_keeps_its_own_words():
    exc = OSError(errno.ECONNRESET, "Connection reset by peer", "socket.sock")
    assert os_error_message(exc) == "socket.sock: Connection reset by peer"


def test_a_bad_record_names_the_dataset_record_field_and_reason():
    bad = BadRecord("musique", "2hop__13_42", "answer", "is empty: give the answer text", "dev.jsonl:7")
    assert (
        str(bad)
        == "musique record '2hop__13_42' (dev.jsonl:7): field 'answer': is empty: give the answer text"
    )
    assert bad.as_dict() == {
        "dataset": "musique",
        "id": "2hop__13_42",
        "field": "answer",
        "reason": "is empty: give the answer text",
        "where": "dev.jsonl:7",
    }
    assert str(BadRecord("hotpotqa", "5a8b", "context", "not a list")) == (
        "hotpotqa record '5a8b': field 'context': not a list"
    )
