"""What each method keeps of one real graph: the project's S_q and the controls beside it.

- ``backtrace``: S_q of ``backtrace.mode`` with the gold answer as target (the graphs have no model
  answer), linked and walked exactly as the backtrace stage does (``factory.backtrace.backtrace_modes``);
  with the answer-passage rule when ``backtrace.answer_passage`` (the passages' sentences are in the
  record); ``backtrace/<mode>``: the other modes of ``backtrace.modes``;
- the controls of ``factory.relevance.grounded.control_sets``: ``authors_rule``, the KnowTrace authors'
  rule on the whole graph (``first_line_only=False``: these triplets were extracted from passages, not
  generated one completion at a time); ``answer_entity``, the triplets naming a gold answer;
  ``random``, |S_q| triplets drawn uniformly, once per seed; ``unfiltered``, every triplet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from factory.backtrace.labels import backtrace_modes
from factory.calibration.graphs import passage_sentences, to_trajectory
from factory.params.label_sections import BacktraceParams
from factory.relevance.grounded import CONTROLS, control_sets
from factory.utils.selection import BACKTRACE, backtrace_method


def backtrace_name(mode: str, params: BacktraceParams) -> str:
    """``backtrace`` for S_q of the default mode, ``backtrace/<mode>`` for another."""
    return BACKTRACE if mode == params.mode else backtrace_method(mode)


def modes_of(params: BacktraceParams) -> list[str]:
    """The default mode first, then the other modes of ``params.modes``."""
    return [params.mode, *(m for m in params.modes if m != params.mode)]


def method_names(params: BacktraceParams) -> list[str]:
    return [backtrace_name(m, params) for m in modes_of(params)] + list(CONTROLS)


def select_on_graph(
    record: Mapping, params: BacktraceParams, random_seeds: Sequence[int], embedder=None
) -> tuple[dict, dict[str, list[set[str]]], dict]:
    """(the record as a trajectory, method -> kept triplet ids per seed: one set, or one per seed for
    the random control, S_q's labels row: its initial and target entities say why it kept what it did)."""
    trajectory = to_trajectory(record)
    modes = modes_of(params)
    gold = params.model_copy(update={"modes": modes, "target_modes": ["gold_answer"]})
    passages = passage_sentences(record) if params.answer_passage else None
    rows = backtrace_modes(trajectory, gold, embedder=embedder, passages=passages)
    kept = {backtrace_name(r["mode"], params): [set(r["kept_triplet_ids"])] for r in rows}
    kept.update(control_sets(trajectory, len(kept[BACKTRACE][0]), random_seeds, first_line_only=False))
    return trajectory, kept, next(r for r in rows if r["mode"] == params.mode)
