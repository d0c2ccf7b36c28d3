"""The last gate before a set is published: no question of any evaluation set leaves the factory.

The decontaminate stage already kept every flagged question out of generation, and the variants gate
checked each round's set. This gate checks the sets as they are about to be published, against the
artifacts as they are now (a set trained before the evaluation sets grew is caught here): every
example's question is an official train question of the training split, decontamination did not flag
it, and its normalised text is no evaluation question's (the run's official dev files and every file
of ``decontamination.eval_sets``). One offending example stops ``publish`` before it writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from factory.decontamination.flagged import contaminated_ids
from factory.utils import paths
from factory.utils.errors import FactoryError
from schemas import iter_rows, require

SHOWN = 5  # offending examples named in the message


def check_publishable(examples: Iterable[dict]) -> int:
    """The number of examples checked; a ``FactoryError`` naming the offending ones when any would
    publish an evaluation question."""
    require(paths.QUESTIONS, "run `factory ingest` first")
    require(paths.EVAL_QUESTIONS, "run `factory decontaminate` first")
    require(paths.CONTAMINATION, "run `factory decontaminate` first")
    examples = list(examples)
    wanted = sorted({e["question_id"] for e in examples})
    splits = {
        q["question_id"]: (q["official_split"], q["split"])
        for q in iter_rows(
            paths.QUESTIONS, ["question_id", "official_split", "split"], {"question_id": wanted}
        )
    }
    eval_texts = {
        q["question_norm"]: q
        for q in iter_rows(paths.EVAL_QUESTIONS, ["question_norm", "eval_set", "eval_id"])
    }
    flagged = contaminated_ids(paths.CONTAMINATION)
    problems = [p for e in examples if (p := _problem(e, splits, flagged, eval_texts))]
    if problems:
        shown = "; ".join(problems[:SHOWN]) + (
            f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        )
        raise FactoryError(
            f"publish refused: {len(problems)} example(s) of the sets would publish a question of an "
            f"evaluation set ({shown}). Nothing was written. The round artifacts are older than the "
            "decontamination (or were edited): run `dvc repro`, which re-runs decontaminate and every round "
            "after it"
        )
    return len(examples)


def _problem(example: dict, splits: dict, flagged: set[str], eval_texts: dict) -> str | None:
    qid = example["question_id"]
    official, split = splits.get(qid, (None, None))
    if official is None:
        return f"{qid}: not an ingested question"
    if official != "train" or split != "train":
        return f"{qid}: official split {official}, split {split} (only official train's train split is kept)"
    if qid in flagged:
        return f"{qid}: flagged by decontamination (data/interim/contamination.jsonl)"
    same = eval_texts.get(example["question_norm"])
    if same is not None:
        return f"{qid}: the text of {same['eval_set']} question {same['eval_id']}"
    return None
