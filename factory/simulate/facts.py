"""Gold facts of real questions as triplets with hop levels (the simulator's ground truth).

The question's gold annotation is read by its corpus's kind (``factory.corpora.gold``: a row whose
``evidences`` or ``decomposition`` is empty is read by its supporting facts):

- ``evidences`` (2WikiMultihopQA): the triplets as given.
- ``decomposition`` (MuSiQue): one triplet per step; ``#k`` references are replaced by step k's answer.
  "X >> relation" steps give (X; relation; answer); natural-language steps give (subject; relation;
  answer) with subject = the referenced answer, else the title of the step's supporting paragraph
  when the sub-question names it, else the longest capitalised span of the sub-question (or of the
  question, when the sub-question contains it), else that title — never the step's own answer;
  relation = the sub-question's content words minus the subject's (at most 4). A step with two
  references adds a second triplet from the second referenced answer.
- ``supporting_facts`` (HotpotQA): one triplet per supporting paragraph, subject = its title
  (parenthetical dropped), object = the first of: the gold answer if the paragraph's supporting
  sentences (all of them for a fact of the whole paragraph, sent_idx -1) contain it (as whole words, and
  it is not part of the title); another supporting title they mention; a salient phrase of the first
  supporting sentence — comparison questions: a number (digits, a date, or a number word), then a
  capitalised span; bridge questions: a capitalised span, then a number; else its last content word
  (never the subject or a phrase containing it). Relation = up to 3 content words between the subject's
  mention and the object in the sentence ("related to" if none). When the answer is a supporting title
  whose sentence names the next paragraph's title B, the fact is written B -> answer ("<relation> of"),
  so that the chain ends at the answer.
- Derived relations never contain the DTKG administrative keywords (the rule filter would drop them).

Hop levels: a fact whose subject is the object of another fact comes one level after it; "the same
entity" is decided as backtracing decides it (``factory.backtrace.nodes.merge_variants``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from factory.backtrace.nodes import contains_words, is_specific, merge_variants, node_key
from factory.corpora.corpus import GoldKind
from factory.corpora.gold import gold_of
from factory.params.label_sections import BacktraceParams

_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = re.compile(
    rf"\b(?:\d{{1,2}} {_MONTH},? \d{{3,4}}|{_MONTH} \d{{1,2}},? \d{{3,4}}|{_MONTH} \d{{3,4}})\b"
)
_NUM = re.compile(
    r"(?<![\w.])\d[\d,.]*\d(?:\s+(?:million|billion|thousand|members|species|km|miles|people))?\b|(?<![\w.])\d\b"
)
_NUM_WORD = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|"
    r"eighteen|nineteen|twenty|thirty|forty|fifty|hundred|thousand|million|dozen)\b",
    re.IGNORECASE,
)
_REF = re.compile(r"#(\d+)")
_WH = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "where",
        "when",
        "why",
        "how",
        "is",
        "was",
        "are",
        "were",
        "did",
        "does",
        "do",
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "and",
        "or",
        "from",
        "as",
        "that",
        "this",
    ]
)
# derived relation names never use the DTKG administrative keywords ("open source roguelike" would be dropped)
_ADMIN = frozenset(BacktraceParams().admin_relations)
_CONNECT = frozenset({"of", "the", "de", "du", "la", "von", "van", "and", "for", "on", "da", "del", "le"})


@dataclass
class Fact:
    """One gold triplet with its hop level and source passage."""

    subject: str
    relation: str
    object: str
    level: int = 0
    pid: str | None = None


# ---------------------------------------------------------------------- phrases


def _title_name(title: str) -> str:
    """Wikipedia title without its parenthetical: 'Black Book (film)' -> 'Black Book'."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip() or title


def _caps_spans(text: str) -> list[str]:
    """Runs of capitalised words (connectors like 'of' allowed inside), in order of appearance."""
    tokens = re.findall(r"[\w'’.&-]+", text)
    spans, run = [], []
    for n, tok in enumerate(tokens):
        word = tok.strip(".")
        if (
            word[:1].isupper()
            and not (n == 0 and word.lower() in _WH | {"it", "he", "she", "they", "his", "her", "its", "one"})
            or run
            and word.lower() in _CONNECT
        ):
            run.append(word)
        else:
            if run:
                spans.append(run)
            run = []
    if run:
        spans.append(run)
    out = []
    for run in spans:
        while run and run[-1].lower() in _CONNECT:
            run = run[:-1]
        while run and run[0].lower() in _CONNECT:
            run = run[1:]
        if run:
            out.append(" ".join(run))
    return out


