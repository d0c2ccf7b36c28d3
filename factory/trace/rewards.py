"""TRACE reward functions for RL trainers (TRL ``GRPOTrainer`` signature) and the protocol parser.

The TRACE output protocol (docs/design.md §6)::

    <relevance>[1, 3]</relevance>
    <analysis>Scott Derrickson (nationality): American [1]. ...</analysis>
    <answer>yes</answer>

Every reward function has TRL's reward-function signature ``(completions, **kwargs) -> list[float]``:
``completions`` are strings or chat message lists (``[{"role": "assistant", "content": ...}]``),
and ``kwargs`` carry the dataset columns, one value per completion (``gold_answers``,
``gold_relevant_indices``; anything else, e.g. ``prompts`` or ``trainer_state``, is ignored).

The four components are independent: accuracy and relevance read their tag even when the format is
broken, so each signal stays informative on its own; the bonus is what rewards getting all three
right at once (the TRACE ablation shows relevance collapses without it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factory.params.round_sections import TraceParams
from factory.utils.errors import FactoryError
from factory.utils.metrics import exact_match

TAGS = ("relevance", "analysis", "answer")
# the defaults of params.trace, for the reward functions called on their own (TRL, notebooks)
DEFAULT_BONUS_WEIGHT: float = TraceParams().bonus_weight
DEFAULT_WEIGHTS: dict[str, float] = dict(TraceParams().reward_weights)

_TAG = re.compile(r"</?(relevance|analysis|answer)>")
_INDEX_LIST = re.compile(r"^\[\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\]$")


@dataclass(frozen=True)
class TraceOutput:
    """A completion that follows the TRACE protocol exactly."""

    relevance: tuple[int, ...]  # passage indices in the order written (1-based, no duplicates)
    analysis: str
    answer: str


# ---------------------------------------------------------------- parsing


def completion_text(completion: str | Sequence[Mapping[str, Any]] | None) -> str:
    """The text of one completion: a string as is; for a chat message list, the assistant content.

    Content given as parts (``[{"type": "text", "text": ...}]``) is joined. Several assistant
    messages are joined with newlines; a list without assistant messages yields "".
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    texts = []
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, Sequence):
            texts.append("".join(p.get("text", "") for p in content if isinstance(p, Mapping)))
    return "\n".join(texts)


def parse_index_list(text: str) -> list[int] | None:
    """``"[1, 3]"`` -> [1, 3]; ``"[]"`` -> []; anything else (no brackets, non-integers, signs,
    trailing commas) -> None. Duplicates are returned as written (the caller decides)."""
    body = text.strip()
    if not _INDEX_LIST.match(body):
        return None
    return [int(x) for x in re.findall(r"\d+", body)]


