"""Evaluation and pool questions at full size synthesised from the shared samples (bench/decontamination.py).

Every real question (train and dev samples, the three datasets) becomes a skeleton: its normalised words,
with each supporting title it names turned into a title slot and each rare word (in at most two real
questions) into a word slot. A synthesised question is a skeleton drawn at random with its slots filled by
other real titles (any paragraph title of the samples) and other rare words, so the questions are distinct
while their frequent words follow the real ones: 2WikiMultihopQA's skeletons coincide wherever its questions
share a template, and so repeat as often as its templates do. Answers are drawn from the answers of the
skeleton's dataset (a yes/no skeleton keeps yes/no), supporting titles are the titles filled in plus random
ones up to the skeleton's count. Sizes follow the official files: dev 7,405 HotpotQA, 12,576 2Wiki, 2,417
MuSiQue questions (22,398); train 90,447, 167,454 and 19,938 (277,839).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from factory.utils.text import normalize_answer

DEV_SIZES = {"hotpotqa": 7405, "2wikimultihopqa": 12576, "musique": 2417}
TRAIN_SIZES = {"hotpotqa": 90447, "2wikimultihopqa": 167454, "musique": 19938}
TITLE, WORD = "\x00T", "\x00W"  # slot markers (no normalised word holds a NUL)


@dataclass
class Skeleton:
    dataset: str
    words: list[str]  # normalised words and slot markers
    n_titles: int  # supporting titles of the question it came from
    yes_no: bool


def skeletons(questions: list[dict]) -> list[Skeleton]:
    df = Counter(w for q in questions for w in set(q["question_norm"].split()))
    out = []
    for q in questions:
        titles = {normalize_answer(f["title"]) for f in q["supporting"]}
        words = _slot_titles(q["question_norm"].split(), titles)
        words = [WORD if w not in (TITLE,) and df[w] <= 2 else w for w in words]
        yes_no = normalize_answer(q["answers"][0]) in ("yes", "no")
        out.append(Skeleton(q["dataset"], words, len(titles), yes_no))
    return out


def _slot_titles(words: list[str], titles: set[str]) -> list[str]:
    """The words with every title's word sequence (longest first) replaced by one title slot."""
    for title in sorted(titles, key=lambda t: -len(t.split())):
        seq = title.split()
        if not seq:
            continue
        i = 0
        while i + len(seq) <= len(words):
            if words[i : i + len(seq)] == seq:
                words = words[:i] + [TITLE] + words[i + len(seq) :]
            i += 1
    return words


class Synthesiser:
    """Draws synthesised rows: ``eval_rows`` (the evaluation side, distinct) and ``pool_batches`` (streamed, a
    batch at a time, never all in memory; none equal to a real or evaluation question, and equal to each
    other only by a chance draw of the same fills, which the bench counts)."""

    def __init__(self, questions: list[dict], seed: int = 0):
        self.skeletons: dict[str, list[Skeleton]] = {}
        for s in skeletons(questions):
            if TITLE in s.words or WORD in s.words:  # a skeleton without slots would repeat one text
                self.skeletons.setdefault(s.dataset, []).append(s)
        titles = {p["title"] for q in questions for p in q["passages"]}
        self.titles = sorted(titles)
        self.title_words = {t: normalize_answer(t).split() for t in self.titles}
        df = Counter(w for q in questions for w in set(q["question_norm"].split()))
        words = {w for t in self.titles for w in self.title_words[t]} | {w for w, n in df.items() if n <= 2}
        self.rare_words = sorted(w for w in words if df[w] <= 2 and len(w) >= 3)
        self.answers = {
            d: sorted({q["answers"][0] for q in questions if q["dataset"] == d}) for d in self.skeletons
        }
        self.seen = {q["question_norm"] for q in questions}
        self.seed = seed

    def row(self, rng: random.Random, dataset: str, n: int) -> dict:
        while True:
            s = rng.choice(self.skeletons[dataset])
            filled, titles = [], []
            for w in s.words:
                if w == TITLE:
                    title = rng.choice(self.titles)
                    titles.append(title)
                    filled += self.title_words[title]
                else:
                    filled.append(rng.choice(self.rare_words) if w == WORD else w)
            norm = " ".join(filled)
            if norm not in self.seen:
                break
        titles += rng.sample(self.titles, max(0, s.n_titles - len(titles)))
        answer = rng.choice(["yes", "no"]) if s.yes_no else rng.choice(self.answers[dataset])
        qid = f"{dataset}/synth-{n}"
        return {
            "question_id": qid,
            "source_id": qid,
            "eval_set": f"{dataset}/synth",
            "eval_id": qid,
            "dataset": dataset,
            "question_norm": norm,
            "answers": [answer],
            "titles": titles,
        }

    def eval_rows(self, scale: float) -> list[dict]:
        rng = random.Random(f"{self.seed}:eval")
        plan = [d for d, n in DEV_SIZES.items() for _ in range(round(n * scale))]
        rows = []
        for i, d in enumerate(plan):
            rows.append(self.row(rng, d, f"e{i}"))
            self.seen.add(rows[-1]["question_norm"])  # the pool never repeats an evaluation question
        return rows

    def pool_batches(self, scale: float, batch_size: int) -> Iterator[list[dict]]:
        """The pool in batches, datasets interleaved as a shuffled plan (drawn from the seed alone)."""
        rng = random.Random(f"{self.seed}:pool")
        plan = [d for d, n in TRAIN_SIZES.items() for _ in range(round(n * scale))]
        rng.shuffle(plan)
        for start in range(0, len(plan), batch_size):
            yield [self.row(rng, d, f"p{start + i}") for i, d in enumerate(plan[start : start + batch_size])]
