"""Stage calibrate-labels: the labeller scored on graphs a real LLM extracted from real passages.

Reads the files of ``calibration.graphs`` (``factory.calibration.graphs``), labels each question's
graph as the backtrace stage would (S_q of every mode, the gold answer as target) beside the KnowTrace
authors' rule and the controls, scores them against the gold supporting paragraphs with bootstrap CIs
and paired differences (``factory.calibration.calibrate``), and writes metrics/calibration.json and
data/calibration/questions.jsonl (one row per question, for the audit page's real-graph cards). The
relevance report opens with it. Without any of the files it writes the empty result and says so.
"""

from __future__ import annotations

import logging

from factory.backtrace.options import load_embedder
from factory.calibration.calibrate import calibrate
from factory.calibration.graphs import read_graph_files, require_graphs
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import outputs_together, write_json, write_jsonl

COMMAND = "calibrate-labels"
HELP = "score the labeller (S_q, the authors' rule, controls) on real LLM-made graphs against gold paragraphs"
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    graphs = read_graph_files(params.calibration.graphs)
    require_graphs(graphs)
    for problem in graphs.problems:
        log.warning(
            "calibrate-labels: %s %s (%s) left out: %s %s",
            problem["file"], problem["location"], problem["question_id"], problem["field"], problem["reason"],
        )  # fmt: skip
    embedder = load_embedder(params.backtrace)
    result, rows = calibrate(graphs, params.backtrace, params.relevance, embedder, params.calibration)
    write_json(paths.CALIBRATION, result)
    write_jsonl(paths.CALIBRATION_QUESTIONS, rows)
    if result["status"] == "no_graphs":
        log.warning(
            "calibrate-labels: no calibration graph was found (%s), so the labeller is not calibrated on "
            "real graphs in this run; an empty result is written.",
            ", ".join(graphs.missing) or "calibration.graphs is empty",
        )
    else:
        for verdict in result["verdicts"].values():
            log.info("calibrate-labels: %s", verdict["line"])
        log.info("calibrate-labels: %d questions -> %s", result["records"], paths.CALIBRATION)
    return result
