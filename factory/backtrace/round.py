"""A round's labels: every trajectory of a round's file under every mode x target mode, labelled in
tasks (``factory.backtrace.tasks``) on ``execution.engine`` and merged into one sorted table, with the
numbers the backtrace stage's metrics report. The sorted table is the same bytes on every engine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from factory.backtrace.options import load_token_counter
from factory.backtrace.summary import LabelSummary
from factory.backtrace.tasks import LabelTasks, passage_store, plan_tasks
from factory.execution.engine import make_engine
from factory.params.config import Params
from factory.utils.io import progress

log = logging.getLogger(__name__)


@dataclass
class RoundLabels:
    table: pa.Table  # schemas.LABELS, sorted by trajectory, mode, target mode
    frame: Any  # the gate's columns (validators.labels.labels_frame) of every task
    trajectories: int  # distinct trajectory ids labelled
    correct: int
    summary: LabelSummary
    tokenizer: str
    tokenizer_fallback_reason: str | None
    answer_passage_off_reason: str | None  # None: the grounding passages were read

    def metrics(self, params: Params, total: int, expectations_passed: int) -> dict:
        """The stage's metrics after its head: what labelled, the counts, and per mode x target mode the
        label statistics (``LabelSummary``)."""
        bp = params.backtrace
        return {
            "status": "ok",
            "tokenizer": self.tokenizer,
            "tokenizer_fallback_reason": self.tokenizer_fallback_reason,
            "embedding_model": bp.embedding_model,
            "answer_passage": self.answer_passage_off_reason is None,
            "answer_passage_off_reason": self.answer_passage_off_reason,
            "trajectories": total,
            "correct": self.correct,
            "labels": self.table.num_rows,
            "expectations_passed": expectations_passed,
            "default": f"{bp.mode}/{bp.target_mode}",
            "by_mode": self.summary.result(),
        }


def label_round(params: Params, src: str | Path, total: int) -> RoundLabels:
    """Label the ``total`` trajectories of ``src``, a task per slice of a row group (at most
    ``tasks.TASK_ROWS``), with progress. Token counts use the policy's tokenizer (whitespace when there
    is none, said in a warning); the answer-passage rule reads the passage store when it is on and there."""
    counter, fallback = load_token_counter(params)
    if fallback:
        log.warning("backtrace: no policy tokenizer (%s); counting whitespace tokens", fallback)
    store, passages_off = passage_store(params)
    if passages_off and params.backtrace.answer_passage:
        log.warning("backtrace: answer-passage rule off: %s", passages_off)
    # Tasks of at most a row group's slice; their labels go to Arrow (compact), their gate columns
    # to a frame; on Ray each worker loads its own counter and store.
    tasks = plan_tasks(src)
    results: list = [None] * len(tasks)
    with make_engine(params) as engine, progress(total=total, desc="backtrace", unit="traj") as bar:
        work = LabelTasks(params, str(src))
        if not engine.remote:
            work.counter, work.store = counter, store
        for k, result in engine.map(work, list(enumerate(tasks)), bar.update):
            results[k] = result
            if engine.remote:
                bar.update(len(result.trajectory_ids))
    import pandas as pd

    summary = LabelSummary({})
    for r in results:
        summary.merge(r.summary)
    table = pa.concat_tables([r.labels for r in results]).sort_by(
        [("trajectory_id", "ascending"), ("mode", "ascending"), ("target_mode", "ascending")]
    )
    return RoundLabels(
        table=table,
        frame=pd.concat([r.frame for r in results], ignore_index=True),
        trajectories=len({tid for r in results for tid in r.trajectory_ids}),
        correct=sum(r.correct for r in results),
        summary=summary,
        tokenizer=counter.name,
        tokenizer_fallback_reason=fallback,
        answer_passage_off_reason=passages_off,
    )
