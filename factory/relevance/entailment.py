"""Entailment-checked grounding (docs/design.md §4): does the passage a triplet grounds to state the triplet?

Lexical grounding (``factory.agent.grounding``) attributes a triplet to the retrieved passage whose
tokens cover its subject and object best. It never reads the relation: ``(Scott Derrickson ; married
to ; 1966)`` grounds in Scott Derrickson's passage with score 1.0 because the passage names him and
the year he was born. The KnowTrace review counts a triplet as contributive only if its passage is a
gold supporting paragraph *and* the passage entails the triplet. The entailment judge checks the
second part:

- every triplet that lexical grounding attributes to a passage gets one LLM call: a few-shot prompt
  of the project's own (``JUDGE_PROMPTS``, versioned and frozen like the agent's prompts: a change is
  a new version name) shows the passage and the triplet and asks "does the passage state this
  triplet?"; the reply is ``yes: <reason>`` or ``no: <reason>``, parsed tolerantly (case, bullets,
  "Answer:" prefixes, punctuation);
- identical (passage, triplet) pairs are asked once; calls go through ``factory.llm.make_llm`` with the
  judge's backend (``grounding.llm``: every field unset falls back to ``llm.*``, so by default the
  policy's own backend and model judge; a user points it at a stronger model) and through the response
  cache (``llm.cache``), so a second run makes no call and an interrupted run loses at most one chunk;
- the verdict per triplet: ``entailed`` true / false, or null when the judge gave no verdict (failed
  call, unreadable reply), always with a ``reason`` (``schemas.ENTAILMENT``);
- agreement with lexical grounding: the share of the lexically grounded triplets that the judge
  confirms (verdicts only), overall and for the triplets grounded in a gold supporting paragraph.

Ungrounded triplets are not judged: no passage was attributed to them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from factory.params.agent_sections import LLMParams
from factory.params.config import Params
from factory.utils.errors import FactoryError
from factory.utils.io import progress
from factory.utils.text import join_sentences

log = logging.getLogger(__name__)

CHUNK = 64  # requests per generate call: an interrupted run loses at most one chunk (the rest is cached)


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    user: str  # with {title}, {passage}, {subject}, {relation}, {object}


def _example(title: str, passage: str, triplet: tuple[str, str, str], reply: str) -> str:
    return (
        f"Passage: {title}: {passage}\nTriplet: ({triplet[0]} ; {triplet[1]} ; {triplet[2]})\n"
        f"Does the passage state this triplet?\nOutput: {reply}"
    )


_DERRICKSON = (
    "Scott Derrickson",
    "Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer. He lives in "
    "Los Angeles, California.",
)
_MARKKA = (
    "Finnish markka",
    "The Finnish markka was the currency of Finland from 1860 until 28 February 2002, when it was replaced "
    "by the euro.",
)
_KOHUWALA = ("Kohuwala", "Kohuwala is a suburb in Colombo, Sri Lanka, at the intersection of two main roads.")

_V1_SYSTEM = (
    "You check facts against a passage. A fact is a triplet (subject ; relation ; object). Say yes when the "
    "passage states the fact, in any wording. Say no when the passage does not state it, or states "
    "something else about the same entities (names appearing in the passage are not enough: the relation "
    "must hold). Reply in exactly one line and nothing else:\n\n"
    "yes: <short reason>\nor\nno: <short reason>\n\n"
    + "\n\n".join(
        f"Example {n}:\n{_example(*case)}"
        for n, case in enumerate(
            [
                (*_DERRICKSON, ("Scott Derrickson", "born in", "1966"), "yes: he was born on July 16, 1966."),
                (
                    *_DERRICKSON,
                    ("Scott Derrickson", "married to", "1966"),
                    "no: 1966 is the year he was born; the passage says nothing about a marriage.",
                ),
                (
                    *_MARKKA,
                    ("euro", "replaced", "Finnish markka"),
                    "yes: the markka was replaced by the euro.",
                ),
                (
                    *_KOHUWALA,
                    ("Kohuwala", "capital of", "Sri Lanka"),
                    "no: Kohuwala is a suburb in Colombo, not a capital.",
                ),
            ],
            start=1,
        )
    )
)

JUDGE_PROMPTS: dict[str, JudgePrompt] = {
    "entailment-v1": JudgePrompt(
        version="entailment-v1",
        system=_V1_SYSTEM,
        user="Passage: {title}: {passage}\nTriplet: ({subject} ; {relation} ; {object})\n"
        "Does the passage state this triplet?",
    ),
}


def judge_prompt(version: str) -> JudgePrompt:
    try:
        return JUDGE_PROMPTS[version]
    except KeyError:
        raise FactoryError(
            f"grounding.prompt_version={version!r} is unknown (known: {', '.join(sorted(JUDGE_PROMPTS))})"
        ) from None


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def judge_messages(
    version: str, subject: str, relation: str, obj: str, title: str, passage: str, passage_chars: int
) -> list[dict]:
    """The judge's chat messages for one (passage, triplet) pair; the passage cut to ``passage_chars``."""
    prompt = judge_prompt(version)
    text = _one_line(passage)
    if len(text) > passage_chars:
        text = text[:passage_chars].rsplit(" ", 1)[0] + " ..."
    user = prompt.user.format(
        title=_one_line(title),
        passage=text,
        subject=_one_line(subject),
        relation=_one_line(relation),
        object=_one_line(obj),
    )
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}]


