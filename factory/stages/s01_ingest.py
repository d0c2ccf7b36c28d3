"""Stage ingest: official corpus files -> questions.parquet, passages.parquet, quarantine.jsonl.

Streamed: the records are read and turned into rows a row group of questions at a time
(``factory.corpora.ingest.Ingest``), written as they come, and checked by the gate (Great Expectations, in a
child process that imports it meanwhile); the outputs, the metrics and the gate's data docs are
published together only once the gate has passed (``factory.utils.io.outputs_together``). A run killed or
failed at any point leaves the old outputs or none.
"""

from __future__ import annotations

import logging

import numpy as np

from factory.corpora.ingest import Ingest
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import atomic_path, gc_paused, jsonl_line, outputs_together, progress, write_json
from schemas import ParquetStream, iter_batches

COMMAND = "ingest"
HELP = "read the corpora (official formats or HF datasets), quarantine bad records, assign splits"
log = logging.getLogger(__name__)
# what the gate's failure message names: the file a frame checks and the columns naming its rows
SOURCES = {
    "questions": (str(paths.QUESTIONS), ("question_id", "source_file")),
    "passages": (str(paths.PASSAGES), ("pid",)),
}


@outputs_together()
def run(params: Params) -> None:
    from validators import BackgroundGate
    from validators.ingest import EXPECTATIONS, IngestChecks

    ingest, checks = Ingest(params), IngestChecks()
    with BackgroundGate() as gate, gc_paused():  # the gate imports Great Expectations while we parse
        with (
            progress(desc="ingest", unit="rec") as bar,
            ParquetStream(paths.QUESTIONS, "question") as questions,
            ParquetStream(paths.PASSAGES, "passage") as passages,
            atomic_path(paths.QUARANTINE) as quarantine_tmp,
            open(quarantine_tmp, "w", encoding="utf-8") as quarantine,
        ):
            ingest.progress = bar.update
            for chunk in ingest.chunks():
                questions.write_table(chunk.questions_table())
                passages.write_table(chunk.passages)
                quarantine.writelines(jsonl_line(entry) for entry in chunk.quarantine)
                checks.add(chunk.rows, chunk.pool, chunk.passages)
        frames = checks.frames(_known())
        del checks
        gate.submit("ingest", EXPECTATIONS, frames, docs_dir=paths.GX_DOCS, sources=SOURCES)
        checked = gate.result()  # a failed expectation stops the stage before anything is published
    counts = ingest.counts
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


def _known() -> np.ndarray:
    """``passages_known`` of every written question against the written passages table (both still
    waiting to be published: read from their temporaries)."""
    import pyarrow as pa

    from validators.ingest import passages_known

    table_pids = np.sort(
        np.array(
            [p.encode() for b in iter_batches(paths.PASSAGES, ["pid"]) for p in b.column("pid").to_pylist()],
            dtype=bytes,
        )
    )
    known = []
    for batch in iter_batches(paths.QUESTIONS, ["passages.list.element.pid"]):
        pools = batch.column("passages")
        pids = pa.ListArray.from_arrays(pools.offsets, pools.values.field("pid"))
        known.append(passages_known(pids, table_pids))
    return np.concatenate(known) if known else np.zeros(0, dtype=bool)
