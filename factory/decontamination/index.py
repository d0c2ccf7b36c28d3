"""``EvalIndex``: the evaluation questions indexed once; batches of pool questions matched against them.

Exact and same-chain matches are dictionary look-ups. Near duplicates go through an inverted index of
words: a pool batch and the evaluation questions are sparse word matrices, and one sparse product (scipy)
gives, for every pair sharing an indexed word, the IDF weight they share; a pool word that no evaluation
question has stands for its typo neighbours (``typos``). Pairs whose candidate Dice reaches
``candidate_min`` are then scored exactly (``similarity.soft_dice``, typos paired with rapidfuzz). Words in
more than ``max_df`` of the evaluation questions are left out of the index (they still count in the score):
2WikiMultihopQA's template words ("who was born first") are in thousands of questions, and indexing them
would make every templated question a candidate of every other. An inverted index is
written here rather than taken from a search library because what is needed is the candidate's shared
weight for a whole batch at once, which a sparse product gives directly; MinHash-LSH (datasketch, not a
dependency) estimates unweighted Jaccard, which the template words dominate in questions this short.

Memory follows the evaluation side (its word matrix and weighed words) plus one batch of ``batch_size`` pool
questions; results do not depend on the batch size, nor on the order of the evaluation rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from scipy import sparse

from factory.decontamination import chain
from factory.decontamination.similarity import Vocabulary, soft_dice
from factory.decontamination.typos import TypoNeighbours
from factory.params.data_sections import DecontaminationParams

RULES = ("exact", "near_duplicate", "same_chain")  # strongest first: the order a match is chosen in
_RANK = {rule: rank for rank, rule in enumerate(RULES)}
_DIGITS = 4  # scores are rounded so that ties (and the choice among them) do not hang on float noise


class Match(NamedTuple):
    """An evaluation question that a pool question matches, by which rule and how strongly (0-1)."""

    rule: str
    score: float
    eval_set: str
    eval_id: str


def best_first(match: Match) -> tuple:
    """Sort key: exact > near_duplicate > same_chain, then the higher score, then (eval_set, eval_id)."""
    return (_RANK[match.rule], -match.score, match.eval_set, match.eval_id)


class EvalIndex:
    """The evaluation rows (``factory.decontamination.rows``), indexed for the rules in ``params.rules``."""

    def __init__(self, eval_rows: Iterable[dict], params: DecontaminationParams):
        self.params = params
        # sorted so that index positions, hence candidate ties, follow (eval_set, eval_id)
        rows = sorted(eval_rows, key=lambda r: (r["eval_set"], r["eval_id"]))
        self.keys = [(r["eval_set"], r["eval_id"]) for r in rows]
        self.norms = [r["question_norm"] for r in rows]
        self.vocab = Vocabulary(norm.split() for norm in self.norms)
        self.weighed = [self.vocab.weigh(norm) for norm in self.norms]
        self.totals = np.array([sum(w.values()) for w in self.weighed], dtype=np.float64)
        self.titles = [chain.titles_key(r["titles"]) for r in rows]
        self.exact: dict[str, list[int]] = {}
        self.chains: dict[tuple[tuple[str, ...], str], list[int]] = {}
        for i, row in enumerate(rows):
            self.exact.setdefault(row["question_norm"], []).append(i)
            for answer in chain.answer_keys(row["answers"]) if self.titles[i] else ():
                self.chains.setdefault((self.titles[i], answer), []).append(i)
        self.indexed = self.vocab.df <= max(params.min_df_cap, params.max_df * self.vocab.n)
        self.postings = self._postings()
        self.typos = TypoNeighbours((token, t) for token, t in self.vocab.ids.items() if self.indexed[t])
        # each evaluation question's weight in unindexed words (see _near_candidates)
        self.templated = np.array(
            [
                sum(w for token, w in weighed.items() if not self.indexed[self.vocab.ids[token]])
                for weighed in self.weighed
            ]
        )

    def __len__(self) -> int:
        return len(self.keys)

    def _postings(self) -> sparse.csr_matrix:
        """Indexed word x evaluation question, 1 where the question has the word."""
        cols, word_ids = [], []
        for i, weighed in enumerate(self.weighed):
            for token in weighed:
                t = self.vocab.ids[token]
                if self.indexed[t]:
                    word_ids.append(t)
                    cols.append(i)
        data = np.ones(len(cols), dtype=np.float64)
        shape = (len(self.vocab.ids), len(self.keys))
        return sparse.csr_matrix((data, (word_ids, cols)), shape=shape)

    def match(self, pool_rows: list[dict]) -> list[Match | None]:
        """The strongest match of each pool row (``best_first``), None where nothing matches."""
        return [found[0] if found else None for found in self.matches(pool_rows)]

    def matches(self, pool_rows: list[dict]) -> list[list[Match]]:
        """Every evaluation question each pool row matches (by its strongest rule), best first."""
        out: list[list[Match]] = []
        size = self.params.batch_size
        for start in range(0, len(pool_rows), size):
            out.extend(self._batch(pool_rows[start : start + size]))
        return out

    def _batch(self, rows: list[dict]) -> list[list[Match]]:
        rules = set(self.params.rules)
        weighed = [self.vocab.weigh(row["question_norm"]) for row in rows]
        near = self._near_candidates(weighed) if "near_duplicate" in rules else [[] for _ in rows]
        out = []
        for row, w, candidates in zip(rows, weighed, near, strict=True):
            found: dict[int, Match] = {}
            if "same_chain" in rules:
                self._same_chain(row, w, found)
            if "near_duplicate" in rules:
                self._near_duplicates(row, w, candidates, found)
            if "exact" in rules:
                for i in self.exact.get(row["question_norm"], ()):
                    found[i] = self._match("exact", 1.0, i)
            out.append(sorted(found.values(), key=best_first))
        return out

    def _similarity(self, weighed: dict[str, float], i: int) -> float:
        return soft_dice(weighed, self.weighed[i], self.params.typo_ratio, self.vocab.rare_weight)

    def _match(self, rule: str, score: float, i: int) -> Match:
        return Match(rule, round(score, _DIGITS), *self.keys[i])

    def _near_candidates(self, weighed: list[dict[str, float]]) -> list[list[int]]:
        """Per pool row, the evaluation questions whose candidate Dice reaches ``candidate_min``: at most
        ``max_candidates``, highest first, ties by index position.

        The candidate Dice counts the weight shared over indexed words, which the sparse product gives, and
        assumes the unindexed (template) words shared as far as the smaller side has them: they are cheap
        words, so the optimism is small, and without it a short templated question falls below any bound
        that its template words would have carried it over.
        """
        entries: dict[tuple[int, int], float] = {}
        templated = np.zeros(len(weighed))
        for r, w in enumerate(weighed):
            for token, weight in w.items():
                t = self.vocab.ids.get(token)
                if t is None:  # no evaluation question has it: maybe a typo of a word one has
                    for n in self.typos.of(token):
                        entries[r, n] = self.vocab.weights[n]
                elif self.indexed[t]:
                    entries[r, t] = weight
                else:
                    templated[r] += weight
        rows, cols = zip(*entries) if entries else ((), ())
        batch = sparse.csr_matrix(
            (list(entries.values()), (rows, cols)), shape=(len(weighed), len(self.vocab.ids))
        )
        shared = (batch @ self.postings).tocoo()
        pool_totals = np.array([sum(w.values()) for w in weighed], dtype=np.float64)
        template = np.minimum(templated[shared.row], self.templated[shared.col])
        dice = 2 * (shared.data + template) / (pool_totals[shared.row] + self.totals[shared.col])
        keep = dice >= self.params.candidate_min
        r, c, d = shared.row[keep], shared.col[keep], dice[keep]
        order = np.lexsort((c, -d, r))  # by row, then highest Dice, then position
        out: list[list[int]] = [[] for _ in weighed]
        for row, col in zip(r[order].tolist(), c[order].tolist(), strict=True):
            if len(out[row]) < self.params.max_candidates:
                out[row].append(col)
        return out

    def _near_duplicates(self, row: dict, w: dict, candidates: list[int], found: dict[int, Match]) -> None:
        titles = chain.titles_key(row["titles"])
        for i in candidates:
            if self.norms[i] == row["question_norm"]:
                continue  # the exact rule's (or nobody's, when it is off)
            score = self._similarity(w, i)
            if score >= self._near_threshold(titles, self.titles[i]):
                found[i] = self._match("near_duplicate", score, i)

    def _near_threshold(self, titles: tuple[str, ...], eval_titles: tuple[str, ...]) -> float:
        # over the same entities only the wording can differ; over others a shared template can look alike
        same = bool(titles) and titles == eval_titles
        return self.params.near_duplicate_same_titles if same else self.params.near_duplicate_threshold

    def _same_chain(self, row: dict, w: dict, found: dict[int, Match]) -> None:
        titles = chain.titles_key(row["titles"])
        if not titles:
            return  # no supporting titles, no chain to compare
        norm = row["question_norm"]
        for answer in chain.answer_keys(row["answers"]):
            for i in self.chains.get((titles, answer), ()):
                if i in found or not self._passes_guard(norm, self.norms[i], titles, answer):
                    continue
                found[i] = self._match("same_chain", self._similarity(w, i), i)

    def _passes_guard(self, norm: str, eval_norm: str, titles: tuple[str, ...], answer: str) -> bool:
        guard = self.params.same_chain_guard
        if guard <= 0 or not (chain.weak_answer(answer, norm) or chain.weak_answer(answer, eval_norm)):
            return True
        a = chain.residual_words(norm, titles, answer)
        b = chain.residual_words(eval_norm, titles, answer)
        return chain.guard_similarity(a, b) >= guard
