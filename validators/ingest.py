"""Gate of the ingest stage: questions and passages.

``ingest_frames`` computes the checked columns (cross-field checks become boolean columns);
``ingest_expectations`` names what each frame must meet. They are separate so that the stage can
run the gate in a child process (``validators.BackgroundGate``) while it builds the tables.
"""

from __future__ import annotations

import pandas as pd

from factory.config import DATASETS

EXPECTATIONS = "validators.ingest:ingest_expectations"


def _pool_checks(q: dict, known_pids: set[str]) -> tuple[bool, bool, bool]:
    """(every supporting fact names a passage of the pool by pid and title, every sentence index is
    in range, every pool pid is in the passages table), in one pass over the question."""
    sizes: dict[str, int] = {}
    titles = set()
    for p in q["passages"]:
        sizes.setdefault(p["pid"], len(p["sentences"]))
        titles.add(p["title"])
    resolved = in_range = True
    for s in q["supporting"]:
        n = sizes.get(s["pid"])
        if n is None or s["title"] not in titles:
            resolved = False
        if s["sent_idx"] != -1 and (n is None or not 0 <= s["sent_idx"] < n):
            in_range = False
    return resolved, in_range, known_pids.issuperset(sizes)


def ingest_frames(questions: list[dict], passages: list[dict]) -> dict[str, pd.DataFrame]:
    pframe = pd.DataFrame(
        {
            "pid": [p["pid"] for p in passages],
            "dataset": [p["dataset"] for p in passages],
            "text_len": [len(p["text"]) for p in passages],
            "n_sentences": [len(p["sentences"]) for p in passages],
        }
    )
    known_pids = set(pframe["pid"])
    checks = [_pool_checks(q, known_pids) for q in questions]
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
            "supporting_resolved": [c[0] for c in checks],
            "sent_idx_in_range": [c[1] for c in checks],
            "passages_known": [c[2] for c in checks],
        }
    )
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
