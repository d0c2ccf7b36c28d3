"""Stage ingest: official corpus files -> questions.parquet, passages.parquet, quarantine.jsonl."""

from __future__ import annotations

import logging

from factory import paths
from factory.config import Params
from factory.corpora import ingest_sources
from factory.corpora.table import questions_table
from factory.io import gc_paused, progress, write_json, write_jsonl
from schemas import PASSAGE, to_table, write_parquet

COMMAND = "ingest"
HELP = "read the corpora (official formats or HF datasets), quarantine bad records, assign splits"
log = logging.getLogger(__name__)


def run(params: Params) -> None:
    from validators import run_suites
    from validators.ingest import ingest_specs

    with gc_paused():
        with progress(desc="ingest", unit="rec") as bar:
            result = ingest_sources(params, progress=bar.update)
        passages = to_table(result.passages, PASSAGE, "passage")
        questions = questions_table(result.questions, passages)
        specs = ingest_specs(result.questions, result.passages)
    gate = run_suites("ingest", specs, docs_dir=paths.REPORTS / "gx")
    write_parquet(questions, paths.QUESTIONS, "question")
    write_parquet(passages, paths.PASSAGES, "passage")
    write_jsonl(paths.QUARANTINE, result.quarantine)
    write_json(paths.METRICS / "ingest.json", {**result.counts, "expectations_passed": gate.evaluated})
    t = result.counts["total"]
    log.info(
        "ingest: read %d, ingested %d, quarantined %d (%s), %d passages",
        t["read"], t["ingested"], t["quarantined"], paths.QUARANTINE, t["passages"],
    )
