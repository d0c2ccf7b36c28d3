"""Calibration graph records for the tests: the shared real ones, and a small hand-made one whose answers
are known."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import ROOT

EXTERNAL = Path(os.environ.get("FACTORY_EXTERNAL", ROOT.parent / "shared" / "external"))
SHARED = EXTERNAL / "musique_openie_dev.jsonl"


def passage(i: int, title: str, text: str, gold: bool) -> dict:
    return {"passage_index": i, "title": title, "text": text, "is_supporting": gold}


def triplet(s: str, r: str, o: str, p: int, sentence: int | None = None) -> dict:
    return {"subject": s, "relation": r, "object": o, "passage_index": p, "sentence_index": sentence}


def film_record(qid: str = "toy/1", dataset: str = "toy") -> dict:
    """Where was the director of Film X born? Gold: p0 (Film X) and p1 (Jane Doe); p2 is a distractor
    that also names Paris. S_q walks Film X -> Jane Doe -> Paris."""
    return {
        "question_id": qid,
        "dataset": dataset,
        "type": "bridge",
        "question": "Where was the director of Film X born?",
        "answers": ["Paris"],
        "passages": [
            passage(0, "Film X", "Film X is a 1999 film directed by Jane Doe.", True),
            passage(1, "Jane Doe", "Jane Doe is a director. She was born in Paris.", True),
            passage(2, "France", "Paris is the capital of France. Film Y was shot there.", False),
        ],
        "triplets": [
            triplet("Film X", "directed by", "Jane Doe", 0),
            triplet("Jane Doe", "born in", "Paris", 1),
            triplet("Paris", "capital of", "France", 2),
            triplet("Film Y", "shot in", "France", 2),
        ],
    }


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
