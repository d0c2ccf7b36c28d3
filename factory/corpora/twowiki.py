"""2WikiMultihopQA, official JSON list: _id, type, question, context, supporting_facts, evidences, answer, ..."""

from __future__ import annotations

from factory.corpora.base import RecordReader, make_question
from factory.corpora.hotpotqa import context_of

DATASET = "2wikimultihopqa"
ROUTES = {"comparison": "parallel", "bridge_comparison": "parallel", "compositional": "chain", "inference": "chain"}


def build(record: dict, where: str, source_file: str, cache: dict | None = None) -> tuple[dict, list]:
    reader = RecordReader(DATASET, record, where, "_id")
    qtype = reader.text("type")
    supporting = reader.pairs("supporting_facts", str, int)
    evidences = []
    for i, triple in enumerate(reader.get("evidences", list)):
        if not (isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)):
            reader.fail(f"evidences[{i}]", "expected [subject, relation, object] strings")
        evidences.append({"subject": triple[0], "relation": triple[1], "object": triple[2]})
    return make_question(
        reader,
        question=reader.text("question"),
        answers=[reader.get("answer", str)],
        qtype=qtype,
        route=ROUTES.get(qtype, "chain"),
        hops=max(2, len({t for t, _ in supporting})),
        context=context_of(reader),
        supporting=supporting,
        evidences=evidences,
        source_file=source_file,
        cache=cache,
    )
