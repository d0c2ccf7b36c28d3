"""Stage validate-labels: backtraced relevance labels vs the corpora's gold supporting facts.

Reads every round of every chain that exists (data/trajectories/<V>/seed_<S>/round_<R>.parquet with
its labels; empty files — skipped rounds — are left out and listed), scores S_q and the controls
(factory.relevance.check) and writes metrics/relevance.json, reports/relevance.md, reports/relevance.png and
reports/causal_effects.png (factory.relevance.figures), and reports/audit.html, the page to audit a seeded
sample of correct trajectories by eye (factory.relevance.audit).
The rounds' counterfactual rows (data/counterfactual/..., where present) add the causal check: verdicts,
accuracy per condition, effects, and S_q's relevance split by parametric answers
(factory.relevance.causal_report; ``causal`` in the JSON, its own section in the report).
With ``grounding.judge: llm`` the entailment judge (factory.relevance.entailment) checks every lexically
grounded triplet of the correct trajectories first; its verdicts go to data/relevance/entailment.parquet
(empty with the lexical judge) and gold relevance is then reported both ways.
With no trajectories at all it writes the files saying so.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from factory import paths
from factory.config import Params
from factory.io import outputs_together, write_json, write_text
from factory.relevance.audit import render_audit
from factory.relevance.causal_report import causal_check, render_causal_section
from factory.relevance.check import Source, check_relevance
from factory.relevance.entailment import judge_sources
from factory.relevance.entailment_report import entailment_result, render_entailment_markdown
from factory.relevance.figures import write_figures
from factory.relevance.report import render_markdown
from factory.retrieval.store import PassageStore
from schemas import TRAJECTORY, columns_except, read_rows, require, write_parquet

SCORED_COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])

COMMAND = "validate-labels"
HELP = (
    "check backtraced relevance labels against gold supporting facts (P/R/F1 with bootstrap CIs vs controls)"
)
log = logging.getLogger(__name__)
_ROUND_FILE = re.compile(r"^round_(\d+)\.parquet$")
_SEED_DIR = re.compile(r"^seed_(\d+)$")


def discover_rounds(root: Path = Path("data/trajectories")) -> list[tuple[str, int, int]]:
    """(variant, protocol seed, round) of every trajectory file, in a stable order."""
    found = []
    for path in root.glob("*/seed_*/round_*.parquet"):
        m_round, m_seed = _ROUND_FILE.match(path.name), _SEED_DIR.match(path.parent.name)
        if m_round and m_seed:
            found.append((path.parent.parent.name, int(m_seed.group(1)), int(m_round.group(1))))
    return sorted(found)


def read_scored(path: Path) -> list[dict]:
    """A round's trajectories in file order: the correct ones (the ones scored) without their prompts,
    the others as their id, question and ``correct`` only (they are counted, not read)."""
    outcomes = read_rows(path, columns=["trajectory_id", "question_id", "correct"])
    correct = [t["trajectory_id"] for t in outcomes if t["correct"]]
    full = {t["trajectory_id"]: t for t in read_rows(path, SCORED_COLUMNS, where={"trajectory_id": correct})}
    return [full.get(t["trajectory_id"], t) for t in outcomes]


@outputs_together()
def run(params: Params) -> dict:
    sources: list[Source] = []
    left_out: list[dict] = []
    counterfactual_rows: dict[str, list[dict]] = {}
    for variant, seed, round_ in discover_rounds():
        name = f"{variant}/seed_{seed}/round_{round_}"
        trajectories = read_scored(paths.trajectories(variant, round_, seed))
        if not trajectories:
            left_out.append({"source": name, "reason": "empty trajectory file (skipped round)"})
            continue
        labels_path = paths.labels(variant, round_, seed)
        if not labels_path.exists():
            left_out.append(
                {
                    "source": name,
                    "reason": f"{labels_path} is missing (run `factory backtrace`)",
                    "trajectories": len(trajectories),
                }
            )
            continue
        correct = [t["trajectory_id"] for t in trajectories if t["correct"]]
        combos = {(r["mode"], r["target_mode"]) for r in read_rows(labels_path, ["mode", "target_mode"])}
        labels = read_rows(labels_path, where={"trajectory_id": correct})
        sources.append(Source(name, trajectories, labels, combos))
        if paths.counterfactual(variant, round_, seed).exists():
            counterfactual_rows[name] = read_rows(paths.counterfactual(variant, round_, seed))

    questions_by_id, passages_by_pid = {}, {}
    if sources:
        require(paths.QUESTIONS, "run `factory ingest` first")
        require(paths.INDEX_DIR, "run `factory index` first")
        wanted = sorted({t["question_id"] for s in sources for t in s.trajectories if t["correct"]})
        questions_by_id = {
            q["question_id"]: q
            for q in read_rows(paths.QUESTIONS, ["question_id", "supporting"], where={"question_id": wanted})
        }
        scored = [t for s in sources for t in s.trajectories if t["correct"]]
        pids = {p for t in scored for st in t["steps"] for p in st["retrieved"]}
        pids |= {x["source_pid"] for t in scored for x in t["triplets"] if x["source_pid"]}
        passages_by_pid = PassageStore.open(paths.INDEX_DIR).get_many(sorted(pids))

    judged, verdicts, entailment = judge_sources(sources, questions_by_id, passages_by_pid, params)
    write_parquet(judged, paths.ENTAILMENT, "entailment")
    r = params.relevance
    result = check_relevance(
        sources,
        questions_by_id,
        passages_by_pid,
        r,
        default_combo=(params.backtrace.mode, params.backtrace.target_mode),
        threshold=params.agent.grounding_threshold,
        entailment=verdicts,
    )
    result["left_out_sources"] = left_out
    cp = params.counterfactual
    result["causal"] = causal_check(
        sources,
        counterfactual_rows,
        questions_by_id,
        passages_by_pid,
        default_combo=(params.backtrace.mode, params.backtrace.target_mode),
        threshold=params.agent.grounding_threshold,
        bootstrap_samples=r.bootstrap_samples,
        seed=r.seed,
        margin=cp.margin,
        min_trajectories=cp.min_trajectories,
    )
    result["entailment"] = entailment_result(result, entailment)
    write_json(paths.METRICS / "relevance.json", result)
    report = render_markdown(result) + render_entailment_markdown(result)
    report += "\n" + render_causal_section(result["causal"])
    write_text(paths.REPORTS / "relevance.md", report)
    write_figures(result, paths.REPORTS)
    write_text(
        paths.REPORTS / "audit.html",
        render_audit(
            sources,
            counterfactual_rows,
            questions_by_id,
            passages_by_pid,
            default_combo=(params.backtrace.mode, params.backtrace.target_mode),
            per_dataset=params.report.audit_trajectories,
            seed=params.report.audit_seed,
            threshold=params.agent.grounding_threshold,
        ),
    )
    if result["status"] != "ok":
        log.warning(
            "validate-labels: %s (%d sources, %d left out); wrote %s",
            result["status"],
            len(sources),
            len(left_out),
            paths.REPORTS / "relevance.md",
        )
    for verdict in result["verdicts"].values():
        log.info("%s", verdict["line"])
    for verdict in result["causal"].get("verdicts", {}).values():
        log.info("causal check: %s", verdict["line"])
    return result
