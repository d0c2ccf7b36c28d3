"""A round's TRACE export as the export-trace stage runs it: what ``export_trace`` reads of the round
(its trajectories, labels, what the variant's set kept, questions and numbered passages) and the files
it writes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from factory.retrieval.store import PassageStore
from factory.trace.export import TraceExport
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import write_json, write_jsonl
from schemas import TRAJECTORY, columns_except, read_rows, write_parquet

TRAJECTORY_COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])
log = logging.getLogger(__name__)


@dataclass
class ExportInputs:
    trajectories: list[dict]  # the correct ones whole (without prompts), the others as their outcome
    labels: list[dict]  # of the correct trajectories, one mode x target mode
    kept: list[dict]  # what the variant's set kept of each trajectory (kept.parquet)
    questions: dict[str, dict]  # question_id -> answers and supporting facts
    passages: dict[str, dict]  # pid -> passage, of every passage the trajectories retrieved


def read_inputs(
    outcomes: Sequence[Mapping],
    trajectories: Path,
    labels: Path,
    kept: Path,
    mode: str,
    target_mode: str,
    round_name: str,
) -> ExportInputs:
    """What exporting the round whose trajectory outcomes are ``outcomes`` reads: the correct
    trajectories whole (without their prompts: the TRACE prompt is built anew), the others only as far
    as their status needs; their labels; what the variant's set kept of them (``kept``: its
    kept.parquet); their questions; the passages they retrieved. A missing input is an error naming the
    command to run (``round_name``: e.g. 'variant V, round R, seed S')."""
    inputs = (
        (labels, "backtrace"),
        (kept, "variants"),
        (paths.QUESTIONS, "ingest"),
        (paths.INDEX_DIR, "index"),
    )
    for path, stage in inputs:
        if not Path(path).exists():
            raise FactoryError(f"{path} is missing: run `factory {stage}` first ({round_name})")
    correct = [t["trajectory_id"] for t in outcomes if t["correct"]]
    rows = [t for t in outcomes if not t["correct"]]
    rows += read_rows(trajectories, TRAJECTORY_COLUMNS, where={"trajectory_id": correct})
    where = {"trajectory_id": correct, "mode": [mode], "target_mode": [target_mode]}
    questions = read_rows(
        paths.QUESTIONS,
        columns=["question_id", "answers", "supporting"],
        where={"question_id": sorted({t["question_id"] for t in outcomes})},
    )
    wanted = sorted({pid for t in rows for s in t.get("steps") or [] for pid in s["retrieved"]})
    return ExportInputs(
        trajectories=rows,
        labels=read_rows(labels, where=where),
        kept=read_rows(kept, where={"trajectory_id": correct}),
        questions={q["question_id"]: q for q in questions},
        passages=PassageStore.open(paths.INDEX_DIR).get_many(wanted),
    )


def write_export(out_dir: Path, result: TraceExport, stats: dict) -> None:
    """sft/rl as parquet (contracts TRACE_SFT/TRACE_RL) and JSONL, and stats.json."""
    write_parquet(result.sft, out_dir / "sft.parquet", "trace_sft")
    write_parquet(result.rl, out_dir / "rl.parquet", "trace_rl")
    write_jsonl(out_dir / "sft.jsonl", ({"messages": r["messages"]} for r in result.sft))  # chat fine-tuning
    write_jsonl(out_dir / "rl.jsonl", result.rl)  # prompt + reward reference columns
    write_json(out_dir / "stats.json", stats)


def log_export(label: str, result: TraceExport, stats: Mapping) -> None:
    overall = stats["sft_rewards"]["overall"]
    log.info(
        "%s: %d trajectories, %d SFT / %d RL records; SFT targets earn format %s, accuracy %s, relevance %s",
        label,
        stats["trajectories"],
        len(result.sft),
        len(result.rl),
        *(None if overall[c] is None else round(overall[c], 3) for c in ("format", "accuracy", "relevance")),
    )
