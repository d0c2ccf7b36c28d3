"""Stage ingest: official corpus files -> questions.parquet, passages.parquet, quarantine.jsonl."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

from factory import paths
from factory.config import Params
from factory.corpora import ingest_sources
from factory.io import gc_paused, progress, write_json, write_jsonl
from schemas import write_parquet, write_parquet_batches

COMMAND = "ingest"
HELP = "read the corpora (official formats or HF datasets), quarantine bad records, assign splits"
log = logging.getLogger(__name__)


def run(params: Params) -> None:
    from validators import BackgroundGate
    from validators.ingest import EXPECTATIONS, ingest_frames

    # Questions are written while the gate runs, to a staging file that only a passed gate publishes.
    staged = paths.QUESTIONS.with_name(f".{paths.QUESTIONS.name}.gated")
    with (
        BackgroundGate() as gate,
        gc_paused(),
    ):  # the gate imports Great Expectations in a child while we parse
        with progress(desc="ingest", unit="rec") as bar:
            result = ingest_sources(params, progress=bar.update)
        passages, quarantine, counts = result.passage_table, result.quarantine, result.counts
        try:
            # Arrow takes and parquet encoding release the GIL: the table is written in a thread
            # while this one computes the gate's frames and the child validates them.
            with ThreadPoolExecutor(max_workers=1) as background:
                written = background.submit(
                    write_parquet_batches, result.question_batches(), staged, "question"
                )
                gate.submit(
                    "ingest",
                    EXPECTATIONS,
                    ingest_frames(result.rows, result.pool, passages),
                    docs_dir=paths.GX_DOCS,
                )
                written.result()
            del result  # its many small objects go while the collector is paused, not in a full collection
            checked = gate.result()  # a failed expectation stops the stage before anything is published
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
    os.replace(staged, paths.QUESTIONS)
    write_parquet(passages, paths.PASSAGES, "passage")
    write_jsonl(paths.QUARANTINE, quarantine)
    write_json(paths.METRICS / "ingest.json", {**counts, "expectations_passed": checked.evaluated})
    t = counts["total"]
    log.info(
        "ingest: read %d, ingested %d, quarantined %d (%s), %d passages",
        t["read"],
        t["ingested"],
        t["quarantined"],
        paths.QUARANTINE,
        t["passages"],
    )
