"""Labelling a round's trajectory file in tasks: the backtrace stage's map, on any engine.

A task is a slice of one row group of the trajectory file (``TASK_ROWS`` trajectories at most), read
without the prompts. ``LabelTasks(params, src)(task, tick)`` labels it under every mode x target mode
and returns what the stage assembles: the labels (Arrow), the gate's columns (a frame) and the
metrics of its rows (a ``LabelSummary``, merged by the stage). In the stage's process it uses the
driver's token counter and passage store; on a Ray worker it loads them there, once per worker
(``factory.execution.engine.worker_resource``). Results depend on the trajectories alone, so the
stage's sorted output is the same bytes on every engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from factory.backtrace.checks import BadTrajectory
from factory.backtrace.labels import backtrace_modes
from factory.backtrace.options import load_embedder, load_token_counter
from factory.backtrace.summary import LabelSummary
from factory.backtrace.tokens import TokenCounter
from factory.params.config import Params
from factory.retrieval.store import PassageStore
from factory.utils import paths
from factory.utils.errors import FactoryError
from schemas import LABELS, TRAJECTORY, columns_except, iter_batches, to_table

# A trajectory without its prompts: labels never read the messages, which are most of its bytes.
COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])
TASK_ROWS = 1024  # trajectories a task labels: a quarter of a row group, so two workers share a small round


def plan_tasks(src: str | Path) -> list[tuple[int, int, int]]:
    """(row group, first row, end row) slices covering the file, in file order."""
    meta = pq.ParquetFile(src).metadata
    return [
        (g, start, min(start + TASK_ROWS, meta.row_group(g).num_rows))
        for g in range(meta.num_row_groups)
        for start in range(0, meta.row_group(g).num_rows, TASK_ROWS)
    ]


def passage_store(params: Params) -> tuple[PassageStore | None, str | None]:
    """(the passage store, None) for the answer-passage rule; (None, why) when it is off or missing."""
    if not params.backtrace.answer_passage:
        return None, "backtrace.answer_passage is false"
    try:
        return PassageStore.open(paths.INDEX_DIR), None
    except FactoryError as exc:
        return None, str(exc)


def grounding_passages(trajectories: list[dict], store: PassageStore | None) -> dict | None:
    """pid -> sentences of every passage that grounds a triplet of ``trajectories`` (None: rule off)."""
    if store is None:
        return None
    wanted = {x.get("source_pid") for t in trajectories for x in t.get("triplets") or []} - {None}
    return {pid: list(p["sentences"] or []) for pid, p in store.get_many(sorted(wanted)).items()}


def label_all(
    trajectories: list[dict], params: Params, counter: TokenCounter, passages: dict | None = None
) -> list[dict]:
    """Labels rows of every trajectory x params.backtrace.modes x target_modes."""
    bp = params.backtrace
    embedder = load_embedder(bp)
    rows = []
    for t in trajectories:
        try:
            rows.extend(backtrace_modes(t, bp, tokenizer=counter, embedder=embedder, passages=passages))
        except BadTrajectory:
            raise
        except FactoryError as exc:
            raise FactoryError(f"trajectory {t.get('trajectory_id')!r}: {exc}") from None
    return rows


@dataclass
class TaskResult:
    labels: Any  # pyarrow.Table of schemas.LABELS
    frame: Any  # validators.labels.labels_frame of the task's rows
    summary: LabelSummary  # the stage's metrics of the task's rows (merged by the stage)
    trajectory_ids: list[str]
    correct: int


@dataclass
class LabelTasks:
    """The backtrace map's work: ``work(task, tick)`` -> ``TaskResult`` (see the module docstring)."""

    params: Params
    src: str
    counter: TokenCounter | None = field(default=None, repr=False)
    store: PassageStore | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:  # the counter and store are built where the task runs
        return {**self.__dict__, "counter": None, "store": None}

    def _resources(self) -> tuple[TokenCounter, PassageStore | None]:
        if self.counter is not None:
            return self.counter, self.store
        from factory.execution.engine import worker_resource

        def build() -> tuple[TokenCounter, PassageStore | None]:
            return load_token_counter(self.params)[0], passage_store(self.params)[0]

        index = Path(paths.INDEX_DIR).resolve()
        key = ("backtrace", self.params.model_dump_json(), str(index))
        return worker_resource(key, build)

    def __call__(self, task: tuple[int, int, int], tick) -> TaskResult:
        from validators.labels import labels_frame

        group, start, end = task
        counter, store = self._resources()
        batch = next(iter_batches(self.src, COLUMNS, row_groups=[group]))
        trajectories = batch.slice(start, end - start).to_pylist()
        labels = label_all(trajectories, self.params, counter, grounding_passages(trajectories, store))
        summary = LabelSummary(
            {t["trajectory_id"]: (t["dataset"], t["route"], len(t["triplets"])) for t in trajectories}
        )
        for row in labels:
            summary.add(row)
        tick(len(trajectories))
        return TaskResult(
            to_table(labels, LABELS, "labels"),
            labels_frame(trajectories, labels),
            summary,
            [t["trajectory_id"] for t in trajectories],
            sum(1 for t in trajectories if t["correct"]),
        )
