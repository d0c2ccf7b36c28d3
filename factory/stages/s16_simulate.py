"""Stage simulate: trajectories with known contributive triplets -> backtracing precision/recall vs noise."""

from __future__ import annotations

import logging
from collections import Counter

from factory.backtrace.options import load_embedder
from factory.params.config import Params
from factory.simulate.assemble import POLICY
from factory.simulate.facts import gold_facts
from factory.simulate.report import aggregate, score_rows, write_report
from factory.simulate.trajectories import sample_ids, simulate
from factory.utils import paths
from factory.utils.io import outputs_together, write_json, write_jsonl
from schemas import iter_rows, read_rows, require, write_parquet

COMMAND = "simulate"
HELP = (
    "simulate trajectories with known labels from gold facts, add noise, and measure backtracing "
    "precision/recall"
)
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    require(paths.QUESTIONS, "run `factory ingest` first")
    sp, bp = params.simulate, params.backtrace
    # Which questions have gold facts: the file streamed a row group at a time; then the chosen ones read.
    usable: dict[str, list[str]] = {}
    read = 0
    for q in iter_rows(paths.QUESTIONS):
        read += 1
        if gold_facts(q):
            usable.setdefault(q["dataset"], []).append(q["question_id"])
    chosen_ids = sample_ids(usable, sp.n_questions, sp.seed)
    by_id = {q["question_id"]: q for q in read_rows(paths.QUESTIONS, where={"question_id": chosen_ids})}
    chosen = [by_id[i] for i in chosen_ids]
    noise_levels = sorted({float(x) for x in sp.noise_levels})  # in [0, 1]: checked when params load
    sims = simulate(chosen, noise_levels, sp.seed, max_pairs=params.agent.max_pairs)
    trajectories = [s.trajectory for s in sims]
    assert all(t["policy"] == POLICY for t in trajectories)
    write_parquet(trajectories, paths.SIMULATED_DIR / "trajectories.parquet", "trajectory")
    write_jsonl(paths.SIMULATED_DIR / "truth.jsonl", [s.truth for s in sims])
    rows = score_rows(sims, bp, load_embedder(bp))
    metrics = {
        "status": "ok",
        "seed": sp.seed,
        "noise_levels": noise_levels,
        "modes": list(bp.modes),
        "target_modes": list(bp.target_modes),
        "questions": len(chosen),
        "questions_by_dataset": dict(sorted(Counter(q["dataset"] for q in chosen).items())),
        "questions_read": read,
        "questions_with_gold_facts": {ds: len(ids) for ds, ids in sorted(usable.items())},
        "trajectories": len(sims),
        "triplets": sum(len(t["triplets"]) for t in trajectories),
        "tokenizer": "whitespace",
        "max_pairs": params.agent.max_pairs,
        "embedding_model": bp.embedding_model,
        "results": aggregate(rows),
    }
    write_json(paths.METRICS / "simulate.json", metrics)
    write_report(
        metrics,
        (bp.mode, bp.target_mode),
        paths.REPORTS / "backtrace_sensitivity.md",
        paths.REPORTS / "backtrace_sensitivity.png",
    )
    log.info(
        "simulate: %d questions x %d noise levels -> %d trajectories; report %s",
        len(chosen),
        len(noise_levels),
        len(sims),
        paths.REPORTS / "backtrace_sensitivity.md",
    )
    return metrics
