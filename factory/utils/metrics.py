"""Answer metrics exactly as the official HotpotQA evaluation script defines them.

EM: normalised strings equal. F1: token-count (multiset) F1 over normalised tokens, not a set F1.
When either normalised string is 'yes', 'no' or 'noanswer' and they differ, F1 is 0. Against
several gold answers (answer plus aliases) the maximum is taken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from factory.utils.text import normalize_answer

_SPECIAL = ("yes", "no", "noanswer")


def _as_list(answers: str | Iterable[str]) -> list[str]:
    return [answers] if isinstance(answers, str) else [a for a in answers if a is not None]


def exact_match(prediction: str | None, answers: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction or "")
    return float(any(pred == normalize_answer(a) for a in _as_list(answers)))


def _f1_single(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str | None, answers: str | Iterable[str]) -> float:
    """Token-count F1 against the best-matching gold answer (official HotpotQA rule for yes/no/noanswer)."""
    golds = _as_list(answers)
    if not golds:
        return 0.0
    return max(_f1_single(prediction or "", g) for g in golds)
