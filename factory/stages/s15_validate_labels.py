"""Stage validate-labels: backtraced relevance labels vs the corpora's gold supporting facts.

Reads every round of every chain that exists (data/trajectories/<V>/seed_<S>/round_<R>.parquet with
its labels; empty files — skipped rounds — are left out and listed: factory.relevance.sources), scores
S_q and the controls (factory.relevance.check) and writes metrics/relevance.json, reports/relevance.md,
reports/relevance.png and reports/causal_effects.png (factory.relevance.figures), and reports/audit.html,
the page to audit a seeded sample of correct trajectories by eye (factory.relevance.audit).
The report opens with the labeller on real LLM-made graphs (metrics/calibration.json, from
calibrate-labels; factory.calibration.report) and the audit page with real-graph cards of a seeded
sample of its questions. The rounds' counterfactual rows (data/counterfactual/..., where present) add
the causal check: verdicts, accuracy per condition, effects, and S_q's relevance split by parametric
answers (factory.causal.report; ``causal`` in the JSON, its own section in the report).
With ``grounding.judge: llm`` the entailment judge (factory.relevance.entailment) checks every lexically
grounded triplet of the correct trajectories first; its verdicts go to data/relevance/entailment.parquet
(empty with the lexical judge) and gold relevance is then reported both ways.
With no trajectories at all it writes the files saying so.
"""

from __future__ import annotations

import logging

from factory.calibration.cards import run_cards
from factory.calibration.report import render_calibration
from factory.causal.report import causal_check, render_causal_section
from factory.params.config import Params
from factory.relevance.audit import render_audit
from factory.relevance.check import check_relevance
from factory.relevance.entailment import judge_sources
from factory.relevance.entailment_report import entailment_result, render_entailment_markdown
from factory.relevance.figures import write_figures
from factory.relevance.report import log_verdicts, render_markdown
from factory.relevance.sources import read_gold, read_rounds
from factory.utils import paths
from factory.utils.io import outputs_together, read_json, write_json, write_text
from schemas import write_parquet

COMMAND = "validate-labels"
HELP = (
    "check backtraced relevance labels against gold supporting facts (P/R/F1 with bootstrap CIs vs controls)"
)
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    found = read_rounds()
    sources, counterfactual_rows = found.sources, found.counterfactual_rows
    questions_by_id, passages_by_pid = read_gold(sources)
    judged, verdicts, entailment = judge_sources(sources, questions_by_id, passages_by_pid, params)
    write_parquet(judged, paths.ENTAILMENT, "entailment")
    r, cp, threshold = params.relevance, params.counterfactual, params.agent.grounding_threshold
    default_combo = (params.backtrace.mode, params.backtrace.target_mode)
    result = check_relevance(
        sources,
        questions_by_id,
        passages_by_pid,
        r,
        default_combo=default_combo,
        threshold=threshold,
        entailment=verdicts,
    )
    result["left_out_sources"] = found.left_out
    result["causal"] = causal_check(
        sources,
        counterfactual_rows,
        questions_by_id,
        passages_by_pid,
        relevance=r,
        counterfactual=cp,
        default_combo=default_combo,
        threshold=threshold,
    )
    result["entailment"] = entailment_result(result, entailment)
    write_json(paths.METRICS / "relevance.json", result)
    calibration = read_json(paths.CALIBRATION) if paths.CALIBRATION.exists() else None
    report = render_markdown(result, render_calibration(calibration)) + render_entailment_markdown(result)
    write_text(paths.REPORTS / "relevance.md", report + "\n" + render_causal_section(result["causal"]))
    write_figures(result, paths.REPORTS)
    write_text(
        paths.REPORTS / "audit.html",
        render_audit(
            sources,
            counterfactual_rows,
            questions_by_id,
            passages_by_pid,
            params.report,
            default_combo=default_combo,
            threshold=threshold,
            cards=run_cards(params.calibration, params.report, params.backtrace.mode),
        ),
    )
    log_verdicts(result, len(sources), len(found.left_out), paths.REPORTS / "relevance.md")
    return result
