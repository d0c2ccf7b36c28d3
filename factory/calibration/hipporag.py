"""A calibration graph file from public files: HippoRAG's published OpenIE output and MuSiQue's records.

HippoRAG (github.com/OSU-NLP-Group/HippoRAG, MIT license) published the triples gpt-3.5-turbo-1106
extracted from MuSiQue passages (named-entity recognition, then triple extraction, one passage at a
time; the question was not in the prompt). At commit 3d95d255a8db0c1699b853cfb4fbe5056708162d,
``output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json`` holds them for the 1,890
passages of 100 MuSiQue-Answerable train questions (``{"docs": [{title, text, passage,
extracted_entities, extracted_triples}]}``), and ``data/musique_train.json`` those questions' official
records (also in MuSiQue's ``musique_ans_v1.0_train.jsonl``, CC BY 4.0).

``convert`` matches each record's paragraphs to the OpenIE passages by title and whitespace-collapsed
text and writes the record in the shape ``factory.calibration.graphs`` reads: every paragraph with its
``is_supporting``, every extracted triple with exactly three string (or number) fields as a triplet of
its paragraph (strings whitespace-collapsed, nothing else changed: no entity resolution). A record with
a paragraph the OpenIE output lacks is left out with the reason; so is one whose records file is not
MuSiQue's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from factory.corpora import musique
from factory.corpora.files import Unreadable, read_json_records
from factory.utils.errors import FactoryError

SOURCE = (
    "OSU-NLP-Group/HippoRAG@3d95d255a8db0c1699b853cfb4fbe5056708162d: "
    "output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"
)
EXTRACTOR = (
    "gpt-3.5-turbo-1106 (HippoRAG OpenIE: NER then triple extraction per passage; "
    "OSU-NLP-Group/HippoRAG@3d95d255a8db0c1699b853cfb4fbe5056708162d)"
)
CONVERSION = "as extracted (HippoRAG extracted_triples); non-3-field triples dropped"
_SPACE = re.compile(r"\s+")


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def read_openie(path: str | Path) -> dict[tuple[str, str], list]:
    """(title, collapsed text) -> the passage's extracted triples, from HippoRAG's OpenIE JSON."""
    try:
        docs = json.loads(Path(path).read_text(encoding="utf-8"))["docs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FactoryError(
            f"{path}: not HippoRAG's OpenIE output (a JSON object with a 'docs' list; {type(exc).__name__}: "
            f"{exc}). Take output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json of {SOURCE}."
        ) from None
    return {(_collapse(d["title"]), _collapse(d["text"])): d.get("extracted_triples") or [] for d in docs}


def _triple(raw: object) -> tuple[str, str, str] | None:
    if not isinstance(raw, list | tuple) or len(raw) != 3:
        return None
    if not all(isinstance(x, str | int | float) and not isinstance(x, bool) for x in raw):
        return None
    fields = tuple(_collapse(str(x)) for x in raw)
    return fields if all(fields) else None


def convert_record(record: Mapping, openie: Mapping[tuple[str, str], list], split: str) -> dict:
    """One official MuSiQue record with its paragraphs' triples (module docstring); ``ValueError`` names
    what is missing."""
    for key in ("id", "paragraphs", "question", "answer"):
        if key not in record:
            raise ValueError(f"{key}: missing (not a MuSiQue record)")
    qid = f"{musique.DATASET}/{record['id']}"
    passages, triplets = [], []
    for p in record["paragraphs"]:
        key = (_collapse(p["title"]), _collapse(p["paragraph_text"]))
        if key not in openie:
            raise ValueError(f"paragraphs[{p['idx']}]: {p['title']!r} is not among the OpenIE passages")
        passages.append(
            {
                "passage_index": p["idx"],
                "title": p["title"],
                "text": p["paragraph_text"],
                "is_supporting": bool(p["is_supporting"]),
            }  # fmt: skip
        )
        for raw in openie[key]:
            fields = _triple(raw)
            if fields is not None:
                triplets.append(
                    {
                        "triplet_id": f"t{len(triplets):04d}",
                        "subject": fields[0],
                        "relation": fields[1],
                        "object": fields[2],
                        "passage_index": p["idx"],
                        "passage_title": p["title"],
                        "sentence_index": None,
                    }  # fmt: skip
                )
    supporting = [p for p in passages if p["is_supporting"]]
    return {
        "question_id": qid,
        "dataset": musique.DATASET,
        "split": split,
        "type": str(record["id"]).split("__", 1)[0],
        "question": record["question"],
        "answers": [record["answer"], *(record.get("answer_aliases") or [])],
        "passages": passages,
        "supporting_passage_indices": [p["passage_index"] for p in supporting],
        "supporting_titles": [p["title"] for p in supporting],
        "triplets": triplets,
        "question_entities_llm": None,
        "supporting_facts": None,
        "extractor": EXTRACTOR,
        "conversion": CONVERSION,
    }


def convert(
    openie_path: str | Path, record_files: Iterable[str | Path], split: str = "train"
) -> tuple[list, list]:
    """(graph records, left out: {file, location, question_id, reason}) for every record of
    ``record_files`` whose paragraphs the OpenIE output covers."""
    openie = read_openie(openie_path)
    records, left_out = [], []
    for path in map(Path, record_files):
        for location, raw in read_json_records(path):
            rid = raw.get("id", "?") if isinstance(raw, dict) else "?"
            try:
                if isinstance(raw, Unreadable):
                    raise ValueError(f"{raw.field}: {raw.reason}")
                records.append(convert_record(raw, openie, split))
            except (ValueError, KeyError, TypeError) as exc:
                left_out.append(
                    {"file": str(path), "location": location, "question_id": rid, "reason": str(exc)}
                )
    return records, left_out