_VERDICT = re.compile(
    r"^[\s*_>#`\"'-]*(?:(?:answer|output|verdict)\s*[:=-]\s*)?[*_`\"']*(yes|no)\b(.*)", re.I | re.S
)


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """(entailed, reason) from the judge's reply: ``yes``/``no`` first (tolerant of case, bullets,
    quotes and an ``Answer:`` prefix), the rest of the line is the reason; (None, why) otherwise."""
    first = next((line for line in (text or "").splitlines() if line.strip()), "")
    m = _VERDICT.match(first)
    if not m:
        return None, f"unreadable judge reply: {_one_line(text)[:120]!r}"
    reason = m.group(2).strip().lstrip(":.,;-—– *_`\"'").strip()
    return m.group(1).lower() == "yes", reason or f"judge said {m.group(1).lower()}"


# ---------------------------------------------------------------------- the judge's backend


def judge_llm_params(params: Params) -> LLMParams:
    """``llm.*`` with every field that ``grounding.llm`` sets replaced (unset: the policy's own value)."""
    overrides = {k: v for k, v in params.grounding.llm.model_dump().items() if v is not None}
    return LLMParams.model_validate({**params.llm.model_dump(), **overrides})


def make_judge(params: Params):
    """The judge's LLM: ``make_llm`` on the judge's backend settings (cached when ``llm.cache``)."""
    from factory.llm import make_llm

    return make_llm(params.model_copy(update={"llm": judge_llm_params(params)}))


# ---------------------------------------------------------------------- judging


@dataclass(frozen=True)
class JudgeItem:
    """One lexically grounded triplet to judge."""

    trajectory_id: str
    triplet_id: str
    question_id: str
    pid: str
    sentence: int | None
    subject: str
    relation: str
    object: str


def judge(
    items: Sequence[JudgeItem],
    passages_by_pid: Mapping[str, Mapping],
    llm,
    *,
    prompt_version: str,
    max_new_tokens: int,
    passage_chars: int,
) -> list[dict]:
    """One ``schemas.ENTAILMENT`` row per item; one LLM call per distinct (passage, triplet) prompt."""
    from factory.llm.base import ChatRequest, Sampling

    sampling = Sampling(temperature=0.0, max_new_tokens=max_new_tokens)  # the first line is read
    keys: dict[tuple, int] = {}
    requests: list[ChatRequest] = []
    item_request: list[int] = []
    for it in items:
        passage = passages_by_pid.get(it.pid)
        if passage is None:
            raise FactoryError(
                f"trajectory {it.trajectory_id!r}: triplet {it.triplet_id!r} grounds to passage {it.pid!r}, "
                "which is not in passages.parquet"
            )
        messages = judge_messages(
            prompt_version,
            it.subject,
            it.relation,
            it.object,
            passage.get("title") or "",
            join_sentences(list(passage.get("sentences") or [])),
            passage_chars,
        )
        key = tuple((m["role"], m["content"]) for m in messages)
        if key not in keys:
            keys[key] = len(requests)
            requests.append(ChatRequest.of(messages, sampling))
        item_request.append(keys[key])
    responses = []
    chunks = range(0, len(requests), CHUNK)
    for start in progress(chunks, total=len(chunks), desc="entailment judge", unit="chunk"):
        responses.extend(llm.generate(requests[start : start + CHUNK]))
    identity = getattr(llm, "identity", "?")
    rows = []
    for it, n in zip(items, item_request):
        resp = responses[n]
        if resp.ok:
            entailed, reason = parse_verdict(resp.text)
        else:
            entailed, reason = None, f"judge call failed: {resp.error}"
        rows.append(
            {
                "trajectory_id": it.trajectory_id,
                "triplet_id": it.triplet_id,
                "question_id": it.question_id,
                "pid": it.pid,
                "sentence": it.sentence,
                "subject": it.subject,
                "relation": it.relation,
                "object": it.object,
                "entailed": entailed,
                "reason": reason,
                "judge": identity,
                "prompt_version": prompt_version,
            }
        )
    return rows


