"""HotpotQA (distractor setting), official JSON list: _id, answer, question, supporting_facts, context, type, level."""

from __future__ import annotations

from factory.corpora.base import RecordReader, make_question

DATASET = "hotpotqa"
ROUTES = {"comparison": "parallel", "bridge": "chain"}


def context_of(reader: RecordReader) -> list[tuple[str, list[str]]]:
    context = reader.pairs("context", str, list)
    for i, (_, sentences) in enumerate(context):
        try:
            "".join(sentences)  # C-speed check that every sentence is a string
        except TypeError:
            reader.fail(f"context[{i}]", "sentences must be strings")
    if not context:
        reader.fail("context", "empty context")
    return context


def build(record: dict, where: str, source_file: str, cache: dict | None = None, dataset: str = DATASET) -> tuple[dict, list]:
    reader = RecordReader(dataset, record, where, "_id")
    qtype = reader.text("type")
    supporting = reader.pairs("supporting_facts", str, int)
    return make_question(
        reader,
        question=reader.text("question"),
        answers=[reader.get("answer", str)],
        qtype=qtype,
        route=ROUTES.get(qtype, "chain"),
        hops=max(2, len({t for t, _ in supporting})),
        context=context_of(reader),
        supporting=supporting,
        level=reader.get("level", str, optional=True),
        source_file=source_file,
        cache=cache,
    )
