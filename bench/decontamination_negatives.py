"""Negatives for the decontamination benches and tests: questions built from real templated records that no
rule may flag (bench/decontamination_cases.py lists every kind).

Only templated questions give negatives (every 2WikiMultihopQA type, HotpotQA comparisons): the case of a
template asked about other entities, or another comparison over the same entities. Each builder takes a
Question row, a ``random.Random`` and the set's ``Donors`` and returns (question, changed pool-row fields,
records a match with is no false positive), or None where it does not apply.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass

from factory.decontamination.rows import titles_of
from factory.utils.text import normalize_answer, normalize_question

# Question types whose text is a template filled with entities: every 2WikiMultihopQA type, HotpotQA's
# comparisons. The negatives are built from these (the case of a template asked about other entities).
TEMPLATED = {
    ("2wikimultihopqa", t) for t in ("comparison", "bridge_comparison", "compositional", "inference")
}
TEMPLATED.add(("hotpotqa", "comparison"))


def name_of(title: str) -> str:
    """A title as questions name it: without its disambiguation ("Nick Carter (musician)")."""
    return re.sub(r"\s*\([^)]*\)$", "", title).strip()


def named_titles(row: dict) -> list[str]:
    """The supporting titles whose name the question holds (case-insensitive), in question order."""
    q = row["question"].lower()
    found = [t for t in titles_of(row) if name_of(t) and name_of(t).lower() in q]
    return sorted(found, key=lambda t: q.index(name_of(t).lower()))


def _replace_name(question: str, old: str, new: str) -> str:
    return re.sub(re.escape(name_of(old)), lambda _: name_of(new), question, count=1, flags=re.I)


def distractor_titles(row: dict) -> list[str]:
    """The titles of the record's own non-supporting paragraphs (empty for a row without ``passages``)."""
    supporting = set(titles_of(row))
    return sorted({p["title"] for p in row.get("passages") or [] if p["title"] not in supporting})


def answer_kind(row: dict) -> str:
    return "yes/no" if normalize_answer(row["answers"][0]) in ("yes", "no") else "option"


def relations(row: dict) -> frozenset[str]:
    """What a 2WikiMultihopQA question compares (its evidence relations); empty for other datasets."""
    return frozenset(fact["relation"] for fact in row.get("evidences") or [])


def comparison_template(row: dict) -> str | None:
    """The question with its two named titles as {0} and {1}, for a comparison whose answer is yes/no or
    one of the two; None otherwise."""
    named = named_titles(row)
    if len(named) != 2 or (
        answer_kind(row) == "option"
        and normalize_answer(row["answers"][0]) not in {normalize_answer(name_of(t)) for t in named}
    ):
        return None
    q = row["question"].replace("{", "(").replace("}", ")")
    for i, t in enumerate(named):
        q = re.sub(re.escape(name_of(t)), f"{{{i}}}", q, count=1, flags=re.I)
    return q if "{0}" in q and "{1}" in q else None


@dataclass
class Donors:
    """What negatives swap in: named titles of other records by (dataset, qtype), with their record's id;
    the supporting titles of the whole set (a distractor swapped in must not be one); comparison templates
    by (dataset, answer kind), with their relations."""

    named: dict[tuple[str, str], list[tuple[str, str]]]
    supporting: set[str]
    templates: dict[tuple[str, str], list[tuple[str, frozenset[str]]]]

    @classmethod
    def of(cls, rows: list[dict]) -> Donors:
        named, templates = defaultdict(set), defaultdict(set)
        for row in rows:
            named[row["dataset"], row["qtype"]].update((t, row["question_id"]) for t in named_titles(row))
            template = comparison_template(row)
            if template:
                templates[row["dataset"], answer_kind(row)].add((template, relations(row)))
        supporting = {normalize_answer(name_of(t)) for row in rows for t in titles_of(row)}
        return cls(
            {k: sorted(v) for k, v in named.items()},
            supporting,
            {k: sorted(v, key=lambda tr: (tr[0], sorted(tr[1]))) for k, v in templates.items()},
        )

    def distractors(self, row: dict) -> list[str]:
        return [t for t in distractor_titles(row) if normalize_answer(name_of(t)) not in self.supporting]


Negative = tuple[str, dict, set[str]]  # (question, changed pool-row fields, records whose match is no FP)


def other_entity(row: dict, rng: random.Random, donors: Donors) -> Negative | None:
    return _swap(row, rng, donors, every=False)


def other_entities(row: dict, rng: random.Random, donors: Donors) -> Negative | None:
    return _swap(row, rng, donors, every=True)


def _swap(row: dict, rng: random.Random, donors: Donors, every: bool) -> Negative | None:
    """Named titles replaced by titles another record of the same dataset and type names. A match with that
    record is no false positive: the new question asks its template about that record's entity, which may
    well be the donor's own question reworded."""
    named = named_titles(row)
    own = {normalize_answer(name_of(t)) for t in titles_of(row)}
    pool = [
        (t, qid)
        for t, qid in donors.named.get((row["dataset"], row["qtype"]), [])
        if normalize_answer(name_of(t)) not in own
    ]
    olds = named if every else [rng.choice(named)] if named else []
    if not olds or len(pool) < len(olds) or (every and len(named) < 2):
        return None
    news = rng.sample(pool, len(olds))
    return (*_replaced(row, olds, [t for t, _ in news]), {qid for _, qid in news})


def similar_entity(row: dict, rng: random.Random, donors: Donors) -> Negative | None:
    """A named title replaced by one of the record's own distractor titles that no record of the set has as
    a supporting title: the dataset's retrieval chose them to look alike (other films of similar names,
    "Gerard I" / "Gerard II"), so this is the hardest negative."""
    named, pool = named_titles(row), donors.distractors(row)
    if not named or not pool:
        return None
    return (*_replaced(row, [rng.choice(named)], [rng.choice(pool)]), set())


def _replaced(row: dict, olds: list[str], news: list[str]) -> tuple[str, dict]:
    q, titles, answers = row["question"], titles_of(row), list(row["answers"])
    for old, new in zip(olds, news, strict=True):
        q = _replace_name(q, old, new)
        titles = [new if t == old else t for t in titles]
        answers = [
            name_of(new) if normalize_answer(a) == normalize_answer(name_of(old)) else a for a in answers
        ]
    return q, {"titles": titles, "answers": answers}


def other_question_same_chain(row: dict, rng: random.Random, donors: Donors) -> Negative | None:
    """Another record's comparison template (of another relation, where 2WikiMultihopQA states them) over
    this record's two entities, with this record's answer and titles: a different question that shares the
    chain key."""
    own = comparison_template(row)
    if own is None:
        return None
    same, rel = normalize_question(own), relations(row)
    others = [
        t
        for t, r in donors.templates.get((row["dataset"], answer_kind(row)), [])
        if normalize_question(t) != same and not (r and r == rel)
    ]
    if not others:
        return None
    names = [name_of(t) for t in named_titles(row)]
    return rng.choice(others).format(*names), {}, set()
