"""Grounding: attribute a triplet to the retrieved passage (and sentence) that supports it best.

A triplet ``(subject ; relation ; object)`` is supported by a sentence when its subject and its object
are both *named* there, not when their tokens are scattered over a passage. Tokens are content tokens
(``factory.utils.text.content_tokens``: lower case, accents folded, stop words dropped). A side is named in
a piece of text to the extent that its tokens occur *together*: the share of the side's tokens found
inside one window of (its length + ``NAME_SLACK``) consecutive tokens (a middle name or a title may
sit between: "Pedro de Valderrama" in "Father Pedro de Valderrama"). Per sentence:

- the object must be named in that sentence, or in the passage's title (the title states it:
  "Tucson, Arizona");
- the subject in that sentence, the title, or an earlier sentence of the passage (a later sentence
  refers to it by pronoun: "He was born in Denver." in the passage "Scott Derrickson").

The sentence's score is ``min(subject share, object share)``; the passage's score is its best
sentence's, which must reach the threshold; ties go to the earlier passage, and within a passage to
the sentence with the better object share, then subject share, then the earlier one (the grounding
sentence). A triplet supported by no passage is ungrounded (``pid is None``): the model stated
something its retrieved passages do not say.

Measured on the shared real graphs (``bench/real_graphs.py``'s records: each triplet's true passage is
the one it was extracted from), this keeps the attributions of passage-wide token overlap (95% of
triplets to their own passage on the development part) while refusing tokens collected from
different sentences.

This runs for every triplet the agent creates, so passage tokens are cached by content, and a
passage is scored by sentence only when its passage-wide overlap could reach the best score so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from factory.utils.errors import FactoryError
from factory.utils.text import content_tokens

NAME_SLACK = 3  # other tokens a name's tokens may have between them and still name it


@dataclass(frozen=True)
class Grounding:
    """Where a triplet is supported: passage id (None = ungrounded), sentence index, passage score."""

    pid: str | None
    sentence: int | None
    score: float


UNGROUNDED = Grounding(None, None, 0.0)


@dataclass(frozen=True)
class _Side:
    tokens: tuple[str, ...]
    distinct: frozenset[str]


@lru_cache(maxsize=65536)
def _side(text: str) -> _Side:
    tokens = tuple(content_tokens(text))
    return _Side(tokens, frozenset(tokens))


@dataclass(frozen=True)
class _Passage:
    whole: frozenset[str]  # tokens of title + text
    title: tuple[str, ...]
    sentences: tuple[tuple[str, ...], ...]


@lru_cache(maxsize=32768)
def _passage_tokens(pid: str, title: str, sentences: tuple[str, ...]) -> _Passage:
    """Tokens of the title and of each sentence; keyed by content so edits never go stale."""
    per_sentence = tuple(tuple(content_tokens(s)) for s in sentences)
    title_tokens = tuple(content_tokens(title))
    return _Passage(frozenset(title_tokens).union(*per_sentence), title_tokens, per_sentence)


def _share(side: _Side, tokens: frozenset[str]) -> float:
    return len(side.distinct & tokens) / len(side.distinct) if side.distinct else 0.0


def named_share(side: _Side, tokens: Sequence[str]) -> float:
    """Share of the side's distinct tokens that occur together in ``tokens``: inside one window of
    len(side) + NAME_SLACK consecutive tokens (module docstring)."""
    wanted = side.distinct
    if not wanted:
        return 0.0
    positions = [i for i, t in enumerate(tokens) if t in wanted]
    if not positions:
        return 0.0
    width = len(side.tokens) + NAME_SLACK
    counts: dict[str, int] = {}
    best = left = 0
    for at in positions:
        token = tokens[at]
        counts[token] = counts.get(token, 0) + 1
        while at - positions[left] >= width:
            gone = tokens[positions[left]]
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
            left += 1
        best = max(best, len(counts))
    return best / len(wanted)


def _sentence_keys(subj: _Side, ob: _Side, passage: _Passage) -> list[tuple[float, float, float]]:
    """(score, object share, subject share) of each sentence (module docstring)."""
    object_in_title = named_share(ob, passage.title)
    subject_seen = named_share(subj, passage.title)
    keys = []
    for tokens in passage.sentences:
        subject_here, object_here = named_share(subj, tokens), named_share(ob, tokens)
        subject_seen = max(subject_seen, subject_here)
        keys.append((min(subject_seen, max(object_here, object_in_title)), object_here, subject_here))
    return keys


def _tokens_of(passage: Mapping) -> _Passage:
    try:
        return _passage_tokens(
            str(passage["pid"]), passage.get("title") or "", tuple(passage.get("sentences") or ())
        )
    except (KeyError, TypeError) as exc:
        raise FactoryError(
            "grounding: a passage must be a record with pid, title and sentences (got "
            f"{type(passage).__name__}: {exc})"
        ) from None


def _best(subj: _Side, ob: _Side, passage: _Passage) -> tuple[float, int | None]:
    """(passage score, grounding sentence): the best sentence's; a passage without sentences is scored
    on its title alone."""
    keys = _sentence_keys(subj, ob, passage)
    if not keys:
        return min(named_share(subj, passage.title), named_share(ob, passage.title)), None
    index = max(range(len(keys)), key=lambda i: (keys[i], -i))
    return keys[index][0], index


def best_sentence(subject: str, obj: str, passage: Mapping) -> int | None:
    """Index of the passage sentence that states the triplet best (module docstring; earliest on ties)."""
    return _best(_side(subject or ""), _side(obj or ""), _tokens_of(passage))[1]


def ground_triplet(
    subject: str, relation: str, obj: str, passages: Sequence[Mapping], threshold: float
) -> Grounding:
    """The passage (and sentence) among ``passages`` ({pid, title, sentences}) that supports the triplet best,
    when its score reaches ``threshold`` (agent.grounding_threshold).

    ``relation`` is not scored (relations are paraphrased freely); it is part of the signature so callers
    pass whole triplets. A side without content tokens (e.g. "the") cannot be found, so it never grounds.
    """
    subj, ob = _side(subject or ""), _side(obj or "")
    if not subj.distinct or not ob.distinct:
        return UNGROUNDED
    best_i, best_score, best_at = -1, 0.0, None
    for i, passage in enumerate(passages):
        tokens = _tokens_of(passage)
        # a name's share in one sentence never exceeds its share in the whole passage
        if min(_share(subj, tokens.whole), _share(ob, tokens.whole)) <= best_score:
            continue
        score, at = _best(subj, ob, tokens)
        if score > best_score:  # strict: ties keep the earlier passage
            best_i, best_score, best_at = i, score, at
    if best_i < 0 or best_score < threshold:
        return Grounding(None, None, best_score)
    return Grounding(str(passages[best_i]["pid"]), best_at, best_score)


def retrieved_passages(tid: str, step: Mapping, passages_by_pid: Mapping[str, Mapping]) -> list[Mapping]:
    """The passages ``step`` retrieved, in order; a pid missing from ``passages_by_pid`` is an error
    naming the trajectory, step and pid."""
    pool = []
    for pid in step.get("retrieved") or []:
        if pid not in passages_by_pid:
            raise FactoryError(
                f"trajectory {tid!r}: step {step.get('index')} retrieved passage {pid!r}, which is not among "
                "the passages given (data/interim/passages.parquet)"
            )
        pool.append(passages_by_pid[pid])
    return pool


def ground_trajectory(trajectory: Mapping, passages_by_pid: Mapping[str, Mapping], threshold: float) -> dict:
    """A copy of ``trajectory`` whose triplets are (re)grounded against their step's retrieved passages
    (``ground_triplet`` at ``threshold``).

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
            pools[idx] = retrieved_passages(tid, step, passages_by_pid)
        g = ground_triplet(t["subject"], t["relation"], t["object"], pools[idx], threshold)
        triplets.append({**t, "source_pid": g.pid, "source_sentence": g.sentence, "grounding_score": g.score})
    return {**trajectory, "triplets": triplets}