def _numbers(text: str) -> list[str]:
    found = [(m.start(), m.group(0)) for m in _DATE.finditer(text)]
    taken = [(s, s + len(v)) for s, v in found]
    for m in _NUM.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            found.append((m.start(), m.group(0).rstrip(".,")))
    for m in _NUM_WORD.finditer(text):
        found.append((m.start(), m.group(0)))
    return [v for _, v in sorted(found)]


def salient_phrase(sentence: str, subject: str, prefer: str = "caps") -> str:
    """A salient entity/value of a sentence that is not the subject (see the module docstring)."""
    subject_key = node_key(subject)

    def fresh(phrase: str) -> bool:
        key = node_key(phrase)
        return (
            bool(key)
            and key != subject_key
            and not contains_words(subject_key, key)
            and not contains_words(key, subject_key)
        )

    caps = [c for c in _caps_spans(sentence) if fresh(c)]
    nums = [n for n in _numbers(sentence) if fresh(n)]
    order = (nums, caps) if prefer == "number" else (caps, nums)
    for group in order:
        if group:
            return group[0]
    words = [w for w in re.findall(r"[A-Za-z]+", sentence) if w.lower() not in _WH and fresh(w)]
    return words[-1] if words else "unknown"


def _relation_between(sentence: str, subject: str, obj: str) -> str:
    low = sentence.lower()
    start = low.find(_title_name(subject).lower())
    start = start + len(_title_name(subject)) if start >= 0 else 0
    end = low.find(obj.lower(), start)
    middle = sentence[start:end] if end > start else sentence[start:]
    words = [
        w.lower()
        for w in re.findall(r"[A-Za-z]+", middle)
        if w.lower() not in _WH and w.lower() not in _ADMIN
    ]
    return " ".join(words[:3]) or "related to"


def _same(a: str, b: str) -> bool:
    ka, kb = node_key(a), node_key(b)
    if ka == kb:
        return True
    return (is_specific(ka) and contains_words(kb, ka)) or (is_specific(kb) and contains_words(ka, kb))


def assign_levels(facts: list[Fact]) -> None:
    """Hop level of each fact: one more than the level of a fact whose object is its subject (in
    place). "The same entity" is decided as backtracing decides it (normalised names, linked variants
    merged, ``factory.backtrace.nodes.merge_variants``), so a faithful trajectory's chain is one chain."""
    keys = [(node_key(f.subject), node_key(f.object)) for f in facts]
    node = merge_variants([k for pair in keys for k in pair], distinct=keys)
    subj = [node[s] for s, _ in keys]
    obj = [node[o] for _, o in keys]
    for f in facts:
        f.level = 0
    for _ in range(len(facts)):
        changed = False
        for n, f in enumerate(facts):
            for m, g in enumerate(facts):
                if (
                    m != n
                    and subj[n] == obj[m]
                    and subj[n] != subj[m]
                    and f.level < g.level + 1 <= len(facts)
                ):
                    f.level = g.level + 1
                    changed = True
        if not changed:
            break


# ---------------------------------------------------------------------- gold facts per kind of annotation


def _evidence_facts(q: dict, evidences: list) -> list[Fact]:
    by_title = {node_key(p["title"]): p["pid"] for p in q["passages"]}
    facts = [
        Fact(e["subject"], e["relation"], e["object"], pid=by_title.get(node_key(e["subject"])))
        for e in evidences
    ]
    assign_levels(facts)
    return facts


def _decomposition_facts(q: dict, steps: list) -> list[Fact]:
    answers = [s["answer"] for s in steps]
    facts: list[Fact] = []
    levels: list[int] = []
    for n, step in enumerate(steps):
        text = step["question"]
        refs = [int(r) - 1 for r in _REF.findall(text) if 0 < int(r) <= n]
        idx = step.get("paragraph_support_idx")
        passage = q["passages"][idx] if idx is not None and 0 <= idx < len(q["passages"]) else None
        title = _title_name(passage["title"]) if passage else ""
        level = 1 + max((levels[r] for r in refs), default=-1)
        levels.append(level)
        if ">>" in text:
            head, relation = (part.strip() for part in text.split(">>", 1))
            subject = answers[refs[0]] if refs else head
        else:
            subject = answers[refs[0]] if refs else _subject_of(text, title, q["question"], step["answer"])
            drop = set(node_key(subject).split())
            words = [
                w
                for w in node_key(_REF.sub(" ", text)).split()
                if w not in _WH and w not in drop and w not in _ADMIN
            ]
            relation = " ".join(words[:4]) or "related to"
        pid = passage["pid"] if passage else None
        facts.append(Fact(subject, relation, step["answer"], level, pid))
        for r in refs[1:]:
            facts.append(Fact(answers[r], relation, step["answer"], level, pid))
    return facts


