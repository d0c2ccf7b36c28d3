"""Gate of the ingest stage: questions and passages.

``ingest_frames`` computes the checked columns (cross-field checks become boolean columns);
``ingest_expectations`` names what each frame must meet. They are separate so that the stage can
run the gate in a child process (``validators.BackgroundGate``) while it builds the tables.
"""

from __future__ import annotations

import pandas as pd

from factory.config import DATASETS

EXPECTATIONS = "validators.ingest:ingest_expectations"


def ingest_frames(questions: list[dict], passages: list[dict]) -> dict[str, pd.DataFrame]:
    pool_pids = [{p["pid"] for p in q["passages"]} for q in questions]
    pool_titles = [{p["title"] for p in q["passages"]} for q in questions]
    qframe = pd.DataFrame(
        {
            "question_id": [q["question_id"] for q in questions],
            "dataset": [q["dataset"] for q in questions],
            "split": [q["split"] for q in questions],
            "route": [q["route"] for q in questions],
            "question": [q["question"] for q in questions],
            "hops": [q["hops"] for q in questions],
            "n_answers": [len(q["answers"]) for q in questions],
            "answer_nonempty": [bool(q["answers"]) and bool(q["answers"][0].strip()) for q in questions],
            "n_passages": [len(q["passages"]) for q in questions],
            "n_supporting": [len(q["supporting"]) for q in questions],
            "supporting_resolved": [
                all(s["title"] in titles and s["pid"] in pids for s in q["supporting"])
                for q, titles, pids in zip(questions, pool_titles, pool_pids, strict=True)
            ],
            "sent_idx_in_range": [
                all(
                    s["sent_idx"] == -1 or any(p["pid"] == s["pid"] and s["sent_idx"] < len(p["sentences"]) for p in q["passages"])
                    for s in q["supporting"]
                )
                for q in questions
            ],
        }
    )
    pframe = pd.DataFrame(
        {
            "pid": [p["pid"] for p in passages],
            "dataset": [p["dataset"] for p in passages],
            "text_len": [len(p["text"]) for p in passages],
            "n_sentences": [len(p["sentences"]) for p in passages],
        }
    )
    known_pids = set(pframe["pid"])
    qframe["passages_known"] = [pids <= known_pids for pids in pool_pids]
    return {"questions": qframe, "passages": pframe}


def ingest_expectations(E) -> dict[str, list]:
    """``E``: the ``great_expectations.expectations`` module."""
    questions_suite = [
        E.ExpectColumnValuesToBeUnique(column="question_id"),
        E.ExpectColumnValuesToNotBeNull(column="question"),
        E.ExpectColumnValuesToBeInSet(column="dataset", value_set=list(DATASETS)),
        E.ExpectColumnValuesToBeInSet(column="split", value_set=["train", "heldout", "test"]),
        E.ExpectColumnValuesToBeInSet(column="route", value_set=["chain", "parallel"]),
        E.ExpectColumnValuesToBeBetween(column="hops", min_value=2, max_value=10),
        E.ExpectColumnValuesToBeBetween(column="n_answers", min_value=1),
        E.ExpectColumnValuesToBeInSet(column="answer_nonempty", value_set=[True]),
        E.ExpectColumnValuesToBeBetween(column="n_passages", min_value=1),
        E.ExpectColumnValuesToBeBetween(column="n_supporting", min_value=1),
        E.ExpectColumnValuesToBeInSet(column="supporting_resolved", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="sent_idx_in_range", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="passages_known", value_set=[True]),
    ]
    passages_suite = [
        E.ExpectColumnValuesToBeUnique(column="pid"),
        E.ExpectColumnValuesToBeInSet(column="dataset", value_set=list(DATASETS)),
        E.ExpectColumnValuesToBeBetween(column="text_len", min_value=1),
        E.ExpectColumnValuesToBeBetween(column="n_sentences", min_value=1),
    ]
    return {"questions": questions_suite, "passages": passages_suite}