def format_problem(text: str) -> str | None:
    """Why ``text`` does not follow the TRACE protocol exactly, or None when it does."""
    tags = [(m.group(0), m.start(), m.end()) for m in _TAG.finditer(text)]
    expected = [t for name in TAGS for t in (f"<{name}>", f"</{name}>")]
    found = [t for t, _, _ in tags]
    if found != expected:
        for tag in expected:
            if found.count(tag) != 1:
                return f"tag {tag} appears {found.count(tag)} times (expected exactly once)"
        return f"tags out of order: {' '.join(found)} (expected {' '.join(expected)})"
    cursor = 0
    for i in range(0, len(tags), 2):
        _, open_start, open_end = tags[i]
        _, close_start, close_end = tags[i + 1]
        if text[cursor:open_start].strip():
            return f"text outside the tags: {text[cursor:open_start].strip()[:40]!r}"
        cursor = close_end
        name = TAGS[i // 2]
        body = text[open_end:close_start]
        if name == "relevance":
            indices = parse_index_list(body)
            if indices is None:
                return f"relevance is not an index list [i, j, ...]: {body.strip()[:40]!r}"
            if len(set(indices)) != len(indices):
                return f"relevance lists an index twice: {body.strip()!r}"
        elif not body.strip():
            return f"<{name}> is empty"
    if text[cursor:].strip():
        return f"text outside the tags: {text[cursor:].strip()[:40]!r}"
    return None


def parse_trace(text: str) -> TraceOutput | None:
    """The completion as a TraceOutput when it follows the protocol exactly (see ``format_reward``),
    else None (``format_problem`` says why)."""
    if format_problem(text) is not None:
        return None
    relevance = tag_body(text, "relevance")
    return TraceOutput(
        relevance=tuple(parse_index_list(relevance or "") or ()),
        analysis=(tag_body(text, "analysis") or "").strip(),
        answer=(tag_body(text, "answer") or "").strip(),
    )


def tag_body(text: str, name: str) -> str | None:
    """The content of the single ``<name>...</name>`` block, or None when there is not exactly one."""
    blocks = re.findall(rf"<{name}>(.*?)</{name}>", text, flags=re.DOTALL)
    return blocks[0] if len(blocks) == 1 else None


# ---------------------------------------------------------------- per-completion scores


def format_score(text: str) -> float:
    return 1.0 if format_problem(text) is None else 0.0


def accuracy_score(text: str, gold_answers: Sequence[str]) -> float:
    answer = tag_body(text, "answer")
    if answer is None or not answer.strip():
        return 0.0
    return exact_match(answer.strip(), list(gold_answers))


def relevance_score(text: str, gold_indices: Sequence[int]) -> float:
    body = tag_body(text, "relevance")
    predicted = set(parse_index_list(body) or []) if body is not None else set()
    gold = {int(i) for i in gold_indices}
    if not predicted or not gold:
        return 0.0
    if predicted == gold:
        return 1.0
    return 0.5 if predicted & gold else 0.0


def score_completion(
    text: str,
    gold_answers: Sequence[str],
    gold_indices: Sequence[int],
    bonus_weight: float = DEFAULT_BONUS_WEIGHT,
) -> dict[str, float]:
    """All four components for one completion text: {format, accuracy, relevance, bonus}."""
    fmt = format_score(text)
    acc = accuracy_score(text, gold_answers)
    rel = relevance_score(text, gold_indices)
    bonus = float(bonus_weight) if fmt == 1.0 and acc == 1.0 and rel == 1.0 else 0.0
    return {"format": fmt, "accuracy": acc, "relevance": rel, "bonus": bonus}


# ---------------------------------------------------------------- TRL reward functions


def _column(kwargs: Mapping[str, Any], name: str, n: int) -> list:
    if name not in kwargs or kwargs[name] is None:
        raise FactoryError(
            f"TRACE reward: dataset column {name!r} is missing (export RL records with `factory "
            "export-trace`)"
        )
    values = list(kwargs[name])
    if len(values) != n:
        raise FactoryError(f"TRACE reward: column {name!r} has {len(values)} values for {n} completions")
    for i, v in enumerate(values):
        if v is None or isinstance(v, str):
            raise FactoryError(f"TRACE reward: column {name!r}, completion {i}: expected a list, got {v!r}")
    return values


def format_reward(completions: Sequence, **kwargs: Any) -> list[float]:
    """1.0 iff the completion follows the TRACE protocol exactly, else 0.0.

    Exactly: each of ``<relevance>``, ``</relevance>``, ``<analysis>``, ``</analysis>``,
    ``<answer>``, ``</answer>`` appears exactly once (lower case), in the order relevance ->
    analysis -> answer, without nesting; only whitespace outside the three blocks; the relevance
    block is an index list ``[i, j, ...]`` of non-negative integers without duplicates — the empty
    list ``[]`` is well formed (it states "no passage is used"; the relevance reward gives it 0);
    analysis and answer are not empty. Out-of-range indices do not break the format (the format
    does not know how many passages were shown; relevance counts them as wrong indices).
    """
    return [format_score(completion_text(c)) for c in completions]


def accuracy_reward(completions: Sequence, **kwargs: Any) -> list[float]:
    """1.0 iff the content of the single ``<answer>`` block matches a gold answer by exact match
    after the official SQuAD/HotpotQA normalisation (``factory.utils.metrics.exact_match``: any alias in
    ``gold_answers`` counts; yes/no are compared like any other normalised string), else 0.0.

    No ``<answer>`` block, an empty one, or several of them (ambiguous) -> 0.0. The rest of the
    format is not required (that is the format reward's job).
    """
    golds = _column(kwargs, "gold_answers", len(completions))
    return [accuracy_score(completion_text(c), g) for c, g in zip(completions, golds)]


def relevance_reward(completions: Sequence, **kwargs: Any) -> list[float]:
    """Predicted passage set vs ``gold_relevant_indices`` (the numbered passages that are gold
    supporting paragraphs): 1.0 if the sets are equal, 0.5 if they overlap without being equal,
    0.0 if they are disjoint or either is empty.

    The predicted set is read from the single ``<relevance>`` block as an index list; a missing,
    repeated or malformed block (not ``[i, j, ...]``) gives 0.0. Duplicated indices count once.
    Out-of-range indices (0, or beyond the passages shown) are wrong indices: they prevent equality
    (at most 0.5 when a gold index is also listed). An empty gold set (no gold paragraph among the
    shown passages, ``gold_coverage == "none"``) gives 0.0 for every completion.
    """
    golds = _column(kwargs, "gold_relevant_indices", len(completions))
    return [relevance_score(completion_text(c), g) for c, g in zip(completions, golds)]


def bonus_reward(
    completions: Sequence, bonus_weight: float = DEFAULT_BONUS_WEIGHT, **kwargs: Any
) -> list[float]:
    """``bonus_weight`` (default: ``params.trace.bonus_weight``'s) iff format, accuracy and
    relevance are all 1.0 for the completion, else 0.0 (TRACE's holistic-alignment bonus)."""
    golds = _column(kwargs, "gold_answers", len(completions))
    indices = _column(kwargs, "gold_relevant_indices", len(completions))
    return [
        score_completion(completion_text(c), g, i, bonus_weight)["bonus"]
        for c, g, i in zip(completions, golds, indices)
    ]


def trace_reward(
    completions: Sequence,
    weights: Mapping[str, float] | None = None,
    bonus_weight: float = DEFAULT_BONUS_WEIGHT,
    **kwargs: Any,
) -> list[float]:
    """The TRACE reward: ``w_format * format + w_accuracy * accuracy + w_relevance * relevance +
    bonus`` where the bonus is ``bonus_weight`` iff the three are all 1.0 (weights default to 1;
    ``params.trace.reward_weights``). With defaults a perfect completion earns 13."""
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    golds = _column(kwargs, "gold_answers", len(completions))
    indices = _column(kwargs, "gold_relevant_indices", len(completions))
    out = []
    for c, g, i in zip(completions, golds, indices):
        s = score_completion(completion_text(c), g, i, bonus_weight)
        out.append(
            w["format"] * s["format"]
            + w["accuracy"] * s["accuracy"]
            + w["relevance"] * s["relevance"]
            + s["bonus"]
        )
    return out


def make_reward_functions(
    params: TraceParams | None = None, combined: bool = False
) -> list[Callable[..., list[float]]]:
    """Reward functions ready for ``GRPOTrainer(reward_funcs=...)``, named for TRL's logs, with
    ``params.bonus_weight`` and ``params.reward_weights`` (``trace`` in params.yaml; None: the defaults
    of ``factory.params.round_sections.TraceParams``; a component without a weight weighs 1).

    ``combined=False``: the four components (format, accuracy, relevance, bonus) as separate
    functions, to be weighted by ``GRPOConfig.reward_weights`` (pass ``[w_f, w_a, w_r, 1]``);
    ``combined=True``: a single ``trace_reward`` with the weights and bonus weight bound.
    """
    params = params or TraceParams()
    bonus_weight = params.bonus_weight
    w = {**DEFAULT_WEIGHTS, **params.reward_weights}

    def trace_bonus(completions: Sequence, **kwargs: Any) -> list[float]:
        return bonus_reward(completions, bonus_weight=bonus_weight, **kwargs)

    def trace_total(completions: Sequence, **kwargs: Any) -> list[float]:
        return trace_reward(completions, weights=w, bonus_weight=bonus_weight, **kwargs)

    trace_bonus.__doc__, trace_total.__doc__ = bonus_reward.__doc__, trace_reward.__doc__
    if combined:
        return [trace_total]
    return [format_reward, accuracy_reward, relevance_reward, trace_bonus]
