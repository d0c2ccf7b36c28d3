"""DTKG route classifier: is a multi-hop question *parallel* or *chain*?

DTKG routes every question before reasoning: *parallel* questions need independent facts that are
compared or verified (HotpotQA comparison, 2Wiki comparison / bridge_comparison); *chain* questions
need each hop's answer to ask the next hop (bridge, compositional, inference, MuSiQue). The corpora
give a gold-derived route per question (``question.route``); this module asks the configured LLM
with a few-shot prompt and measures how well it agrees (accuracy, confusion matrix), so the
factory knows whether a predicted route could replace the gold one where no gold type exists.

The few-shot examples are written for this project (made-up questions, none from the corpora).
Replies are parsed tolerantly; a reply that names no route or both routes is ``unknown`` and
counted, never dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from factory.llm.base import LLM, ChatRequest, Sampling
from factory.params.round_sections import RoutesParams
from factory.utils.io import progress
from factory.utils.splits import unit_hash

ROUTES = ("parallel", "chain")
UNKNOWN = "unknown"
PROMPT_VERSION = "dtkg-routes-v1"

SYSTEM = (
    "You sort multi-hop questions by how their facts depend on each other.\n"
    "parallel: the question needs two or more facts that can each be looked up on their own and are then "
    "compared or checked together (which is older, are both X, do they share Y).\n"
    "chain: the question needs one fact first, and that answer is needed to ask for the next fact "
    "(the capital of the country where X was born).\n"
    "Reply with one line: 'Route: parallel' or 'Route: chain', then a short reason."
)

# (question, route, reason): the project's own examples.
FEW_SHOT: tuple[tuple[str, str, str], ...] = (
    (
        "Which river is longer, the Danube or the Rhine?",
        "parallel",
        "the two lengths can be looked up independently and compared.",
    ),
    (
        "What is the capital of the country where the Eiffel Tower stands?",
        "chain",
        "the country must be found first to ask for its capital.",
    ),
    (
        "Were the painters Frida Kahlo and Diego Rivera born in the same country?",
        "parallel",
        "each birth country is found on its own, then the two are compared.",
    ),
    (
        "In which year was the founder of the company that makes the Walkman born?",
        "chain",
        "the company gives the founder, and the founder gives the birth year.",
    ),
    (
        "Are Lake Baikal and Lake Tanganyika both located in Asia?",
        "parallel",
        "the location of each lake is checked separately.",
    ),
    (
        "Who directed the film in which the actress who played Queen Elizabeth in The Crown made her debut?",
        "chain",
        "each hop (actress, debut film, director) needs the previous answer.",
    ),
)

_SYNONYMS = {
    "parallel": "parallel",
    "para": "parallel",
    "independent": "parallel",
    "comparison": "parallel",
    "chain": "chain",
    "chained": "chain",
    "sequential": "chain",
    "serial": "chain",
    "bridge": "chain",
}
_ROUTE_LINE = re.compile(r"route\s*[:=\-]?\s*[*_`'\"(\[]*\s*([a-z]+)", re.IGNORECASE)
_LABEL_WORD = re.compile(r"\b(parallel|chain(?:ed)?)\b", re.IGNORECASE)


def route_messages(question: str) -> list[dict]:
    """The few-shot chat prompt for one question (system, example turns, the question)."""
    messages = [{"role": "system", "content": SYSTEM}]
    for example, route, reason in FEW_SHOT:
        messages.append({"role": "user", "content": f"Question: {example}"})
        messages.append({"role": "assistant", "content": f"Route: {route} ({reason})"})
    messages.append({"role": "user", "content": f"Question: {question}"})
    return messages


def parse_route(text: str | None) -> str:
    """``parallel`` | ``chain`` | ``unknown`` from a model reply.

    First a ``Route: <word>`` line (any case, markdown decoration, synonyms such as sequential or
    independent); otherwise the reply counts when it names exactly one of the two labels.
    """
    if not text:
        return UNKNOWN
    m = _ROUTE_LINE.search(text)
    if m and m.group(1).lower() in _SYNONYMS:
        return _SYNONYMS[m.group(1).lower()]
    found = {_SYNONYMS[w.lower()] for w in _LABEL_WORD.findall(text)}
    return found.pop() if len(found) == 1 else UNKNOWN


def sample_questions(questions: Iterable[dict], n_per_dataset: int, seed: int) -> list[dict]:
    """Up to ``n_per_dataset`` questions of each dataset, chosen by a seeded hash of the question id
    (stable when other records are added or removed), returned sorted by question id."""
    by_dataset: dict[str, list[dict]] = {}
    for q in questions:
        by_dataset.setdefault(q["dataset"], []).append(q)
    chosen = []
    for dataset in sorted(by_dataset):
        ranked = sorted(
            by_dataset[dataset], key=lambda q: (unit_hash("routes", seed, q["question_id"]), q["question_id"])
        )
        chosen.extend(ranked[:n_per_dataset])
    return sorted(chosen, key=lambda q: q["question_id"])


def classify_routes(questions: Sequence[dict], llm: LLM, params: RoutesParams) -> list[dict]:
    """Ask ``llm`` (greedy, in one call: the backend batches, and the progress bar shows its calls and
    tokens as they go) for the route of every question, in at most ``params.max_new_tokens`` tokens.

    Returns one row per question, in input order: question_id, dataset, qtype, gold (the corpus's
    route), predicted (parallel | chain | unknown), raw reply, error (the LLM error, if the call
    failed: predicted is then unknown), prompt_version.
    """
    sampling = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=params.max_new_tokens, seed=0)
    requests = []
    for q in questions:
        messages = route_messages(q["question"])  # the same instructions and examples, then the question
        requests.append(ChatRequest.of(messages, sampling, shared_messages=len(messages) - 1))
    with progress(total=len(requests), desc="classify-routes", unit="q") as bar:
        responses = llm.generate(requests)
        bar.update(len(requests))
    if len(responses) != len(requests):
        raise RuntimeError(f"LLM returned {len(responses)} responses for {len(requests)} requests")
    rows = []
    for q, resp in zip(questions, responses):
        rows.append(
            {
                "question_id": q["question_id"],
                "dataset": q["dataset"],
                "qtype": q["qtype"],
                "gold": q["route"],
                "predicted": parse_route(resp.text) if resp.ok else UNKNOWN,
                "raw": resp.text or "",
                "error": resp.error,
                "prompt_version": PROMPT_VERSION,
            }
        )
    return rows


def _scores(rows: Sequence[dict]) -> dict:
    n = len(rows)
    correct = sum(r["predicted"] == r["gold"] for r in rows)
    unknown = sum(r["predicted"] == UNKNOWN for r in rows)
    parsed = n - unknown
    confusion = {
        gold: {
            pred: sum(1 for r in rows if r["gold"] == gold and r["predicted"] == pred)
            for pred in (*ROUTES, UNKNOWN)
        }
        for gold in sorted({*ROUTES, *(r["gold"] for r in rows)})
    }
    return {
        "questions": n,
        "correct": correct,
        "accuracy": correct / n if n else None,  # unknown counts as wrong
        "unknown": unknown,
        "llm_errors": sum(1 for r in rows if r.get("error")),
        "accuracy_parsed": correct / parsed if parsed else None,  # over replies that named a route
        "confusion": confusion,  # gold -> predicted -> count
        "gold_routes": dict(sorted(Counter(r["gold"] for r in rows).items())),
        "predicted_routes": dict(sorted(Counter(r["predicted"] for r in rows).items())),
    }


def route_metrics(rows: Sequence[dict]) -> dict:
    """Accuracy and confusion matrix (gold x predicted, predicted including ``unknown``) overall,
    per dataset and per question type."""
    datasets = sorted({r["dataset"] for r in rows})
    qtypes = sorted({(r["dataset"], r["qtype"]) for r in rows})
    return {
        "overall": _scores(rows),
        "by_dataset": {d: _scores([r for r in rows if r["dataset"] == d]) for d in datasets},
        "by_qtype": {
            f"{d}/{t}": _scores([r for r in rows if (r["dataset"], r["qtype"]) == (d, t)]) for d, t in qtypes
        },
    }