def judge_items(
    trajectories: Sequence[Mapping], grounding: Mapping[str, Mapping[str, tuple[str | None, int | None]]]
) -> list[JudgeItem]:
    """The lexically grounded triplets of ``trajectories`` (grounding: trajectory id -> triplet id ->
    (pid, sentence)), in trajectory then triplet order; each trajectory id once."""
    out, seen = [], set()
    for t in trajectories:
        tid = t["trajectory_id"]
        if tid in seen:
            continue
        seen.add(tid)
        where = grounding[tid]
        for x in t.get("triplets") or []:
            pid, sentence = where.get(x["triplet_id"], (None, None))
            if pid is None:
                continue
            out.append(
                JudgeItem(
                    tid,
                    x["triplet_id"],
                    t["question_id"],
                    pid,
                    sentence,
                    x["subject"],
                    x["relation"],
                    x["object"],
                )
            )
    return out


def agreement(rows: Sequence[Mapping], gold_pids_of: Mapping[str, set[str]]) -> dict:
    """The judge vs lexical grounding: counts and the share of lexically grounded triplets the judge
    confirms (over verdicts), overall and for triplets grounded in a gold supporting paragraph
    (``gold_pids_of``: question id -> gold pids)."""

    def summary(subset: list[Mapping]) -> dict:
        yes = sum(r["entailed"] is True for r in subset)
        no = sum(r["entailed"] is False for r in subset)
        return {
            "judged": len(subset),
            "entailed": yes,
            "not_entailed": no,
            "no_verdict": len(subset) - yes - no,
            "agreement": yes / (yes + no) if yes + no else None,
        }

    gold = [r for r in rows if r["pid"] in gold_pids_of.get(r["question_id"], set())]
    return {"all": summary(list(rows)), "gold_paragraph": summary(gold)}


# ---------------------------------------------------------------------- validate-labels


def judge_sources(
    sources: Sequence, questions_by_id: Mapping[str, Mapping], passages_by_pid: Mapping[str, Mapping], params
) -> tuple[list[dict], dict[tuple[str, str], bool | None] | None, dict]:
    """(``schemas.ENTAILMENT`` rows, verdicts by (trajectory id, triplet id), summary) for the correct
    trajectories of every source (``factory.relevance.check.Source``): the ones validate-labels scores.
    With ``grounding.judge: lexical`` no call is made: ([], None, the summary saying so)."""
    g = params.grounding
    head = {"judge": g.judge, "prompt_version": g.prompt_version if g.judge == "llm" else None}
    if g.judge != "llm":
        return [], None, {**head, "judge_model": None}
    from factory.relevance.grounded import ground_for_relevance

    correct = [t for s in sources for t in s.trajectories if t.get("correct")]
    grounding = {
        t["trajectory_id"]: ground_for_relevance(t, passages_by_pid, params.agent.grounding_threshold)
        for t in correct
    }
    items = judge_items(correct, grounding)
    llm = make_judge(params) if items else None
    try:
        rows = (
            judge(
                items,
                passages_by_pid,
                llm,
                prompt_version=g.prompt_version,
                max_new_tokens=g.max_new_tokens,
                passage_chars=g.passage_chars,
            )
            if items
            else []
        )
        # the cost: one call per distinct (passage, triplet), the same figure whether it was sent or answered
        # from the cache (so a re-run writes the same bytes); the split is logged
        hits, misses = int(getattr(llm, "hits", 0)), int(getattr(llm, "misses", 0))
        calls = {"triplets_judged": len(items), "calls": hits + misses}
        if llm is not None:
            log.info(
                "entailment judge: %d calls for %d triplets (%d from the cache)",
                hits + misses,
                len(items),
                hits,
            )
    finally:
        if llm is not None:
            llm.close()
    verdicts = {(r["trajectory_id"], r["triplet_id"]): r["entailed"] for r in rows}
    gold = {qid: {s["pid"] for s in (q.get("supporting") or [])} for qid, q in questions_by_id.items()}
    summary = {
        **head,
        "judge_model": getattr(llm, "identity", None),
        "llm_calls": calls,
        "agreement_with_lexical": agreement(rows, gold),
    }
    return rows, verdicts, summary
