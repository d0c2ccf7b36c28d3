"""Checkpoints of long generations that survive being killed at any moment: shards and journals.

Work units (questions) are cut into fixed shards. Each finished shard is written atomically as
``<folder>/shard_<k>.parquet`` next to a manifest holding the plan (the shards' unit ids) and a
fingerprint of everything that decides their content (params, model identity, seeds). A re-run
with the same plan skips the shards already on disk; a different plan discards them. The final
file is always assembled from the shard files in shard order, so an interrupted-and-resumed run
and an uninterrupted one write the same bytes. The shard folder is removed once the final file
is published (with the stage's other outputs, ``factory.utils.io.outputs_together``); the checkpoints
themselves are written at once (``factory.utils.io.immediate``), whatever the stage does after.

``Journal`` is the checkpoint of the continuous scheduler: records are appended as they finish, in
any order, and the final file is assembled in plan order from them. Either way the final file is
written a row group at a time: memory follows a shard or a row group, not the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pyarrow.parquet as pq

from factory.utils.io import after_publishing, immediate, progress, read_json, remove, write_json
from schemas import ARTIFACTS, ROW_GROUP_SIZE, ParquetStream, write_parquet, write_parquet_batches

log = logging.getLogger(__name__)
# Journal lines: JSON written and read by msgspec (several times json's speed; the same values back)
_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode


def shard_folder(final_path: str | Path) -> Path:
    """``data/x/round_0.parquet`` -> ``data/x/.round_0.shards/``."""
    final_path = Path(final_path)
    return final_path.with_name(f".{final_path.stem}.shards")


def fingerprint(data: Any) -> str:
    """A stable hash of plain data (sorted keys)."""
    return hashlib.blake2b(json.dumps(data, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


def run_in_shards(
    units: Sequence[dict],
    unit_id: Callable[[dict], str],
    shard_size: int,
    final_path: str | Path,
    plan_fingerprint: str,
    work: Callable[[list[dict], Callable[[int], None]], list[dict]],
    *,
    artifact: str = "trajectory",
    desc: str = "",
    ticks_per_unit: int = 1,
    on_shard: Callable[[int], None] | None = None,
    engine: Any = None,
    counts: dict[str, int] | None = None,
) -> int:
    """Run ``work(shard_units, tick)`` over the shards not yet on disk, on ``engine`` (default: this
    process, shard after shard; ``factory.execution.engine``), checkpointing each shard as it
    returns; write the final file from the shard files (streamed, in shard order) and return its
    row count.

    ``work`` returns the shard's records (validated against ``artifact``) and may call ``tick(n)``
    to advance the progress bar (``ticks_per_unit`` per unit; a remote engine ticks a shard's units
    when it returns). ``on_shard(k)`` runs after shard k is safely on disk (tests use it to
    simulate a crash). A work may return ``(records, shard_counts)``: the counts (e.g. calls sent)
    are added into ``counts`` as each shard returns.
    """
    if engine is None:
        from factory.execution.engine import LocalEngine

        engine = LocalEngine()
    final_path = Path(final_path)
    folder = shard_folder(final_path)
    shards = [list(units[i : i + shard_size]) for i in range(0, len(units), shard_size)]
    plan = {
        "fingerprint": plan_fingerprint,
        "artifact": artifact,
        "shards": [[unit_id(u) for u in s] for s in shards],
    }
    manifest = folder / "manifest.json"
    if folder.exists():
        old = read_json(manifest) if manifest.exists() else None
        if old != plan:
            reason = "no manifest" if old is None else "parameters, model or questions changed"
            log.warning("discarding the checkpoint in %s (%s); starting over", folder, reason)
            shutil.rmtree(folder)
    if not folder.exists():
        folder.mkdir(parents=True)
        with immediate():
            write_json(manifest, plan)
    paths = [folder / f"shard_{k:05d}.parquet" for k in range(len(shards))]
    done = [p.exists() for p in paths]
    if any(done):
        log.info("resuming from %s: %d of %d shards already done", folder, sum(done), len(shards))
    initial = sum(len(s) for s, d in zip(shards, done) if d) * ticks_per_unit
    todo = [(k, shard) for k, (shard, is_done) in enumerate(zip(shards, done)) if not is_done]
    with progress(total=len(units) * ticks_per_unit, desc=desc, unit="traj", initial=initial) as bar:
        for k, rows in engine.map(work, todo, bar):
            if isinstance(rows, tuple):
                rows, shard_counts = rows
                for name, n in shard_counts.items():
                    if counts is not None:
                        counts[name] = counts.get(name, 0) + n
            with immediate():
                write_parquet(rows, paths[k], artifact)
            if engine.remote:
                bar.update(len(shards[k]) * ticks_per_unit)
            if on_shard is not None:
                on_shard(k)
    schema = ARTIFACTS[artifact]
    rows = write_parquet_batches((pq.read_table(p, schema=schema) for p in paths), final_path, artifact)
    after_publishing(remove, folder)
    return rows


# ---------------------------------------------------------------- a journal of finished records


class Journal:
    """Finished records appended one JSON line each, the moment they finish: the checkpoint of a run
    whose records finish in any order (the continuous scheduler).

    It lives in the same folder as the shards (``shard_folder(final_path)``), with a manifest of the
    plan (fingerprint + unit ids): a re-run with the same plan reads the records back, a different
    plan discards them. A line is written with one ``write`` call, so a killed process leaves at
    most one torn last line, which is dropped (and cut off the file) when the journal is opened
    again. Records stay on disk: the journal keeps each one's place in the file (``key(record)`` ->
    offset and length, and what ``keep`` keeps of it), and ``finish`` writes the final file in the
    caller's plan order a row group at a time, reading the lines back, then removes the folder.
    Records go through JSON and back unchanged (plain str/int/float/bool/None, lists and dicts), so
    the final file has the same bytes however many times the run was resumed.
    """

    NAME = "journal.jsonl"

    def __init__(
        self,
        final_path: str | Path,
        plan_fingerprint: str,
        unit_ids: Sequence[str],
        key: Callable[[dict], Any],
        keep: Callable[[dict], Any] = lambda record: record,
        artifact: str = "trajectory",
    ):
        self.final_path = Path(final_path)
        self.folder = shard_folder(self.final_path)
        self.artifact, self.key, self.keep = artifact, key, keep
        plan = {
            "fingerprint": plan_fingerprint,
            "artifact": artifact,
            "mode": "journal",
            "units": list(unit_ids),
        }
        manifest = self.folder / "manifest.json"
        if self.folder.exists():
            old = read_json(manifest) if manifest.exists() else None
            if old != plan:
                reason = "no manifest" if old is None else "parameters, model, questions or scheduler changed"
                log.warning("discarding the checkpoint in %s (%s); starting over", self.folder, reason)
                shutil.rmtree(self.folder)
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            with immediate():
                write_json(manifest, plan)
        self.path = self.folder / self.NAME
        self.places: dict[Any, tuple[int, int]] = {}  # key -> (offset, length) of its line
        self.kept: dict[Any, Any] = {}  # key -> keep(record) of the records read back
        self._size = self._read()
        if self.kept:
            log.info("resuming from %s: %d records already done", self.path, len(self.kept))
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)

    def _read(self) -> int:
        """Index the journal's whole lines (``keep`` of each goes to ``kept``); returns the size kept."""
        if not self.path.exists():
            return 0
        good = 0
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # torn by a kill mid-write
                try:
                    record = _DECODE(line)
                except msgspec.DecodeError:
                    break
                key = self.key(record)
                self.places[key] = (good, len(line))
                self.kept[key] = self.keep(record)
                good += len(line)
        size = self.path.stat().st_size
        if good < size:
            log.warning("%s: dropping a torn last record (%d bytes)", self.path, size - good)
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
        return good

    def append(self, record: dict) -> None:
        line = _ENCODE(record) + b"\n"
        written = os.write(self._fd, line)
        if written != len(line):  # a short write on a regular file: a full disk
            raise OSError(f"{self.path}: wrote {written} of {len(line)} bytes (disk full?)")
        self.places[self.key(record)] = (self._size, len(line))
        self._size += len(line)

    def record(self, key: Any) -> dict:
        offset, length = self.places[key]
        return _DECODE(os.pread(self._fd, length, offset))

    def finish(self, ordered: Sequence[Any]) -> int:
        """Write the final file with the records of ``ordered`` keys (the caller's plan order),
        streamed; remove the checkpoint; returns the row count."""
        with ParquetStream(self.final_path, self.artifact) as out:
            for start in range(0, len(ordered), ROW_GROUP_SIZE):
                out.write_rows([self.record(k) for k in ordered[start : start + ROW_GROUP_SIZE]])
        self.close()
        after_publishing(remove, self.folder)
        return out.rows

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
