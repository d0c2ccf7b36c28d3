"""Stage index: BM25 (and optionally dense) index over the passages; recall@N of gold paragraphs."""

from __future__ import annotations

import logging
import shutil

from factory import paths
from factory.config import Params
from factory.io import write_json
from factory.retrieval.bm25 import BM25Retriever
from factory.retrieval.evaluate import supporting_recall
from schemas import read_rows

COMMAND = "index"
HELP = "build the passage index (bm25s; dense/hybrid optional) and report recall@N of gold paragraphs"
log = logging.getLogger(__name__)


def run(params: Params) -> None:
    from factory.retrieval import load_retriever

    passages = read_rows(paths.PASSAGES)
    questions = read_rows(
        paths.QUESTIONS, columns=["question_id", "dataset", "question", "passages", "supporting"]
    )
    shutil.rmtree(paths.INDEX_DIR, ignore_errors=True)
    BM25Retriever.build(passages, params.index.k1, params.index.b).save(paths.INDEX_DIR)
    if params.index.retriever in ("dense", "hybrid"):
        from factory.retrieval.dense import DenseRetriever

        log.info("encoding %d passages with %s", len(passages), params.index.dense_model)
        DenseRetriever.build(passages, params.index.dense_model).save(paths.INDEX_DIR)
    retriever = load_retriever(paths.INDEX_DIR, passages, params)
    report = {
        "retriever": params.index.retriever,
        "scope": params.index.scope,
        "recall": {
            scope: supporting_recall(retriever, questions, params.index.recall_at, scope)
            for scope in ("question", "pooled")
        },
    }
    write_json(paths.METRICS / "retrieval.json", report)
    r = report["recall"][params.index.scope]["all"]
    log.info(
        "index: %d passages; recall (%s scope): %s",
        len(passages),
        params.index.scope,
        {k: round(v, 3) for k, v in r.items() if k != "questions"},
    )
