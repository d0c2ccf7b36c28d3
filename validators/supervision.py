"""Gate of the variants stage: a supervision set that may be trained on.

- example ids are unique; every example ends with the assistant turn; kept units <= generated units;
- each matched control (``matched_to`` in ``factory.variants.registry``: random -> backtrace) removes
  exactly as many pairs and triplets per trajectory as its reference does (both computed with
  ``factory.variants.registry.select_units`` for the round's correct trajectories, in every variant's run, so
  a drift in either is caught wherever it shows);
- leakage (validators.leakage, also checked at ingest): no example comes from a held-out or test
  question, by question id AND by normalised question text (an example whose question is unknown to
  data/interim/questions.parquet fails too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from factory.variants import registry
from factory.variants.registry import select_units
from validators import SuiteSpec
from validators.leakage import eval_question_texts


class QuestionSplits:
    """Each question's split by id, and the normalised texts of the evaluation questions."""

    def __init__(self, questions: Iterable[Mapping]):
        questions = list(questions)
        self.split_by_id = {q["question_id"]: q["split"] for q in questions}
        self.eval_norms = eval_question_texts(questions)


def leakage_frame(examples: Sequence[Mapping], questions: Iterable[Mapping] | QuestionSplits) -> pd.DataFrame:
    """Per example: its question's split (``unknown`` if absent) and whether its text is an eval
    question's."""
    splits = questions if isinstance(questions, QuestionSplits) else QuestionSplits(questions)
    split_by_id, eval_norms = splits.split_by_id, splits.eval_norms
    return pd.DataFrame(
        {
            "example_id": pd.Series([e["example_id"] for e in examples], dtype=object),
            "question_id": pd.Series([e["question_id"] for e in examples], dtype=object),
            "question_split": pd.Series(
                [split_by_id.get(e["question_id"], "unknown") for e in examples], dtype=object
            ),
            "text_of_eval_question": pd.Series(
                [e["question_norm"] in eval_norms for e in examples], dtype=bool
            ),
            "ends_with_assistant": pd.Series(
                [bool(e["messages"]) and e["messages"][-1]["role"] == "assistant" for e in examples],
                dtype=bool,
            ),
            "units_consistent": pd.Series(
                [0 <= e["units_kept"] <= e["units_total"] for e in examples], dtype=bool
            ),
        }
    )


def matching_frame(
    trajectories: Iterable[Mapping], labels_by_tid: Mapping[str, Mapping], seed: int
) -> pd.DataFrame:
    """Per correct trajectory and matched control (``Variant.matched_to``, e.g. random -> backtrace):
    the units its reference and the control removed, and whether pairs and triplets match one for one.
    Columns ``<reference>_removed`` and ``<control>_removed`` for each control."""
    controls = [v for v in registry.REGISTRY.values() if v.matched_to]
    columns = ["trajectory_id", "labelled", "pairs_matched", "triplets_matched"]
    for v in controls:
        columns += [f"{v.matched_to}_removed", f"{v.name}_removed"]
    rows = []
    for t in trajectories:
        if not t.get("correct"):
            continue
        row = labels_by_tid.get(t["trajectory_id"])
        out = {"trajectory_id": t["trajectory_id"], "labelled": row is not None}
        out["pairs_matched"] = out["triplets_matched"] = row is not None
        for v in controls:
            if row is None:
                out[f"{v.matched_to}_removed"] = out[f"{v.name}_removed"] = -1
                continue
            ref, control = select_units(t, row, v.matched_to, seed), select_units(t, row, v.name, seed)
            out["pairs_matched"] &= ref.removed_pairs == control.removed_pairs and len(ref.pair_ids) == len(
                control.pair_ids
            )
            out["triplets_matched"] &= ref.removed_triplets == control.removed_triplets and len(
                ref.triplet_ids
            ) == len(control.triplet_ids)
            out[f"{v.matched_to}_removed"] = ref.removed_units
            out[f"{v.name}_removed"] = control.removed_units
        rows.append(out)
    frame = pd.DataFrame(rows, columns=columns)
    equal = pd.Series(True, index=frame.index, dtype=bool)
    for v in controls:
        equal &= frame[f"{v.matched_to}_removed"] == frame[f"{v.name}_removed"]
    frame["removed_equal"] = equal.astype(bool)
    return frame


def supervision_specs(
    examples: Sequence[Mapping],
    questions: Iterable[Mapping],
    trajectories: Iterable[Mapping],
    labels_by_tid: Mapping[str, Mapping],
    seed: int,
) -> list[SuiteSpec]:
    """The suites of the variants gate (see module doc)."""
    return supervision_suites(
        leakage_frame(examples, questions), matching_frame(trajectories, labels_by_tid, seed)
    )


def supervision_suites(examples_frame: pd.DataFrame, matching: pd.DataFrame) -> list[SuiteSpec]:
    """The variants gate over its two frames (whole, or the frames of the set's batches concatenated)."""
    return [
        SuiteSpec("examples", examples_frame, _examples_suite, ids=("example_id",)),
        SuiteSpec("matched_controls", matching, _matching_suite, ids=("trajectory_id",)),
    ]


def _examples_suite(E) -> list:
    return [
        E.ExpectColumnValuesToBeUnique(column="example_id"),
        E.ExpectColumnValuesToBeInSet(column="question_split", value_set=["train"]),
        E.ExpectColumnValuesToBeInSet(column="text_of_eval_question", value_set=[False]),
        E.ExpectColumnValuesToBeInSet(column="ends_with_assistant", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="units_consistent", value_set=[True]),
    ]


def _matching_suite(E) -> list:
    return [
        E.ExpectColumnValuesToBeInSet(column="labelled", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="pairs_matched", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="triplets_matched", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="removed_equal", value_set=[True]),
    ]
