"""Stage decontaminate: every training-pool question (train and held-out) checked against every
evaluation set; a contaminated one never reaches generation.

Inputs: the ingested questions (the pool, and the run's official dev questions as evaluation sets) and
the files of ``decontamination.eval_sets``. Outputs, published together: ``contamination.jsonl`` (one
row per flagged pool question: question_id, source_id, dataset, eval_set, eval_id, rule, score),
``eval_questions.parquet`` (every evaluation question, for publish's last gate) and
``metrics/decontamination.json`` (the evaluation files with their sha256, the rules and thresholds,
counts per dataset x evaluation set x rule; per dataset checked = clean + contaminated). The rules and
the index are ``factory.decontamination``.
"""

from __future__ import annotations

import logging

from factory.decontamination.run import decontaminate
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import outputs_together, write_json

COMMAND = "decontaminate"
HELP = (
    "check every training-pool question against every evaluation set (the run's official dev files and "
    "decontamination.eval_sets): exact, near-duplicate, same reasoning chain"
)
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    from schemas import require

    require(paths.QUESTIONS, "run `factory ingest` first")
    metrics = decontaminate(params, paths.QUESTIONS, paths.CONTAMINATION, paths.EVAL_QUESTIONS)
    write_json(paths.METRICS / "decontamination.json", metrics)
    t = metrics["total"]
    log.info(
        "decontaminate: %d training-pool questions checked against %d evaluation questions in %d sets: "
        "%d contaminated (%s), %d clean -> %s",
        t["checked"],
        t["eval_questions"],
        len(metrics["eval_sets"]),
        t["contaminated"],
        ", ".join(f"{rule} {n}" for rule, n in t["by_rule"].items()),
        t["clean"],
        paths.CONTAMINATION,
    )
    return metrics
