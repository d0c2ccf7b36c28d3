"""HotpotQA (distractor setting), official JSON list: _id, answer, question, supporting_facts, context, type,
level."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from factory.corpora.base import RecordReader, RecordRef
from factory.corpora.corpus import Corpus, type_field
from factory.corpora.hf import zip_columns
from factory.corpora.pool import PassagePool
from factory.corpora.question import make_question

DATASET = "hotpotqa"
ID_FIELD = "_id"
ROUTES = {"comparison": "parallel", "bridge": "chain"}


class Record(msgspec.Struct, kw_only=True):
    """The official record, typed (``read_json_records`` decodes a whole file into these when every
    record fits; unknown fields are ignored). 2WikiMultihopQA extends it. Sentences stay raw JSON:
    the pool decodes each distinct paragraph once."""

    _id: str
    question: str
    answer: str
    type: str
    supporting_facts: list[tuple[str, int]]
    context: list[tuple[str, msgspec.Raw]]  # [title, sentences]
    level: str | None = None


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


def typed_ref(dataset: str, record: Record, where: str) -> RecordRef:
    """The checks the types cannot make (non-empty strings, a context), in the untyped path's order."""
    ref = RecordRef(dataset, record._id, where)
    if not record._id.strip():
        ref.id = "?"
        ref.fail("_id", "missing or not a non-empty string")
    for key in ("type", "question"):
        if not getattr(record, key).strip():
            ref.fail(key, "empty")
    if not record.context:
        ref.fail("context", "empty context")
    return ref


def build(
    record: dict | Record,
    where: str,
    source_file: str,
    pool: PassagePool,
    dataset: str = DATASET,
    routes: dict[str, str] = ROUTES,
    extra: Callable[[RecordRef, dict | Record], dict] | None = None,
) -> dict:
    """A question row from one record of the HotpotQA format (typed or raw); its paragraphs go to ``pool``.

    ``dataset`` and ``routes`` let formats that share it (2WikiMultihopQA, HF copies) reuse it;
    ``extra(reader, record)`` returns their additional Question fields.
    """
    if isinstance(record, Record):
        reader = typed_ref(dataset, record, where)
        qtype, supporting, question, answer = (
            record.type,
            record.supporting_facts,
            record.question,
            record.answer,
        )
        titles, sentences = zip(*record.context, strict=True)  # typed_ref checked that there is a context
        entries, level = pool.raw(reader, titles, sentences), record.level
    else:
        reader = RecordReader(dataset, record, where, ID_FIELD)
        qtype = reader.text("type")
        supporting = reader.pairs("supporting_facts", str, int)
        question, answer = reader.text("question"), reader.get("answer", str)
        entries, level = pool.pairs(dataset, context_of(reader)), reader.get("level", str, optional=True)
    return make_question(
        reader,
        question=question,
        answers=[answer],
        qtype=qtype,
        route=routes.get(qtype, "chain"),
        hops=max(2, len({t for t, _ in supporting})),
        pool=pool,
        entries=entries,
        supporting=supporting,
        level=level,
        source_file=source_file,
        **(extra(reader, record) if extra else {}),
    )


def hub_row(row: dict) -> dict:
    """A hub row of the HotpotQA layout (``hotpotqa/hotpot_qa``: ``id``, ``context {title, sentences}``,
    ``supporting_facts {title, sent_id}``) -> the official record; 2WikiMultihopQA's copy shares it."""
    row = dict(row)
    if "_id" not in row and "id" in row:
        row["_id"] = row.pop("id")
    row["context"] = zip_columns(row.get("context"), "title", ("sentences", "content"))
    row["supporting_facts"] = zip_columns(row.get("supporting_facts"), "title", ("sent_id", "sent_idx"))
    return row


CORPUS = Corpus(
    name=DATASET,
    title="HotpotQA",
    build=build,
    record_type=Record,
    id_field=ID_FIELD,
    question_type=type_field,
    gold="supporting_facts",
    license="cc-by-sa-4.0",
    license_name="CC BY-SA 4.0",
    share_alike=True,
    source="hotpot_qa (distractor setting), https://hotpotqa.github.io",
    hub_row=hub_row,
)
