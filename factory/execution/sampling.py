"""Seeded question samples for trajectory rounds and evaluations, spread evenly across datasets.

A question's place in a sample is a hash of (seed, question id), so a sample depends only on the
seed and on which questions exist, never on file order; adding other questions to a corpus moves a
question only if the newcomer ranks before it. Quotas are even per dataset; a dataset with too
few questions gives its remaining quota to the others.

A split with fewer questions than a sample asks for (the shared samples under the pilot or full
profile) is refused before any work (``check_samples``), unless ``trajectories.allow_fewer`` /
``evaluate.allow_fewer`` lets the sample take all there are (the demo profile): the stage then warns,
its metrics record ``asked`` beside ``questions``, and reports/bootstrap.md says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from factory.llm.base import Sampling
from factory.utils.errors import FactoryError
from factory.utils.seeds import derived_seed
from factory.utils.splits import unit_hash

log = logging.getLogger(__name__)
SPLITS = ("train", "heldout", "test")  # the splits the protocol samples: trajectories, then evaluate
SPLIT_WORDS = {"train": "training", "heldout": "held-out", "test": "test"}


def even_quotas(available: dict[str, int], n: int) -> dict[str, int]:
    """Split ``n`` over datasets as evenly as their sizes allow (leftover to the earlier names)."""
    quotas = {name: 0 for name in available}
    left = min(n, sum(available.values()))
    while left > 0:
        open_ = [name for name in sorted(available) if quotas[name] < available[name]]
        share, extra = divmod(left, len(open_))
        for i, name in enumerate(open_):
            take = min(share + (1 if i < extra else 0), available[name] - quotas[name])
            quotas[name] += take
            left -= take
    return quotas


def sample_questions(
    questions: Iterable[dict], n: int, *, seed: int, split: str, datasets: Sequence[str] | None = None
) -> list[dict]:
    """``n`` questions of ``split`` (from ``datasets``; None = all), even across datasets, in a seeded order.

    The order interleaves datasets (a hash order over the whole sample), so every shard of a round
    mixes datasets. Fewer than ``n`` questions available: all of them are returned.
    """
    wanted = set(datasets) if datasets is not None else None
    pool: dict[str, list[dict]] = {}
    for q in questions:
        if q["split"] == split and (wanted is None or q["dataset"] in wanted):
            pool.setdefault(q["dataset"], []).append(q)
    if not pool:
        names = ", ".join(sorted(wanted)) if wanted is not None else "any dataset"
        raise FactoryError(
            f"no {split!r} questions from {names} in the ingested data (check trajectories.datasets and "
            "splits.*)"
        )
    quotas = even_quotas({name: len(rows) for name, rows in pool.items()}, n)
    chosen: list[dict] = []
    for name in sorted(pool):
        ranked = sorted(
            pool[name], key=lambda q: (unit_hash("sample", seed, q["question_id"]), q["question_id"])
        )
        chosen.extend(ranked[: quotas[name]])
    return sorted(chosen, key=lambda q: (unit_hash("order", seed, q["question_id"]), q["question_id"]))


def round_sample(
    params: Any, questions: Iterable[dict], protocol_seed: int, round_: int
) -> tuple[list[dict], Sampling]:
    """The training questions of one round of a chain and how they are sampled (``trajectories.*``);
    the sampling's seed is the round's generation seed."""
    t = params.trajectories
    seed = derived_seed(t.seed, protocol_seed, round_ if t.resample_each_round else None)
    chosen = sample_questions(questions, t.n_questions, seed=seed, split="train", datasets=t.datasets)
    sampling = Sampling(
        temperature=t.temperature,
        top_p=t.top_p if t.temperature > 0 else 1.0,
        max_new_tokens=params.llm.max_new_tokens,
        seed=seed,
    )
    return chosen, sampling


def evaluation_sample(params: Any, questions: Iterable[dict], split: str) -> tuple[list[dict], Sampling]:
    """The questions of an evaluation on ``split`` and its greedy sampling (``evaluate.*``): the same for
    every policy and protocol seed, so evaluations pair question by question."""
    e = params.evaluate
    chosen = sample_questions(questions, e.n_questions, seed=e.seed, split=split)
    sampling = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=params.llm.max_new_tokens, seed=e.seed)
    return chosen, sampling


@dataclass(frozen=True)
class Shortfall:
    """A sample that asks for more questions than its split holds."""

    section: str  # "trajectories" or "evaluate": whose n_questions and allow_fewer
    split: str
    asked: int
    available: dict[str, int]  # dataset -> questions of the split

    @property
    def line(self) -> str:
        per = ", ".join(f"{name} {n}" for name, n in sorted(self.available.items())) or "none"
        return (
            f"asked {self.asked} {SPLIT_WORDS[self.split]} questions ({self.section}.n_questions), "
            f"{sum(self.available.values())} available ({per})"
        )


def shortfalls(params: Any, questions: Iterable[dict], splits: Iterable[str] = SPLITS) -> list[Shortfall]:
    """The samples of ``splits`` that the questions cannot fill: train for trajectories (from
    ``trajectories.datasets``), heldout and test for evaluate (every dataset), as ``sample_questions``
    draws them."""
    counts: dict[tuple[str, str], int] = {}
    for q in questions:
        counts[q["split"], q["dataset"]] = counts.get((q["split"], q["dataset"]), 0) + 1
    out = []
    for split in splits:
        section = "trajectories" if split == "train" else "evaluate"
        asked = getattr(params, section).n_questions
        wanted = params.trajectories.datasets if split == "train" else None
        available = {d: n for (s, d), n in counts.items() if s == split and (wanted is None or d in wanted)}
        if sum(available.values()) < asked:
            out.append(Shortfall(section, split, asked, available))
    return out


def check_samples(params: Any, questions: Iterable[dict], splits: Iterable[str] = SPLITS) -> list[Shortfall]:
    """Stop before any work when a sample of ``splits`` asks for more questions than its split holds and
    its section's ``allow_fewer`` is false; the allowed shortfalls are logged and returned."""
    found = shortfalls(params, questions, splits)
    refused = [s for s in found if not getattr(params, s.section).allow_fewer]
    if refused:
        raise FactoryError(refusal(refused))
    for s in found:
        log.warning("%s: all of them are sampled (%s.allow_fewer is true)", s.line, s.section)
    return found


def refusal(refused: Sequence[Shortfall]) -> str:
    """The paragraph of a refused sample: the numbers, then the three ways on."""
    sections = list(dict.fromkeys(s.section for s in refused))  # in the order of the samples
    return (
        "the corpora hold fewer questions than the protocol samples: "
        + "; ".join(s.line for s in refused)
        + ". Nothing was run. Give the full corpora: set corpora.<dataset> to the official files "
        "(docs/corpora.md names them and where to download them), e.g. --set "
        "'corpora.hotpotqa=[/data/corpora/hotpot_train_v1.1.json,/data/corpora/hotpot_dev_distractor_v1.json]'"
        ", then run again from `factory ingest` (dvc repro does); or ask for fewer ("
        + ", ".join(f"{name}.n_questions" for name in sections)
        + "); or, to run on all there are and have the reports say so (as the demo profile does), set "
        + " and ".join(f"{name}.allow_fewer=true" for name in sections)
        + "."
    )
