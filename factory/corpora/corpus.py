"""The contract of a corpus: what the rest of the factory asks a dataset module for.

Each dataset module (``factory/corpora/hotpotqa.py``, ``twowiki.py``, ``musique.py``) defines one
module-level ``CORPUS = Corpus(...)``; ``factory.corpora.CORPORA`` names the module, and
``factory.corpora.corpus(name)`` imports it when first asked. Ingest, the Hugging Face reader, the gold
readers of the scripted policy and the simulator, and the published cards ask the ``Corpus``, never
the dataset's name (docs/development.md#adding-a-corpus).

This module imports nothing but the standard library and the error classes: every caller of the
registry (``factory.corpora.corpus``) imports it, ``factory.names`` among them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from factory.utils.errors import FactoryError

# The gold annotations a Question row can carry beyond its supporting facts, one reader each in
# factory.corpora.gold: "supporting_facts" (the supporting sentences, or paragraphs, only: HotpotQA),
# "evidences" ((subject, relation, object) triplets: 2WikiMultihopQA), "decomposition" (sub-question
# steps with their answers and supporting paragraph: MuSiQue).
GoldKind = Literal["supporting_facts", "evidences", "decomposition"]
GOLD_KINDS: tuple[str, ...] = get_args(GoldKind)


@dataclass(frozen=True)
class Corpus:
    """One dataset's answers to what ingest, retrieval, the gold readers and publishing ask of it."""

    # The dataset id: the key under `corpora` in params.yaml, Question rows' `dataset`, the pid prefix.
    name: str
    # How people write its name (the dataset card, messages), e.g. "HotpotQA".
    title: str
    # (record, location, source file name, PassagePool) -> a Question row; raises BadRecord naming the field.
    build: Callable[..., dict]
    # The official record as a msgspec Struct (a file whose records all fit decodes typed); None: dicts.
    record_type: type | None
    # The record's id field, named when a record is quarantined for a duplicate id ("_id", "id").
    id_field: str
    # A record (raw, typed or unreadable) -> its question type as metrics/ingest.json counts it read.
    question_type: Callable[[Any], str | None]
    # Which gold annotation its rows carry (GoldKind): what the scripted policy and the simulator read.
    gold: GoldKind
    # The licence as a Hugging Face Hub licence id ("cc-by-sa-4.0"): the published cards inherit it.
    license: str
    # The licence as people write it ("CC BY-SA 4.0"), for the card's prose.
    license_name: str
    # Whether derived data must be shared alike (the card says so).
    share_alike: bool
    # The citation the card's source_datasets lists: the name and where it comes from.
    source: str
    # A Hugging Face row (hub layout) -> the official record layout `build` reads (ingest.hf sources).
    hub_row: Callable[[dict], dict]

    def __post_init__(self) -> None:
        if self.gold not in GOLD_KINDS:
            raise FactoryError(
                f"corpus {self.name}: gold {self.gold!r} is not a kind of gold annotation the factory reads "
                f"({', '.join(GOLD_KINDS)}). Give its CORPUS the kind its rows carry, or add the new kind to "
                "GoldKind in factory/corpora/corpus.py with its reader in factory/agent/scripted.py and "
                "factory/simulate/facts.py (docs/development.md#adding-a-corpus)"
            )


def field_of(record: Any, key: str) -> Any:
    """A field of a raw (dict) or typed record; None when it has none (an unreadable record)."""
    return record.get(key) if isinstance(record, dict) else getattr(record, key, None)


def type_field(record: Any) -> str | None:
    """The question type of a format that states it in a ``type`` field (HotpotQA and its kin)."""
    return field_of(record, "type")


def as_is(row: dict) -> dict:
    """A hub row that already is the official record (a hub copy of the official files)."""
    return dict(row)
