"""A SCRIPTED policy for tests and demos: it answers every agent prompt from the gold facts of real questions.

``ScriptedPolicyLLM`` implements the LLM protocol (``backend = "scripted"``) without any model. It
reads the question from the prompt, turns the corpus's gold annotation (``factory.corpora.gold``, by the
corpus's kind) into hops ``(entity ; relation ; object)`` — ``evidences`` triplets, ``decomposition``
steps, or else the supporting sentences (the bridge title or the answer they mention) — and then:

- explore: asks for the hops whose entity is already known (in the question or in G); says
  sufficient with the gold answer once every hop is in G;
- complete: returns the hop triplets of the asked pair whose supporting passage is among the
  shown passages (so they ground in the retrieved text), else ``None``;
- final: the gold answer.

It exists so that the agent loop, the stages' bookkeeping and backtracing can be tested end to
end on ``../shared/corpora`` with known-good trajectories. It can never be chosen through params
(``llm.backend`` allows only ``local`` and ``openai``), its trajectories are recorded with policy
``scripted``, and ``factory.agent.policy.assert_trainable`` refuses them for training.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from factory.agent import prompts
from factory.corpora.corpus import GoldKind
from factory.corpora.gold import gold_of
from factory.llm.base import ChatRequest, ChatResponse
from factory.utils.text import content_tokens, normalize_answer

_HOP_REF = re.compile(r"#(\d+)")
_SUPPORT_WORDS = 12  # fallback object: the first words of a supporting sentence
# ... without the characters the triplet format reserves: the cut may fall inside a bracket, and a ';'
# would split the triplet ("King Roger (Polish: "Król Roger" , Op." has an opening bracket that never closes)
_RESERVED = re.compile(r"[()\[\]{}<>;]")


@dataclass(frozen=True)
class Hop:
    """One gold fact of a question, as the scripted policy asks for it and states it."""

    entity: str
    relation: str
    object: str
    titles: tuple[str, ...]  # titles of the passages that state it


def _share(part: str, whole: str) -> float:
    tokens = set(content_tokens(part))
    return len(tokens & set(content_tokens(whole))) / len(tokens) if tokens else 0.0


def _contains(haystack: str, needle: str) -> bool:
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in f" {normalize_answer(haystack)} "


def _supporting_text(q: Mapping, passages: Mapping[str, Mapping]) -> dict[str, list[str]]:
    """title -> gold supporting sentences (MuSiQue: the whole paragraph)."""
    by_pid = {p["pid"]: p for p in q.get("passages") or []}
    out: dict[str, list[str]] = {}
    for s in q.get("supporting") or []:
        p = by_pid.get(s.get("pid")) or passages.get(s.get("pid")) or {}
        sentences = list(p.get("sentences") or [])
        idx = s.get("sent_idx", -1)
        chosen = sentences if idx is None or idx < 0 else sentences[idx : idx + 1]
        out.setdefault(s["title"], []).extend(x.strip() for x in chosen)
    return out


def _evidence_hops(q: Mapping, evidences: list, support: dict[str, list[str]]) -> list[Hop]:
    hops = []
    for e in evidences:
        titles = tuple(
            t
            for t, sents in support.items()
            if _share(e["subject"], t) >= 0.5 or _contains(" ".join(sents), e["object"])
        )
        hops.append(Hop(e["subject"], e["relation"], e["object"], titles or tuple(support)))
    return hops


def _decomposition_hops(q: Mapping, steps: list, support: dict[str, list[str]]) -> list[Hop]:
    hops: list[Hop] = []
    pool = q.get("passages") or []
    answers: dict[str, str] = {}
    for i, step in enumerate(steps, start=1):
        text = step["question"]
        idx = step.get("paragraph_support_idx")
        title = pool[idx]["title"] if idx is not None and 0 <= idx < len(pool) else ""

        def resolve(s: str) -> str:
            return _HOP_REF.sub(lambda m: answers.get(m.group(1), m.group(0)), s)

        if ">>" in text:
            entity, relation = (x.strip() for x in text.split(">>", 1))
            entity = resolve(entity)
        else:
            refs = _HOP_REF.findall(text)
            entity = answers.get(refs[0], title) if refs else title
            # a sub-question becomes a relation phrase: no closing '?', '.' or quote (the parser reads a
            # relation that ends a sentence as prose)
            relation = resolve(text).rstrip("?.!\"' ").strip()
        answers[str(i)] = step["answer"]
        if entity and relation:
            hops.append(Hop(entity, relation, step["answer"], (title,) if title else ()))
    return hops


def _supporting_hops(q: Mapping, supporting: list, support: dict[str, list[str]]) -> list[Hop]:
    """Hops from the supporting sentences alone (``support``, read from ``supporting``)."""
    answer = (q.get("answers") or [""])[0]
    titles = sorted(support, key=lambda t: (_share(t, q["question"]) < 0.5, list(support).index(t)))
    hops = []
    for title in titles:
        text = " ".join(support[title])
        others = [t for t in titles if t != title and _contains(text, t)]
        if answer and _contains(text, answer):
            hops.append(Hop(title, "mentions", answer, (title,)))
        elif others:
            hops.append(Hop(title, "mentions", others[0], (title,)))
        elif text:
            words = " ".join(_RESERVED.sub(" ", text).split()[:_SUPPORT_WORDS])
            hops.append(Hop(title, "described as", words, (title,)))
    return hops


# The hops of each kind of gold annotation: (question, the annotation's entries, supporting text).
_HOPS: dict[GoldKind, Callable[[Mapping, list, dict[str, list[str]]], list[Hop]]] = {
    "evidences": _evidence_hops,
    "decomposition": _decomposition_hops,
    "supporting_facts": _supporting_hops,
}


def gold_hops(q: Mapping, passages: Mapping[str, Mapping] | None = None) -> list[Hop]:
    """The question's gold facts as hops, from what its corpus annotates (``factory.corpora.gold``)."""
    gold = gold_of(q)
    return _HOPS[gold.kind](q, gold.items, _supporting_text(q, passages or {}))


