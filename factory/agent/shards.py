"""Checkpointed shards: a long generation that survives being killed at any moment.

Work units (questions) are cut into fixed shards. Each finished shard is written atomically as
``<folder>/shard_<k>.parquet`` next to a manifest holding the plan (the shards' unit ids) and a
fingerprint of everything that decides their content (params, model identity, seeds). A re-run
with the same plan skips the shards already on disk; a different plan discards them. The final
file is always assembled from the shard files in shard order, so an interrupted-and-resumed run
and an uninterrupted one write the same bytes. The shard folder is removed once the final file
is in place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from factory.io import progress, read_json, write_json
from schemas import ARTIFACTS, write_parquet

log = logging.getLogger(__name__)


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
    total_ticks: int | None = None,
    ticks_per_unit: int = 1,
    on_shard: Callable[[int], None] | None = None,
) -> pa.Table:
    """Run ``work(shard_units, tick)`` shard by shard with a checkpoint; return the final table.

    ``work`` returns the shard's records (validated against ``artifact``) and may call ``tick(n)``
    to advance the progress bar (total ``total_ticks``, default one per unit). ``on_shard(k)`` runs
    after shard k is safely on disk (tests use it to simulate a crash).
    """
    final_path = Path(final_path)
    folder = shard_folder(final_path)
    shards = [list(units[i: i + shard_size]) for i in range(0, len(units), shard_size)]
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
        write_json(manifest, plan)
    paths = [folder / f"shard_{k:05d}.parquet" for k in range(len(shards))]
    done = [p.exists() for p in paths]
    if any(done):
        log.info("resuming from %s: %d of %d shards already done", folder, sum(done), len(shards))
    total = total_ticks if total_ticks is not None else len(units) * ticks_per_unit
    initial = sum(len(s) for s, d in zip(shards, done) if d) * ticks_per_unit
    with progress(total=total, desc=desc, unit="traj", initial=initial) as bar:
        for k, (shard, path, is_done) in enumerate(zip(shards, paths, done)):
            if is_done:
                continue
            rows = work(shard, bar.update)
            write_parquet(rows, path, artifact)
            if on_shard is not None:
                on_shard(k)
    schema = ARTIFACTS[artifact]
    tables = [pq.read_table(p, schema=schema) for p in paths]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    table = write_parquet(table.combine_chunks(), final_path, artifact)
    shutil.rmtree(folder)
    return table
