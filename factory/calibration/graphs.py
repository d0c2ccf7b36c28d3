"""Real LLM-made graphs with gold supporting paragraphs: the files the labeller is calibrated on.

One record a question (JSON Lines, or one JSON list; read by ``factory.corpora.files``, so compressed
files work too), from any extractor, per passage or per sentence, question-conditioned or not:

- ``question_id``, ``dataset``, ``question``, ``answers`` (the answer first, then aliases); optional
  ``type`` (the question type);
- ``passages``: ``{passage_index, title, text, is_supporting}``, optionally ``sentences`` (the
  passage's sentences; else the text is split after . ! ?);
- ``triplets``: ``{subject, relation, object, passage_index}``, optionally ``triplet_id`` (else the
  triplet's position) and ``sentence_index`` (set by extractors that read sentence by sentence).

The gold supporting paragraphs are the passages marked ``is_supporting``. A record that breaks this
contract is left out with the file, line, field and reason (``Graphs.problems``); the others are read.
``../shared/external/README.md`` documents the shared file; ``factory.calibration.hipporag`` builds one
from HippoRAG's published OpenIE output and the official MuSiQue records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from factory.corpora.files import Unreadable, read_json_records
from factory.utils.errors import FactoryError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
REQUIRED = ("question_id", "dataset", "question", "answers", "passages", "triplets")


@dataclass
class Graphs:
    """The records read (file order, files in the order given) and those left out, with why."""

    records: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # {file, location, question_id, field, reason}
    missing: list[str] = field(default_factory=list)  # files that do not exist


def read_graph_files(files: Iterable[str | Path]) -> Graphs:
    """Every record of every existing file; a repeated question id keeps its first record."""
    out, seen = Graphs(), set()
    for path in map(Path, files):
        if not path.exists():
            out.missing.append(str(path))
            continue
        # a lone object with a question_id is a one-record file; messages name calibration.graphs
        for location, raw in read_json_records(path, id_keys=("question_id",), setting="calibration.graphs"):
            problem = _problem(raw) if not isinstance(raw, Unreadable) else (raw.field, raw.reason)
            qid = raw.get("question_id", "?") if isinstance(raw, dict) else "?"
            if problem is None and qid in seen:
                problem = ("question_id", f"repeats {qid!r}: the first record is kept")
            if problem is not None:
                out.problems.append(
                    {
                        "file": str(path),
                        "location": location,
                        "question_id": qid,
                        "field": problem[0],
                        "reason": problem[1],
                    }  # fmt: skip
                )
                continue
            seen.add(qid)
            out.records.append(raw)
    return out


def _problem(record: object) -> tuple[str, str] | None:
    """(field, reason) of the first break of the contract (module docstring), or None."""
    if not isinstance(record, dict):
        return "<record>", f"is a JSON {type(record).__name__}, not an object"
    for key in REQUIRED:
        if key not in record:
            return key, "is missing"
    if not isinstance(record["answers"], list) or not record["answers"]:
        return "answers", "must be a non-empty list (the answer first, then aliases)"
    indices = set()
    for i, p in enumerate(record["passages"] if isinstance(record["passages"], list) else [None]):
        if not isinstance(p, dict) or not {"passage_index", "title", "text", "is_supporting"} <= set(p):
            return f"passages[{i}]", "needs passage_index, title, text and is_supporting"
        indices.add(p["passage_index"])
    if not any(p["is_supporting"] for p in record["passages"]):
        return "passages", "no passage is marked is_supporting: nothing to score against"
    for i, t in enumerate(record["triplets"] if isinstance(record["triplets"], list) else [None]):
        if not isinstance(t, dict) or not {"subject", "relation", "object", "passage_index"} <= set(t):
            return f"triplets[{i}]", "needs subject, relation, object and passage_index"
        if t["passage_index"] not in indices:
            return f"triplets[{i}].passage_index", f"{t['passage_index']!r} names no passage of the record"
        if not all(isinstance(t[k], str) for k in ("subject", "relation", "object")):
            return f"triplets[{i}]", "subject, relation and object must be strings"
    return None


def passage_pid(record: Mapping, index: int) -> str:
    return f"{record['question_id']}#p{index}"


def triplet_id(record: Mapping, position: int, triplet: Mapping) -> str:
    return f"{record['question_id']}#{triplet.get('triplet_id') or f't{position:04d}'}"


def gold_pids(record: Mapping) -> set[str]:
    return {passage_pid(record, p["passage_index"]) for p in record["passages"] if p["is_supporting"]}


def passage_sentences(record: Mapping) -> dict[str, list[str]]:
    """pid -> sentences of every passage: its ``sentences`` when given, else the text split after . ! ?"""
    return {
        passage_pid(record, p["passage_index"]): list(p.get("sentences") or _SENTENCE_END.split(p["text"]))
        for p in record["passages"]
    }


def to_trajectory(record: Mapping) -> dict:
    """The record as a correct trajectory the backtracer reads: one complete step holding every triplet
    (its passage as ``source_pid``, its sentence as ``source_sentence`` when the extractor gave one), no
    explore pairs (so the initial entities come from the question), the gold answer as its answer (these
    graphs have no model answer)."""
    qid = record["question_id"]
    triplets = [
        {
            "triplet_id": triplet_id(record, i, t),
            "step_index": 0,
            "pair_id": None,
            "subject": t["subject"],
            "relation": t["relation"],
            "object": t["object"],
            "source_pid": passage_pid(record, t["passage_index"]),
            "source_sentence": t.get("sentence_index"),
        }
        for i, t in enumerate(record["triplets"])
    ]
    step = {
        "index": 0,
        "kind": "complete",
        "output": "",
        "pairs": [],
        "pair_id": None,
        "retrieved": [passage_pid(record, p["passage_index"]) for p in record["passages"]],
        "triplet_ids": [t["triplet_id"] for t in triplets],
    }
    return {
        "trajectory_id": qid,
        "question_id": qid,
        "dataset": record["dataset"],
        "qtype": record.get("type") or "",
        "question": record["question"],
        "answers": list(record["answers"]),
        "answer": record["answers"][0],
        "final_thought": "",
        "correct": True,
        "steps": [step],
        "triplets": triplets,
    }


def require_graphs(graphs: Graphs) -> None:
    """Stop when files were named and none of their records could be read."""
    if graphs.problems and not graphs.records:
        first = graphs.problems[0]
        raise FactoryError(
            f"no record of the calibration graphs could be read ({len(graphs.problems)} left out; the first: "
            f"{first['file']} {first['location']}, field {first['field']}: {first['reason']}). The format is "
            "in factory/calibration/graphs.py and ../shared/external/README.md."
        )
