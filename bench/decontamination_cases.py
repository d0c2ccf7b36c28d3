"""Contaminated questions and hard negatives built by code from real evaluation records (Question rows), for
bench/decontamination_rules.py and tests/decontamination.

Every builder takes a Question row and a ``random.Random`` and returns the new question's raw text, or None
where it does not apply to that question (no hyphen to split, no title in the question). ``build_cases``
turns them into ``Case`` rows: a pool row (``factory.decontamination.pool_row`` layout) that keeps the
record's answers and supporting titles unless the kind changes them, the record it was built from, and the
rule expected to flag it (None: a negative, which no rule may flag).

The kinds, by the rule that should catch them:

- ``exact`` (equal after normalisation): ``case`` (upper/lower/swapped case), ``punctuation`` (the question
  mark dropped, commas and quotes added between words), ``articles`` (articles dropped, "the" added).
- ``near_duplicate``, surface edits: ``typo`` (one character swapped, dropped, doubled or replaced in a word
  of 4+ letters, names included), ``two_typos``, ``dropped_word``, ``added_word`` ("also", "actually", ...),
  ``changed_word`` (a function or template word replaced: was/is, did/does, film/movie, in/at, ...),
  ``split_word`` (a hyphenated word split, or a possessive 's dropped: "Mathew's" -> "Mathew").
- ``near_duplicate``, rewording (rule-based paraphrases): ``question_word`` ("What year" -> "In which year",
  "Who is" -> "Who's", "Where was" -> "In which place was", "How many" -> "What number of", "Which" <->
  "What", ...), ``template_synonym`` (template words: "film" <-> "movie", "came out" -> "was released",
  "died" -> "passed away", "nationality" -> "citizenship", "place of birth" -> "birthplace", ...),
  ``clause_reorder`` (the two sides of a comma swapped, the two entities named swapped: "A or B" -> "B or
  A", a trailing "in <Name>" moved to the front), ``reworded_twice`` (two of those families at once).
- ``same_chain`` (new wording, same answer and supporting titles): ``templated_restatement`` ("Which answer
  connects T1 and T2?"), ``from_decomposition`` (MuSiQue: the question rebuilt from its decomposition,
  "What is the capital of the located in the administrative territorial entity of Van Hook Township?"),
  ``from_evidences`` (2WikiMultihopQA: rebuilt from its evidence triplets, "What is the place of birth of
  the director of A Day of Roses in August?").
- negatives (None), built by bench/decontamination_negatives.py from templated questions only (every
  2WikiMultihopQA type, HotpotQA comparisons):
  ``other_entity`` (one supporting title named in the question replaced by a title that another record of
  the same type names: the template about another entity), ``other_entities`` (every named title replaced
  so), ``similar_entity`` (one replaced by the title of one of the record's own distractor paragraphs that
  no record of the set is about: look-alike names, the hardest), ``other_question_same_chain`` (another
  record's comparison template, of another relation, over the same two entities with the same answer: "Were
  A and B of the same nationality?" -> "Are A and B both directors?"; same answer and titles, a different
  question).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from bench.decontamination_negatives import (
    TEMPLATED,
    Donors,
    name_of,
    named_titles,
    other_entities,
    other_entity,
    other_question_same_chain,
    similar_entity,
)
from factory.decontamination.rows import pool_row, titles_of
from factory.utils.text import normalize_answer, normalize_question

ADDED_WORDS = ("also", "actually", "exactly", "really", "originally", "ever", "still")
CHANGED_WORDS = {
    "was": "is",
    "is": "was",
    "did": "does",
    "does": "did",
    "were": "are",
    "are": "were",
    "in": "at",
    "at": "in",
    "film": "movie",
    "movie": "film",
    "city": "town",
    "who": "whom",
    "first": "earliest",
    "country": "nation",
    "of": "from",
    "has": "had",
    "had": "has",
}
QUESTION_WORDS = [  # (pattern at the start, replacement)
    (r"what year", "In which year"),
    (r"in what year", "What year"),
    (r"in which year", "What year"),
    (r"who is", "Who's"),
    (r"what is", "What's"),
    (r"where is", "Where's"),
    (r"who was", "Which person was"),
    (r"where was", "In which place was"),
    (r"where did", "In which place did"),
    (r"when was", "At what time was"),
    (r"when did", "At what time did"),
    (r"how many", "What number of"),
    (r"which", "What"),
    (r"what (?!is\b|was\b|year\b)", "Which "),
    (r"who", "Which person"),
]
TEMPLATE_SYNONYMS = [
    (r"\bfilm\b", "movie"),
    (r"\bmovie\b", "film"),
    (r"\bcame out\b", "was released"),
    (r"\bwas released\b", "came out"),
    (r"\bdied\b", "passed away"),
    (r"\bnationality\b", "citizenship"),
    (r"\bplace of birth\b", "birthplace"),
    (r"\bplace of death\b", "place where they died"),
    (r"\bdate of birth\b", "birth date"),
    (r"\bdate of death\b", "death date"),
    (r"\blocated\b", "situated"),
    (r"\bfounded\b", "established"),
    (r"\bstarred\b", "appeared"),
    (r"\bwrote\b", "authored"),
    (r"\bthe same country\b", "one country"),
    (r"\bdirected\b", "made"),
    (r"\bearlier\b", "sooner"),
    (r"\bolder\b", "born earlier"),
    (r"\bwhich is\b", "that is"),
    (r"\bthat\b", "which"),
    (r"\bthe name of\b", "the title of"),
    (r"\bborn first\b", "born earlier"),
    (r"\bknown as\b", "called"),
]
RESTATEMENTS = (
    "Which answer connects {titles}?",
    "Going from {titles}, what is the answer?",
    "What do {titles} lead to?",
)


def _words(text: str) -> list[str]:
    return text.split()


def _letters(word: str) -> int:
    return sum(ch.isalpha() for ch in word)


# -- exact --------------------------------------------------------------------------------------------


def case(row: dict, rng: random.Random) -> str | None:
    q = row["question"]
    return rng.choice([q.upper(), q.lower(), q.swapcase()])


def punctuation(row: dict, rng: random.Random) -> str | None:
    words = _words(row["question"].rstrip("?").rstrip())
    i = rng.randrange(len(words))
    words[i] = f'"{words[i]}"'
    j = rng.randrange(len(words))
    words[j] = words[j] + ","
    return " ".join(words)


def articles(row: dict, rng: random.Random) -> str | None:
    q = row["question"]
    if re.search(r"\b(the|a|an)\b", q, re.I) and rng.random() < 0.5:
        return re.sub(r"\s*\b(the|a|an)\b\s*", " ", q, flags=re.I).strip()
    words = _words(q)
    i = rng.randrange(1, len(words)) if len(words) > 1 else 0
    return " ".join(words[:i] + ["the"] + words[i:])


# -- surface edits ------------------------------------------------------------------------------------


def _typo_word(word: str, rng: random.Random) -> str:
    positions = [i for i, ch in enumerate(word) if ch.isalpha()]
    i = rng.choice(positions[1:-1] or positions)
    op = rng.choice(("swap", "drop", "double", "replace"))
    if op == "swap" and i + 1 < len(word) and word[i + 1].isalpha() and word[i + 1] != word[i]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == "drop":
        return word[:i] + word[i + 1 :]
    if op == "double":
        return word[: i + 1] + word[i] + word[i + 1 :]
    letters = [ch for ch in "aeioustnrl" if ch != word[i].lower()]
    return word[:i] + rng.choice(letters) + word[i + 1 :]


def _typos(row: dict, rng: random.Random, n: int) -> str | None:
    words = _words(row["question"])
    spots = [i for i, w in enumerate(words) if _letters(w) >= 4]
    if len(spots) < n:
        return None
    for i in rng.sample(spots, n):
        words[i] = _typo_word(words[i], rng)
    return " ".join(words)


def typo(row: dict, rng: random.Random) -> str | None:
    return _typos(row, rng, 1)


def two_typos(row: dict, rng: random.Random) -> str | None:
    return _typos(row, rng, 2)


def dropped_word(row: dict, rng: random.Random) -> str | None:
    words = _words(row["question"])
    spots = [i for i, w in enumerate(words[1:], 1) if normalize_answer(w)]  # not an article alone
    if len(words) < 6 or not spots:
        return None
    i = rng.choice(spots)
    return " ".join(words[:i] + words[i + 1 :])


def added_word(row: dict, rng: random.Random) -> str | None:
    words = _words(row["question"])
    i = rng.randrange(1, len(words)) if len(words) > 1 else 1
    return " ".join(words[:i] + [rng.choice(ADDED_WORDS)] + words[i:])


def changed_word(row: dict, rng: random.Random) -> str | None:
    words = _words(row["question"])
    spots = [i for i, w in enumerate(words) if w.lower() in CHANGED_WORDS]
    if not spots:
        return None
    i = rng.choice(spots)
    new = CHANGED_WORDS[words[i].lower()]
    words[i] = new.capitalize() if words[i][0].isupper() else new
    return " ".join(words)


def split_word(row: dict, rng: random.Random) -> str | None:
    q = row["question"]
    spots = [m for m in re.finditer(r"\w-\w|\w's\b", q)]
    if not spots:
        return None
    m = rng.choice(spots)
    if "-" in m.group():
        return q[: m.start() + 1] + " " + q[m.start() + 2 :]
    return q[: m.start() + 1] + q[m.end() :]


# -- rewording ----------------------------------------------------------------------------------------


def _sub_first(q: str, pattern: str, repl: str) -> str | None:
    new = re.sub(pattern, repl, q, count=1, flags=re.I)
    return new if new != q else None


def question_word(row: dict, rng: random.Random) -> str | None:
    q = row["question"].strip()
    for pattern, repl in QUESTION_WORDS:
        new = _sub_first(q, "^" + pattern, repl)
        if new:
            return new
    return None


def template_synonym(row: dict, rng: random.Random) -> str | None:
    q = row["question"]
    found = [(p, r) for p, r in TEMPLATE_SYNONYMS if re.search(p, q, re.I)]
    if not found:
        return None
    for pattern, repl in rng.sample(found, min(2, len(found))):
        q = re.sub(pattern, repl, q, count=1, flags=re.I)
    return q


def _lower_first(text: str) -> str:
    word = text.split(" ", 1)[0]
    return text if word.isupper() or word[1:2].isupper() else text[:1].lower() + text[1:]


def clause_reorder(row: dict, rng: random.Random) -> str | None:
    q = row["question"].strip().rstrip("?").strip()
    options = []
    named = named_titles(row)
    if len(named) == 2:  # the two entities swapped: "A or B" -> "B or A", "A and B" -> "B and A"
        a, b = (name_of(t) for t in named)
        ia, ib = q.lower().find(a.lower()), q.lower().find(b.lower())
        if 0 <= ia and ia + len(a) <= ib:
            options.append(
                f"{q[:ia]}{q[ib : ib + len(b)]}{q[ia + len(a) : ib]}{q[ia : ia + len(a)]}{q[ib + len(b) :]}?"
            )
    if q.count(",") == 1:
        left, right = q.split(",")
        options.append(f"{right.strip()[:1].upper()}{right.strip()[1:]}, {_lower_first(left)}?")
    m = re.match(r"^(.+) (in|at|on|for|from|during) ([A-Z0-9][^,]*)$", q)
    if m and len(m[1].split()) >= 3:
        options.append(f"{m[2].capitalize()} {m[3]}, {_lower_first(m[1])}?")
    return rng.choice(options) if options else None


REWORDINGS = (question_word, template_synonym, clause_reorder)


def reworded_twice(row: dict, rng: random.Random) -> str | None:
    for first, second in rng.sample([(a, b) for a in REWORDINGS for b in REWORDINGS if a is not b], 6):
        once = first(row, rng)
        twice = second({**row, "question": once}, rng) if once else None
        if twice:
            return twice
    return None


# -- same chain ---------------------------------------------------------------------------------------


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def templated_restatement(row: dict, rng: random.Random) -> str | None:
    return rng.choice(RESTATEMENTS).format(titles=_and(titles_of(row)))


def from_decomposition(row: dict, rng: random.Random) -> str | None:
    steps = row.get("decomposition") or []
    if not steps:
        return None
    phrase = ""
    for step in steps:
        text = step["question"].strip().rstrip("?")
        text = re.sub(r"#\d+", lambda _, before=phrase: before or "it", text)
        if ">>" in text:
            subject, relation = (part.strip() for part in text.split(">>", 1))
            phrase = f"the {relation} of {subject}"
        else:
            phrase = f"the answer to ({text})"
    return f"What is {phrase}?"


def from_evidences(row: dict, rng: random.Random) -> str | None:
    facts = row.get("evidences") or []
    if not facts:
        return None
    if row["qtype"] in ("compositional", "inference"):
        phrase = facts[0]["subject"]
        for fact in facts:
            phrase = f"the {fact['relation']} of {phrase}"
        return f"What is {phrase}?"
    subjects = list(dict.fromkeys(f["subject"] for f in facts))
    relations = list(dict.fromkeys(f["relation"] for f in facts))
    return f"Comparing the {' and '.join(relations)} of {_and(subjects)}, what is the answer?"


# -- cases --------------------------------------------------------------------------------------------

KINDS: dict[str, tuple[str | None, Callable]] = {
    "case": ("exact", case),
    "punctuation": ("exact", punctuation),
    "articles": ("exact", articles),
    "typo": ("near_duplicate", typo),
    "two_typos": ("near_duplicate", two_typos),
    "dropped_word": ("near_duplicate", dropped_word),
    "added_word": ("near_duplicate", added_word),
    "changed_word": ("near_duplicate", changed_word),
    "split_word": ("near_duplicate", split_word),
    "question_word": ("near_duplicate", question_word),
    "template_synonym": ("near_duplicate", template_synonym),
    "clause_reorder": ("near_duplicate", clause_reorder),
    "reworded_twice": ("near_duplicate", reworded_twice),
    "templated_restatement": ("same_chain", templated_restatement),
    "from_decomposition": ("same_chain", from_decomposition),
    "from_evidences": ("same_chain", from_evidences),
    "other_entity": (None, other_entity),
    "other_entities": (None, other_entities),
    "similar_entity": (None, similar_entity),
    "other_question_same_chain": (None, other_question_same_chain),
}
EXACT = tuple(kind for kind, (rule, _) in KINDS.items() if rule == "exact")
SURFACE = ("typo", "two_typos", "dropped_word", "added_word", "changed_word", "split_word")
REWORDING = ("question_word", "template_synonym", "clause_reorder", "reworded_twice")
CHAIN = tuple(kind for kind, (rule, _) in KINDS.items() if rule == "same_chain")
NEGATIVES = tuple(kind for kind, (rule, _) in KINDS.items() if rule is None)


@dataclass
class Case:
    kind: str
    expected: str | None  # the rule that should flag it; None: a negative, which no rule may flag
    origin: dict  # the Question row it was built from
    row: dict  # the pool row (with its raw "question")
    exclude: set[str]  # question ids of records a match with is not a false positive (a negative's donors)


def build_cases(records: list[dict], seed: int = 0, kinds: tuple[str, ...] = tuple(KINDS)) -> list[Case]:
    """One case per (record, kind) where the kind applies and changes the question as it should: exact kinds
    normalise equal to the record, the others differ from it; negatives only from templated questions."""
    donors = Donors.of(records)
    cases = []
    for record in records:
        for kind in kinds:
            if KINDS[kind][0] is None and (record["dataset"], record["qtype"]) not in TEMPLATED:
                continue
            built = _build(record, kind, random.Random(f"{seed}:{kind}:{record['question_id']}"), donors)
            if built is not None:
                cases.append(built)
    return cases


def _build(record: dict, kind: str, rng: random.Random, donors: Donors) -> Case | None:
    expected, builder = KINDS[kind]
    out = builder(record, rng, donors) if expected is None else builder(record, rng)
    text, changes, exclude = out if isinstance(out, tuple) else (out, {}, set())
    if not text:
        return None
    norm = normalize_question(text)
    if (norm == record["question_norm"]) != (expected == "exact") or not norm:
        return None
    row = {**pool_row(record), **changes, "question_norm": norm}
    row["question_id"] = f"case/{kind}/{record['question_id']}"
    row["source_id"] = row["question_id"]
    return Case(kind, expected, record, {**row, "question": text}, exclude)
