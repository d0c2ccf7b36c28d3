"""2WikiMultihopQA, official JSON list: _id, type, question, context, supporting_facts, evidences, answer, ..."""

from __future__ import annotations

import msgspec

from factory.corpora.base import RecordReader, make_question
from factory.corpora.hotpotqa import context_of, typed_ref

DATASET = "2wikimultihopqa"
ROUTES = {"comparison": "parallel", "bridge_comparison": "parallel", "compositional": "chain", "inference": "chain"}


class Record(msgspec.Struct):
    """The official record, typed (see ``hotpotqa.Record``)."""

    _id: str
    question: str
    answer: str
    type: str
    supporting_facts: list[tuple[str, int]]
    context: list[tuple[str, list[str]]]
    evidences: list[tuple[str, str, str]]


def build(record: dict | Record, where: str, source_file: str, cache: dict | None = None) -> tuple[dict, list]:
    if isinstance(record, Record):
        reader = typed_ref(DATASET, record, where)
        qtype, supporting, question, answer, context = record.type, record.supporting_facts, record.question, record.answer, record.context
        evidences = [{"subject": s, "relation": r, "object": o} for s, r, o in record.evidences]
    else:
        reader = RecordReader(DATASET, record, where, "_id")
        qtype = reader.text("type")
        supporting = reader.pairs("supporting_facts", str, int)
        evidences = []
        for i, triple in enumerate(reader.get("evidences", list)):
            if not (isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)):
                reader.fail(f"evidences[{i}]", "expected [subject, relation, object] strings")
            evidences.append({"subject": triple[0], "relation": triple[1], "object": triple[2]})
        question, answer, context = reader.text("question"), reader.get("answer", str), context_of(reader)
    return make_question(
        reader,
        question=question,
        answers=[answer],
        qtype=qtype,
        route=ROUTES.get(qtype, "chain"),
        hops=max(2, len({t for t, _ in supporting})),
        context=context,
        supporting=supporting,
        evidences=evidences,
        source_file=source_file,
        cache=cache,
    )
