"""Stage backtrace: label every trajectory of a round under every mode x target mode (DESIGN §2).

Reads data/trajectories/<V>/seed_<S>/round_<R>.parquet, writes data/labels/<V>/seed_<S>/round_<R>.parquet
(``schemas.LABELS``, one row per trajectory x mode x target mode, sorted) and
metrics/backtrace/<V>/seed_<S>/round_<R>.json: per mode x target mode the mean FA ratio over correct
trajectories, the share with no path found, mean kept triplets and admin-dropped triplets, overall,
by dataset and by route. Token counts use the policy's tokenizer (``llm.model``, else
``model.dir``, loaded offline); without one, whitespace tokens, recorded as such. With
``backtrace.answer_passage`` the sentences of the grounding passages come from
data/interim/passages.parquet (missing file: the rule is off, said in the metrics). A skipped round
(empty trajectory file) writes an empty labels file and status ``skipped``. Gated by
``validators.labels`` (Great Expectations).
"""

from __future__ import annotations

import logging

from factory import paths
from factory.backtrace.checks import BadTrajectory
from factory.backtrace.labels import backtrace_modes
from factory.backtrace.options import backtrace_options, load_token_counter
from factory.backtrace.summary import summarise
from factory.backtrace.tokens import TokenCounter
from factory.bootstrap.rounds import skip_reason
from factory.config import Params
from factory.errors import FactoryError
from factory.io import progress, write_json
from factory.stages import chain_arguments
from schemas import read_round_input, read_rows, write_parquet

COMMAND = "backtrace"
HELP = "label a round's trajectories by knowledge backtracing (every mode x target mode), with FA ratios"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are labelled")


def grounding_passages(trajectories: list[dict], params: Params) -> tuple[dict | None, str | None]:
    """(pid -> sentences of every passage that grounds a triplet, None) for the answer-passage rule;
    (None, why) when the rule is off or data/interim/passages.parquet is missing."""
    if not params.backtrace.answer_passage:
        return None, "backtrace.answer_passage is false"
    if not paths.PASSAGES.exists():
        return None, f"{paths.PASSAGES} is missing (run `factory ingest`)"
    wanted = {x.get("source_pid") for t in trajectories for x in t.get("triplets") or []} - {None}
    rows = read_rows(paths.PASSAGES, columns=["pid", "sentences"]) if wanted else []
    return {r["pid"]: list(r["sentences"] or []) for r in rows if r["pid"] in wanted}, None


def label_all(
    trajectories: list[dict], params: Params, counter: TokenCounter, passages: dict | None = None
) -> list[dict]:
    """Labels rows of every trajectory x params.backtrace.modes x target_modes, sorted."""
    bp = params.backtrace
    options = backtrace_options(params)
    rows = []
    for t in progress(trajectories, desc="backtrace", unit="traj"):
        try:
            rows.extend(
                backtrace_modes(t, bp.modes, bp.target_modes, tokenizer=counter, passages=passages, **options)
            )
        except BadTrajectory:
            raise
        except FactoryError as exc:
            raise FactoryError(f"trajectory {t.get('trajectory_id')!r}: {exc}") from None
    return sorted(rows, key=lambda r: (r["trajectory_id"], r["mode"], r["target_mode"]))


def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    from validators import run_suites
    from validators.labels import labels_specs

    bp = params.backtrace
    src = paths.trajectories(variant, round_, seed)
    out = paths.labels(variant, round_, seed)
    metrics_path = paths.stage_metrics("backtrace", variant, round_, seed)
    trajectories = read_round_input(src, "trajectories", variant, round_, seed)
    head = {
        "variant": variant,
        "round": round_,
        "protocol_seed": seed,
        "modes": list(bp.modes),
        "target_modes": list(bp.target_modes),
    }
    if not trajectories:
        try:
            reason = skip_reason(variant, round_, seed)
        except FactoryError:  # no decision recorded: the trajectories stage simply produced nothing
            reason = None
        metrics = {
            **head,
            "status": "skipped",
            "reason": reason or "the round's trajectory file is empty",
            "trajectories": 0,
            "labels": 0,
        }
        write_parquet([], out, "labels")
        write_json(metrics_path, metrics)
        log.info("backtrace %s round %d (seed %d): skipped: %s", variant, round_, seed, metrics["reason"])
        return metrics
    counter, fallback = load_token_counter(params)
    if fallback:
        log.warning("backtrace: no policy tokenizer (%s); counting whitespace tokens", fallback)
    passages, passages_off = grounding_passages(trajectories, params)
    if passages_off and bp.answer_passage:
        log.warning("backtrace: answer-passage rule off: %s", passages_off)
    labels = label_all(trajectories, params, counter, passages)
    gate = run_suites(
        f"backtrace-{variant}-seed_{seed}-round_{round_}",
        labels_specs(trajectories, labels, bp.modes, bp.target_modes),
        docs_dir=paths.GX_DOCS,
    )
    write_parquet(labels, out, "labels")
    metrics = {
        **head,
        "status": "ok",
        "tokenizer": counter.name,
        "tokenizer_fallback_reason": fallback,
        "embedding_model": bp.embedding_model,
        "answer_passage": passages is not None,
        "answer_passage_off_reason": passages_off,
        "trajectories": len(trajectories),
        "correct": sum(1 for t in trajectories if t["correct"]),
        "labels": len(labels),
        "expectations_passed": gate.evaluated,
        "default": f"{bp.mode}/{bp.target_mode}",
        "by_mode": summarise(trajectories, labels),
    }
    write_json(metrics_path, metrics)
    d = metrics["by_mode"].get(metrics["default"], {}).get("all", {})
    log.info(
        "backtrace %s round %d (seed %d): %d trajectories, %d labels; default %s: FA %s, no path %s",
        variant,
        round_,
        seed,
        len(trajectories),
        len(labels),
        metrics["default"],
        d.get("mean_fa_ratio_correct"),
        d.get("no_path_share"),
    )
    return metrics
