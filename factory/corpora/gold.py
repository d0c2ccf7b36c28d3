"""The gold annotation of a Question row, read by its corpus's kind: the one reader the scripted policy
(``factory.agent.scripted``) and the simulator (``factory.simulate.facts``) share.

Every ingested question has supporting facts (``make_question`` quarantines a record without). Its
corpus's ``gold`` (``factory.corpora.corpus.GoldKind``) says which richer annotation its rows carry:
``evidences`` triplets or ``decomposition`` steps. The one fallback: a row whose own annotation of that
kind is empty (an upstream record with no triplets or steps) is read by its supporting facts, like a
``supporting_facts`` corpus. A dataset the registry does not know is an error (``UnknownCorpus``),
never an empty list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from factory.corpora import corpus
from factory.corpora.corpus import GoldKind

# The Question row's field holding each kind of annotation.
FIELDS: dict[GoldKind, str] = {
    "supporting_facts": "supporting",
    "evidences": "evidences",
    "decomposition": "decomposition",
}


class Gold(NamedTuple):
    """A question's gold annotation: its kind and the row's entries of that kind (as the row holds them)."""

    kind: GoldKind
    items: list


def gold_of(question: Mapping) -> Gold:
    """The question's gold annotation by its corpus's kind (the fallback: the module docstring)."""
    kind = corpus(question["dataset"], f"question {question.get('question_id', '?')}").gold
    items = list(question.get(FIELDS[kind]) or [])
    if not items and kind != "supporting_facts":
        kind, items = "supporting_facts", list(question.get(FIELDS["supporting_facts"]) or [])
    return Gold(kind, items)
