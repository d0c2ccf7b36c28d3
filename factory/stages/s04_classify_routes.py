"""Stage classify-routes (optional): the DTKG few-shot route classifier against the gold routes."""

from __future__ import annotations

import logging

from factory.agent.routes import PROMPT_VERSION, classify_routes, route_metrics, sample_questions
from factory.llm.base import cache_use
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import outputs_together, write_json
from schemas import read_rows, require, write_parquet

COMMAND = "classify-routes"
HELP = (
    "ask the LLM whether sampled questions are parallel or chain (DTKG) and score it against the gold routes"
)
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> None:
    from factory.llm import make_llm

    require(paths.QUESTIONS, "run `factory ingest` first")
    questions = read_rows(paths.QUESTIONS, columns=["question_id", "dataset", "qtype", "route", "question"])
    sample = sample_questions(questions, params.routes.n_questions, params.routes.seed)
    llm = make_llm(params)
    try:
        rows = classify_routes(sample, llm, params.routes)
        identity, cache = llm.identity, cache_use(llm)
    finally:
        llm.close()
    write_parquet(rows, paths.ROUTES_PREDICTED, "route_predictions")
    report = {
        "status": "ok" if rows else "empty",
        "model": identity,
        "backend": params.llm.backend,
        "prompt_version": PROMPT_VERSION,
        "n_questions_per_dataset": params.routes.n_questions,
        "seed": params.routes.seed,
        **route_metrics(rows),
    }
    write_json(paths.METRICS / "routes.json", report)
    overall = report["overall"]
    log.info(
        "classify-routes: %d questions, accuracy %s, unknown %d, LLM errors %d (cache hits %d, misses %d)",
        overall["questions"],
        None if overall["accuracy"] is None else round(overall["accuracy"], 3),
        overall["unknown"],
        overall["llm_errors"],
        cache["hits"],
        cache["misses"],
    )
