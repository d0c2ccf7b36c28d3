"""Grounding: attribute a triplet to the retrieved passage (and sentence) that supports it best.

A triplet ``(subject ; relation ; object)`` is supported by a passage when both its subject and its
object are found there. "Found" is the share of a side's content tokens (``factory.text.
content_tokens``: lower case, accents folded, stop words dropped) present in the passage's title +
text; the subject is usually the passage's title, which is why the title counts. The passage score
is ``min(subject share, object share)`` and must reach the threshold; ties go to the earlier
passage. Within the winning passage the sentence with the best object share (then subject share,
then the earlier one) is the grounding sentence. A triplet supported by no passage is ungrounded
(``pid is None``): the model stated something its retrieved passages do not say.

This runs for every triplet the agent creates, so passage token sets are cached by content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from factory.errors import FactoryError
from factory.text import content_tokens


@dataclass(frozen=True)
class Grounding:
    """Where a triplet is supported: passage id (None = ungrounded), sentence index, passage score."""

    pid: str | None
    sentence: int | None
    score: float


UNGROUNDED = Grounding(None, None, 0.0)


@lru_cache(maxsize=65536)
def _side_tokens(text: str) -> frozenset[str]:
    return frozenset(content_tokens(text))


@lru_cache(maxsize=32768)
def _passage_tokens(
    pid: str, title: str, sentences: tuple[str, ...]
) -> tuple[frozenset[str], tuple[frozenset[str], ...]]:
    """(tokens of title + text, tokens of each sentence); keyed by content so edits never go stale."""
    per_sentence = tuple(frozenset(content_tokens(s)) for s in sentences)
    whole = frozenset(content_tokens(title)).union(*per_sentence)
    return whole, per_sentence


def _share(side: frozenset[str], tokens: frozenset[str]) -> float:
    return len(side & tokens) / len(side) if side else 0.0


def _tokens_of(passage: Mapping) -> tuple[frozenset[str], tuple[frozenset[str], ...]]:
    try:
        return _passage_tokens(
            str(passage["pid"]), passage.get("title") or "", tuple(passage.get("sentences") or ())
        )
    except (KeyError, TypeError) as exc:
        raise FactoryError(
            "grounding: a passage must be a record with pid, title and sentences (got "
            f"{type(passage).__name__}: {exc})"
        ) from None


def best_sentence(subject: str, obj: str, passage: Mapping) -> int | None:
    """Index of the passage sentence with the best object share, then subject share (earliest on ties)."""
    subj, ob = _side_tokens(subject or ""), _side_tokens(obj or "")
    _, sentences = _tokens_of(passage)
    best, best_key = None, (-1.0, -1.0)
    for i, tokens in enumerate(sentences):
        key = (_share(ob, tokens), _share(subj, tokens))
        if key > best_key:
            best, best_key = i, key
    return best


def ground_triplet(
    subject: str, relation: str, obj: str, passages: Sequence[Mapping], threshold: float = 0.5
) -> Grounding:
    """The passage (and sentence) among ``passages`` ({pid, title, sentences}) that supports the triplet best.

    ``relation`` is not scored (relations are paraphrased freely); it is part of the signature so callers
    pass whole triplets. A side without content tokens (e.g. "the") cannot be found, so it never grounds.
    """
    subj, ob = _side_tokens(subject or ""), _side_tokens(obj or "")
    if not subj or not ob:
        return UNGROUNDED
    best_i, best_score = -1, 0.0
    for i, passage in enumerate(passages):
        whole, _ = _tokens_of(passage)
        score = min(_share(subj, whole), _share(ob, whole))
        if score > best_score:  # strict: ties keep the earlier passage
            best_i, best_score = i, score
    if best_i < 0 or best_score < threshold:
        return Grounding(None, None, best_score)
    passage = passages[best_i]
    return Grounding(str(passage["pid"]), best_sentence(subject, obj, passage), best_score)


def ground_trajectory(
    trajectory: Mapping, passages_by_pid: Mapping[str, Mapping], threshold: float = 0.5
) -> dict:
    """A copy of ``trajectory`` whose triplets are (re)grounded against their step's retrieved passages.

    Sets ``source_pid``, ``source_sentence`` and ``grounding_score`` of every triplet. A retrieved pid
    missing from ``passages_by_pid`` is an error naming the trajectory, step and pid.
    """
    tid = trajectory.get("trajectory_id", "?")
    steps = {s["index"]: s for s in trajectory.get("steps") or []}
    pools: dict[int, list[Mapping]] = {}
    triplets = []
    for t in trajectory.get("triplets") or []:
        idx = t["step_index"]
        if idx not in pools:
            step = steps.get(idx)
            if step is None:
                raise FactoryError(
                    f"trajectory {tid!r}: triplet {t.get('triplet_id')!r} refers to step {idx}, which "
                    "does not exist"
                )
            pool = []
            for pid in step.get("retrieved") or []:
                if pid not in passages_by_pid:
                    raise FactoryError(
                        f"trajectory {tid!r}: step {idx} retrieved passage {pid!r}, which is not among "
                        "the passages given"
                    )
                pool.append(passages_by_pid[pid])
            pools[idx] = pool
        g = ground_triplet(t["subject"], t["relation"], t["object"], pools[idx], threshold)
        triplets.append({**t, "source_pid": g.pid, "source_sentence": g.sentence, "grounding_score": g.score})
    return {**trajectory, "triplets": triplets}
