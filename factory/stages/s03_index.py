"""Stage index: the passage store, BM25 (and optionally dense) over the passages; recall@N of gold
paragraphs on a seeded sample of questions (``index.recall_questions`` per dataset and scope)."""

from __future__ import annotations

import logging

from factory.params.config import Params
from factory.retrieval.build import build_index
from factory.retrieval.evaluate import recall_sample, supporting_recall
from factory.utils import paths
from factory.utils.io import outputs_together, pending, progress, write_json
from schemas import num_rows, require

COMMAND = "index"
HELP = "build the passage store and index (bm25s; dense/hybrid optional); recall@N of gold paragraphs"
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> None:
    from factory.retrieval import load_retriever

    for path in (paths.PASSAGES, paths.QUESTIONS):
        require(path, "run `factory ingest` first")
    with progress(total=num_rows(paths.PASSAGES), desc="index", unit="passage") as bar:
        counts = build_index(paths.PASSAGES, paths.INDEX_DIR, params, progress=bar.update)
    retriever = load_retriever(pending(paths.INDEX_DIR), params)  # published with the recall metrics
    i = params.index
    questions, sampled = recall_sample(paths.QUESTIONS, i.recall_questions, i.recall_seed)
    report = {
        "retriever": i.retriever,
        "scope": i.scope,
        "passages": counts,
        "recall_sample": {"per_dataset": i.recall_questions, "seed": i.recall_seed, "questions": sampled},
        "recall": {
            scope: supporting_recall(retriever, questions, i.recall_at, scope)
            for scope in ("question", "pooled")
        },
    }
    write_json(paths.METRICS / "retrieval.json", report)
    r = report["recall"][i.scope]["all"]
    log.info(
        "index: %d passages; recall (%s scope, %d questions): %s",
        sum(counts.values()),
        i.scope,
        r["questions"],
        {k: round(v, 3) for k, v in r.items() if k != "questions"},
    )
