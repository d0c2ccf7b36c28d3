"""Stage report: the bootstrapping report (reports/bootstrap.md), metrics/summary.json, metrics/headline.json
(the run's headline numbers, the only DVC metrics: what `dvc exp show` compares), plots and figures."""

from __future__ import annotations

import logging

from factory.bootstrap.headline import headline, write_plots
from factory.bootstrap.protocol import short_samples, test_protocol
from factory.bootstrap.report import build_summary, render_markdown
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import outputs_together, read_json, write_json, write_text

COMMAND = "report"
HELP = "write reports/bootstrap.md, metrics/summary.json and the EM / FA-ratio plots of every chain"
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    b = params.bootstrap
    summary = build_summary(b, train=params.train.model_dump(mode="json"))
    summary["test_protocol"] = test_protocol(
        summary, read_json(paths.METRICS / "ingest.json"), params.evaluate.n_questions, params.evaluate.seed
    )
    summary["short_samples"] = short_samples(b.variants, b.seeds, len(b.rounds))
    relevance_path = paths.METRICS / "relevance.json"
    relevance = read_json(relevance_path) if relevance_path.exists() else None
    summary["relevance_verdicts"] = {
        k: {kk: vv for kk, vv in v.items() if kk != "difference"}
        for k, v in ((relevance or {}).get("verdicts") or {}).items()
    }
    write_json(paths.METRICS / "summary.json", summary)
    calibration = read_json(paths.CALIBRATION) if paths.CALIBRATION.exists() else None
    write_json(paths.METRICS / "headline.json", headline(summary, relevance, calibration))
    write_text(paths.REPORTS / "bootstrap.md", render_markdown(summary, relevance, b.seeds, calibration))
    write_plots(summary, paths.PLOTS, paths.FIGURES)
    for verdict in summary["verdicts"].values():
        log.info("report: %s", verdict["line"])
    log.info("report: %s", paths.REPORTS / "bootstrap.md")
    return summary
