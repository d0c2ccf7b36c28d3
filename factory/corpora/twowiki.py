"""2WikiMultihopQA, official JSON list: the HotpotQA format plus ``evidences`` (gold triplets)."""

from __future__ import annotations

from factory.corpora import hotpotqa
from factory.corpora.base import RecordReader, RecordRef
from factory.corpora.pool import PassagePool

DATASET = "2wikimultihopqa"
ROUTES = {
    "comparison": "parallel",
    "bridge_comparison": "parallel",
    "compositional": "chain",
    "inference": "chain",
}


class Record(hotpotqa.Record, kw_only=True):
    """The official record, typed (see ``hotpotqa.Record``)."""

    evidences: list[tuple[str, str, str]]


def _evidences(reader: RecordRef, record: dict | Record) -> dict:
    if isinstance(record, Record):
        return {"evidences": [{"subject": s, "relation": r, "object": o} for s, r, o in record.evidences]}
    assert isinstance(reader, RecordReader)
    evidences = []
    for i, triple in enumerate(reader.get("evidences", list)):
        if not (isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)):
            reader.fail(f"evidences[{i}]", "expected [subject, relation, object] strings")
        evidences.append({"subject": triple[0], "relation": triple[1], "object": triple[2]})
    return {"evidences": evidences}


def build(record: dict | Record, where: str, source_file: str, pool: PassagePool) -> dict:
    return hotpotqa.build(record, where, source_file, pool, dataset=DATASET, routes=ROUTES, extra=_evidences)
