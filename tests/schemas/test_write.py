"""Streaming writers: the same bytes whatever the batch sizes, and a writer killed with SIGKILL at any
moment leaves the old output or none, never a partial file under the artifact's name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from factory.utils.io import atomic_path, write_jsonl
from schemas import ParquetStream, read_rows, write_parquet
from tests.schemas.test_validate import label_row

ROOT = Path(__file__).resolve().parents[2]


def _rows(n: int, tag: str = "") -> list[dict]:
    return [label_row(trajectory_id=f"{tag}t{i}", kept_triplet_ids=[f"x{i}"] * (i % 5)) for i in range(n)]


def test_row_groups_do_not_depend_on_how_rows_arrive(tmp_path):
    rows = _rows(10_000)
    write_parquet(rows, tmp_path / "whole.parquet", "labels")
    with ParquetStream(tmp_path / "streamed.parquet", "labels") as out:
        for start, size in ((0, 1), (1, 4999), (5000, 17), (5017, 4983)):
            out.write_rows(rows[start : start + size])
    assert out.rows == 10_000
    assert (tmp_path / "streamed.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert [g.num_rows for g in _groups(tmp_path / "streamed.parquet")] == [4096, 4096, 1808]


def _groups(path):
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(i) for i in range(meta.num_row_groups)]


def test_an_empty_artifact_is_one_empty_row_group_however_it_is_written(tmp_path):
    # as pq.write_table writes an empty table: a skipped round's files keep the bytes they always had
    paths = [tmp_path / f"{k}.parquet" for k in range(3)]
    write_parquet([], paths[0], "labels")
    with ParquetStream(paths[1], "labels") as out:
        out.write_rows([])
    pq.write_table(pq.read_table(paths[0]).schema.empty_table(), paths[2])
    assert paths[0].read_bytes() == paths[1].read_bytes()
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        assert (meta.num_rows, meta.num_row_groups) == (0, 1)


def test_an_error_inside_the_block_leaves_the_old_file(tmp_path):
    out = tmp_path / "l.parquet"
    write_parquet(_rows(3, "old"), out, "labels")
    before = out.read_bytes()
    with pytest.raises(RuntimeError), ParquetStream(out, "labels") as stream:
        stream.write_rows(_rows(5000))
        raise RuntimeError("the stage failed")
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["l.parquet"]


WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from factory.utils.io import atomic_path
    from schemas import ParquetStream
    from tests.schemas.test_write import _rows

    kind, out = sys.argv[1], Path(sys.argv[2])
    rows = _rows(20_000)
    if kind == "parquet":
        with ParquetStream(out, "labels") as stream:
            for start in range(0, len(rows), 1000):
                stream.write_rows(rows[start : start + 1000])
                print("batch", flush=True)
                time.sleep(0.05)
    elif kind == "jsonl":
        from factory.utils.io import write_jsonl

        def slow():
            for i, row in enumerate(rows):
                if i % 1000 == 0:
                    print("batch", flush=True)
                    time.sleep(0.05)
                yield row

        write_jsonl(out, slow())
    else:  # a folder written file by file (the index stage's way)
        with atomic_path(out) as tmp:
            tmp.mkdir()
            for i in range(20):
                (tmp / f"part_{{i}}.txt").write_text("x" * 10_000)
                print("batch", flush=True)
                time.sleep(0.05)
    print("done", flush=True)
    """
)


def _run_writer(kind: str, out: Path, kill_after: int | None) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=str(ROOT)), kind, str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen = 0
    for line in proc.stdout:
        seen += line.startswith("batch")
        if kill_after is not None and seen == kill_after:
            os.kill(proc.pid, signal.SIGKILL)  # mid-write: rows buffered, row groups on disk, file open
            break
    proc.wait(timeout=60)
    if kill_after is None:
        assert proc.returncode == 0


def _content(path: Path):
    if path.is_dir():
        return sorted((p.name, p.read_bytes()) for p in path.iterdir())
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "folder"])
def test_a_writer_killed_mid_write_leaves_the_old_output_or_none(tmp_path, kind):
    name = {"parquet": "out.parquet", "jsonl": "out.jsonl", "folder": "out"}[kind]
    reference = tmp_path / "reference" / name
    reference.parent.mkdir()
    _run_writer(kind, reference, None)

    fresh = tmp_path / "fresh" / name
    fresh.parent.mkdir()
    _run_writer(kind, fresh, kill_after=5)
    assert not fresh.exists()  # no partial output under the real name
    leftovers = [p.name for p in fresh.parent.iterdir()]
    assert leftovers and all(p.startswith(f".{name}.tmp-") for p in leftovers)

    old = tmp_path / "old" / name
    old.parent.mkdir()
    if kind == "folder":
        with atomic_path(old) as tmp:
            tmp.mkdir()
            (tmp / "old.txt").write_text("old")
    elif kind == "jsonl":
        write_jsonl(old, [{"old": True}])
    else:
        write_parquet(_rows(2, "old"), old, "labels")
    before = _content(old)
    _run_writer(kind, old, kill_after=5)
    assert _content(old) == before  # the old output, whole

    _run_writer(kind, fresh, None)  # the re-run: same bytes, the killed run's temporary cleared away
    assert _content(fresh) == _content(reference)
    assert [p.name for p in fresh.parent.iterdir()] == [name]
    if kind == "parquet":
        assert len(read_rows(fresh)) == 20_000


def test_killed_at_any_moment_the_file_is_absent_or_whole(tmp_path):
    """Killed at random moments, including around the rename that publishes it, the file is never
    partial: it is absent or complete."""
    out = tmp_path / "out.parquet"
    for delay in (0.05, 0.2, 0.4, 0.7, 1.0, 1.3):
        out.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER.format(root=str(ROOT)), "parquet", str(out)],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if out.exists():
            assert len(read_rows(out)) == 20_000