class ScriptedPolicyLLM:
    """The LLM protocol answered from gold facts (tests and demos only; never trainable)."""

    backend = "scripted"
    identity = "scripted-gold-policy"

    def __init__(
        self, questions: Iterable[Mapping], passages: Iterable[Mapping] | Mapping[str, Mapping] | None = None
    ):
        by_pid = passages if isinstance(passages, Mapping) else {p["pid"]: p for p in passages or []}
        self.questions: dict[str, Mapping] = {}
        self.hops: dict[str, list[Hop]] = {}
        for q in questions:
            key = " ".join(q["question"].split())  # as the prompts show it
            self.questions.setdefault(key, q)
            self.hops.setdefault(q["question_id"], gold_hops(q, by_pid))
        self.calls = 0

    # ------------------------------------------------------------ LLM protocol

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        return [self._one(r) for r in requests]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ the script

    def _one(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        messages = request.message_dicts()
        found = prompts.version_and_kind(messages)
        version, kind = found if found else (None, None)
        user = messages[1]["content"] if len(messages) > 1 else ""
        question = _field(user, "Question")
        q = self.questions.get(question or "")
        if kind is None or q is None:
            return ChatResponse(
                "",
                error=f"scripted policy: not a prompt about a known question (kind {kind}, question "
                f"{question!r})",
                finish_reason="error",
            )
        fmt = prompts.output_format(version)  # replies in the syntax the prompt asks for
        if kind == "explore":
            text = self._explore(fmt, q, _graph(user))
        elif kind == "complete":
            text = self._complete(fmt, q, user)
        else:
            text = fmt.render_final(f"From the graph, the answer is {q['answers'][0]}.", q["answers"][0])
        return ChatResponse(
            text,
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),
            completion_tokens=self.count_tokens(text),
            finish_reason="stop",
        )

    def _explore(self, fmt, q: Mapping, graph: list[tuple[str, str, str]]) -> str:
        hops = self.hops[q["question_id"]]
        have = {normalize_answer(o) for _, _, o in graph}
        missing = [h for h in hops if normalize_answer(h.object) not in have]
        if not missing:
            answer = q["answers"][0]
            return fmt.render_explore(
                f"The graph links the question to {answer}.", [], sufficient=True, answer=answer
            )
        known = " ".join([q["question"], *(f"{s} {o}" for s, _, o in graph)])
        ready = [h for h in missing if _share(h.entity, known) >= 0.5] or missing[:1]
        pairs = list(dict.fromkeys((h.entity, h.relation) for h in ready))
        return fmt.render_explore("I need " + "; ".join(f"the {r} of {e}" for e, r in pairs) + ".", pairs)

    def _complete(self, fmt, q: Mapping, user: str) -> str:
        look = _field(user, "Look up") or ""
        entity, _, relation = (x.strip() for x in look.partition("|"))
        body = user.split("Passages:\n", 1)[-1]
        titles = {p["title"] for p in q.get("passages") or []} | {
            t for h in self.hops[q["question_id"]] for t in h.titles
        }
        shown = {t for t in titles if f"] {t}: " in body}
        found = []
        for h in self.hops[q["question_id"]]:
            if normalize_answer(h.entity) != normalize_answer(entity) or normalize_answer(
                h.relation
            ) != normalize_answer(relation):
                continue
            if any(t in shown for t in h.titles) or _contains(body, h.object):
                found.append((h.entity, stated_relation(h.relation), h.object))
        return fmt.render_complete(found)


def stated_relation(relation: str) -> str:
    """A hop's relation as its triplet states it: a short phrase (``factory.agent.fields.field_problem``).
    A MuSiQue sub-question asked as the pair's relation ("Who became the top PC manufacturer in 1994,
    leaving Apple") is too long for a triplet: its first words up to the triplet bound, else its
    content words."""
    from factory.agent.fields import TRIPLET_RELATION_CHARS, TRIPLET_RELATION_WORDS, field_problem

    if not field_problem(relation, relation=True):
        return relation
    cut = " ".join(relation.split()[:TRIPLET_RELATION_WORDS])[:TRIPLET_RELATION_CHARS].rstrip(" ,;:")
    if cut and not field_problem(cut, relation=True):
        return cut
    return " ".join(content_tokens(relation)[:4]) or "related to"


def _field(user: str, name: str) -> str | None:
    prefix = f"{name}: "
    for line in user.split("\n"):
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None


def _graph(user: str) -> list[tuple[str, str, str]]:
    from factory.agent.fields import ParseError
    from factory.agent.format import parse_triplet

    lines = user.split("Graph:\n", 1)[1].split("\n") if "Graph:\n" in user else []
    out = []
    for line in lines:
        if line.startswith("Hint:") or line == prompts.EMPTY_GRAPH:
            continue
        try:
            out.append(parse_triplet(line))
        except ParseError:
            continue
    return out