def _subject_of(sub_question: str, title: str, question: str, answer: str) -> str:
    """Subject of a natural-language MuSiQue sub-question (rule in the module docstring)."""
    text_key = node_key(sub_question)
    candidates = [title] if title and contains_words(text_key, node_key(title)) else []
    spans = _caps_spans(_REF.sub(" ", sub_question)) + [
        c for c in _caps_spans(question) if contains_words(text_key, node_key(c))
    ]
    candidates += sorted(spans, key=lambda c: (-len(c), c))
    if title:
        candidates.append(title)
    for c in candidates:
        if node_key(c) and not _same(c, answer):
            return c
    words = [w for w in text_key.split() if w not in _WH]
    return " ".join(words[:4]) or sub_question


def _supporting_facts(q: dict, supporting: list) -> list[Fact]:
    by_pid = {p["pid"]: p for p in q["passages"]}
    titles: list[tuple[str, str]] = []  # (title, pid) in supporting order
    sentences: dict[str, list[str]] = {}
    for s in supporting:
        p = by_pid.get(s["pid"])
        if p is None:
            continue
        if s["pid"] not in sentences:
            titles.append((p["title"], s["pid"]))
            sentences[s["pid"]] = []
        if s["sent_idx"] < 0:  # a whole paragraph supports (sent_idx -1: MuSiQue-like annotations)
            sentences[s["pid"]] += [x.strip() for x in p["sentences"]]
        elif s["sent_idx"] < len(p["sentences"]):
            sentences[s["pid"]].append(p["sentences"][s["sent_idx"]].strip())
    answer = (q.get("answers") or [""])[0]
    answer_key = node_key(answer)
    comparison = q.get("route") == "parallel"
    facts = []
    for title, pid in titles:
        name = _title_name(title)
        text = " ".join(sentences[pid])
        first = sentences[pid][0] if sentences[pid] else text
        text_key = node_key(text)
        others = [_title_name(t) for t, p in titles if p != pid]
        name_key = node_key(name)
        if (
            answer_key
            and answer_key not in ("yes", "no")
            and contains_words(text_key, answer_key)
            and not contains_words(name_key, answer_key)
            and not contains_words(answer_key, name_key)
        ):
            obj = answer
        elif any(contains_words(text_key, node_key(o)) and not _same(o, name) for o in others):
            obj = next(o for o in others if contains_words(text_key, node_key(o)) and not _same(o, name))
        else:
            obj = salient_phrase(first, name, prefer="number" if comparison else "caps")
        facts.append(Fact(name, _relation_between(text, name, obj), obj, pid=pid))
    if not comparison and answer_key and not any(node_key(f.object) == answer_key for f in facts):
        # the answer is a supporting title that mentions the bridge: write the chain towards it
        for f in facts:
            if node_key(f.subject) == answer_key and any(
                g is not f and _same(g.subject, f.object) for g in facts
            ):
                f.subject, f.object, f.relation = f.object, f.subject, f.relation + " of"
    assign_levels(facts)
    return facts


# The facts of each kind of gold annotation: (question, the annotation's entries).
_FACTS: dict[GoldKind, Callable[[dict, list], list[Fact]]] = {
    "evidences": _evidence_facts,
    "decomposition": _decomposition_facts,
    "supporting_facts": _supporting_facts,
}


def gold_facts(question: dict) -> list[Fact]:
    """The question's gold triplets with hop levels (rules in the module docstring); empty only when its
    supporting facts name no passage of its pool. A dataset the registry lacks is an error."""
    gold = gold_of(question)
    return _FACTS[gold.kind](question, gold.items)


def distractor_facts(question: dict, n: int, rng: random.Random) -> list[Fact]:
    """Triplets from passages of the question's pool that are not gold supporting paragraphs."""
    gold = {s["pid"] for s in question["supporting"]}
    pool = [p for p in question["passages"] if p["pid"] not in gold and p["sentences"]]
    rng.shuffle(pool)
    facts = []
    for p in pool[:n]:
        name = _title_name(p["title"])
        sentence = p["sentences"][0].strip()
        obj = salient_phrase(sentence, name)
        facts.append(Fact(name, _relation_between(sentence, name, obj), obj, pid=p["pid"]))
    return facts
