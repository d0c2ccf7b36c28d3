"""2WikiMultihopQA, official JSON list: the HotpotQA format plus ``evidences`` (gold triplets)."""

from __future__ import annotations

from factory.corpora import hotpotqa
from factory.corpora.base import RecordReader, RecordRef
from factory.corpora.corpus import Corpus, type_field
from factory.corpora.pool import PassagePool

DATASET = "2wikimultihopqa"
ROUTES = {
    "comparison": "parallel",
    "bridge_comparison": "parallel",
    "compositional": "chain",
    "inference": "chain",
}
# The evidence triplets stored as parallel columns: (subject, relation, object) by name or, in
# ohjoonhee/2WikiMultihopQA, as (fact, relation, entity). A dict with neither set of columns stays as it
# is, and the builder quarantines the record naming the field.
EVIDENCE_COLUMNS = (("subject", "relation", "object"), ("fact", "relation", "entity"))


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


def hub_row(row: dict) -> dict:
    """A hub row (``ohjoonhee/2WikiMultihopQA``: HotpotQA's hub layout plus ``evidences`` as parallel
    columns, or as {subject, relation, object} objects) -> the official record."""
    row = hotpotqa.hub_row(row)
    ev = row.get("evidences")
    columns = next((c for c in EVIDENCE_COLUMNS if isinstance(ev, dict) and set(c) <= set(ev)), None)
    if columns is not None:
        row["evidences"] = [list(t) for t in zip(*(ev[k] for k in columns), strict=False)]
    elif isinstance(ev, list):
        row["evidences"] = [
            [e["subject"], e["relation"], e["object"]] if isinstance(e, dict) else e for e in ev
        ]
    return row


CORPUS = Corpus(
    name=DATASET,
    title="2WikiMultihopQA",
    build=build,
    record_type=Record,
    id_field=hotpotqa.ID_FIELD,
    question_type=type_field,
    gold="evidences",
    license="apache-2.0",
    license_name="Apache-2.0",
    share_alike=False,
    source="2WikiMultihopQA, https://github.com/Alab-NII/2wikimultihop",
    hub_row=hub_row,
)
