"""MuSiQue-Answerable, official JSONL: id, paragraphs, question, question_decomposition, answer,
answer_aliases, answerable.

Paragraphs are not sentence-split upstream; a deterministic rule splitter provides ``sentences``.
Supporting facts are whole paragraphs (``is_supporting``), recorded with sent_idx = -1. Every
MuSiQue question is a chain (each hop needs the previous answer).
"""

from __future__ import annotations

from typing import Any

from factory.corpora.base import RecordReader
from factory.corpora.corpus import Corpus, as_is, field_of
from factory.corpora.pool import PassagePool
from factory.corpora.question import make_question

DATASET = "musique"
ID_FIELD = "id"


def build(record: dict, where: str, source_file: str, pool: PassagePool) -> dict:
    reader = RecordReader(DATASET, record, where, ID_FIELD)
    if reader.get("answerable", bool, optional=True) is False:
        reader.fail("answerable", "unanswerable question (MuSiQue-Full); only answerable ones are ingested")
    context, support_idx = [], []
    paragraphs = reader.get("paragraphs", list)
    if not paragraphs:
        reader.fail("paragraphs", "empty")
    for i, p in enumerate(paragraphs):
        if not isinstance(p, dict):
            reader.fail(f"paragraphs[{i}]", "expected an object")
        title, text = p.get("title"), p.get("paragraph_text")
        if not isinstance(title, str) or not isinstance(text, str):
            reader.fail(f"paragraphs[{i}]", "title and paragraph_text must be strings")
        if not isinstance(p.get("is_supporting"), bool):
            reader.fail(f"paragraphs[{i}].is_supporting", "missing or not a boolean")
        context.append((title, text))
        if p["is_supporting"]:
            support_idx.append(i)
    decomposition = []
    for i, step in enumerate(reader.get("question_decomposition", list)):
        if (
            not isinstance(step, dict)
            or not isinstance(step.get("question"), str)
            or not isinstance(step.get("answer"), str)
        ):
            reader.fail(
                f"question_decomposition[{i}]", "expected {id, question, answer, paragraph_support_idx}"
            )
        support = step.get("paragraph_support_idx")
        if support is not None and not (isinstance(support, int) and 0 <= support < len(paragraphs)):
            reader.fail(
                f"question_decomposition[{i}].paragraph_support_idx", f"{support!r} is not a paragraph index"
            )
        decomposition.append(
            {
                "id": str(step.get("id")),
                "question": step["question"],
                "answer": step["answer"],
                "paragraph_support_idx": support,
            }
        )
    aliases = reader.get("answer_aliases", list, optional=True) or []
    if not all(isinstance(a, str) for a in aliases):
        reader.fail("answer_aliases", "aliases must be strings")
    qtype = reader.id.split("__", 1)[0] if "__" in reader.id else "musique"
    return make_question(
        reader,
        question=reader.text("question"),
        answers=[reader.get("answer", str), *aliases],
        qtype=qtype,
        route="chain",
        hops=max(2, len(decomposition)),
        pool=pool,
        entries=pool.texts_of(DATASET, context),
        supporting_idx=support_idx,
        decomposition=decomposition,
        source_file=source_file,
        paragraph_field="paragraphs[{}].paragraph_text",
        hops_field="question_decomposition",
    )


def question_type(record: Any) -> str | None:
    """The id's prefix ("2hop__128", "3hop1__..." -> "2hop", "3hop1"): MuSiQue has no type field."""
    if isinstance(record, dict):
        return str(record.get(ID_FIELD, "")).split("__", 1)[0] or None
    return field_of(record, "type")  # an unreadable record: none


CORPUS = Corpus(
    name=DATASET,
    title="MuSiQue",
    build=build,
    record_type=None,  # JSON Lines, read as dicts
    id_field=ID_FIELD,
    question_type=question_type,
    gold="decomposition",
    license="cc-by-4.0",
    license_name="CC BY 4.0",
    share_alike=False,
    source="MuSiQue-Answerable, https://github.com/StonyBrookNLP/musique",
    hub_row=as_is,  # dgslibisey/MuSiQue holds the official JSONL files
)
