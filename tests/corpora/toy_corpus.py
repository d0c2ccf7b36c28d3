"""Toy Trails: a made-up fourth corpus, to prove that a corpus is one module with one contract.

Its records have a shape no real corpus has (JSON Lines): ``trail_id``, ``kind``, ``ask``, ``reply``,
``stops`` (``[{place, notes}]``, the paragraphs) and ``path`` (the positions of the stops the answer
follows, its supporting paragraphs). Registering it is one entry in ``factory.corpora.CORPORA``
(``tests/corpora/test_a_fourth_corpus.py`` adds it with monkeypatch); nothing else in the factory
changes.
"""

from __future__ import annotations

from typing import Any

from factory.corpora.base import RecordReader
from factory.corpora.corpus import Corpus, as_is, field_of
from factory.corpora.pool import PassagePool
from factory.corpora.question import make_question

DATASET = "toytrails"
ID_FIELD = "trail_id"


def build(record: dict, where: str, source_file: str, pool: PassagePool) -> dict:
    """A Question row from one Toy Trails record; a bad field raises BadRecord naming it."""
    reader = RecordReader(DATASET, record, where, ID_FIELD)
    stops = reader.get("stops", list)
    context = []
    for i, stop in enumerate(stops):
        if not (isinstance(stop, dict) and all(isinstance(stop.get(k), str) for k in ("place", "notes"))):
            reader.fail(f"stops[{i}]", "expected {place, notes} strings")
        context.append((stop["place"], stop["notes"]))
    path = reader.get("path", list)
    for i, at in enumerate(path):
        if not (isinstance(at, int) and 0 <= at < len(stops)):
            reader.fail(f"path[{i}]", f"{at!r} is not a stop's position")
    return make_question(
        reader,
        question=reader.text("ask"),
        answers=[reader.get("reply", str)],
        qtype=reader.text("kind"),
        route="chain",
        hops=max(2, len(path)),
        pool=pool,
        entries=pool.texts_of(DATASET, context),
        supporting_idx=path,
        source_file=source_file,
        paragraph_field="stops[{}].notes",
        hops_field="path",
    )


def question_type(record: Any) -> str | None:
    return field_of(record, "kind")


CORPUS = Corpus(
    name=DATASET,
    title="Toy Trails",
    build=build,
    record_type=None,
    id_field=ID_FIELD,
    question_type=question_type,
    gold="supporting_facts",
    license="cc-by-sa-3.0",
    license_name="CC BY-SA 3.0",
    share_alike=True,
    source="Toy Trails (a test corpus), https://example.org/toy-trails",
    hub_row=as_is,
)
