"""Seeded question samples for trajectory rounds and evaluations, spread evenly across datasets.

A question's place in a sample is a hash of (seed, question id), so a sample depends only on the
seed and on which questions exist, never on file order; adding other questions to a corpus moves a
question only if the newcomer ranks before it. Quotas are even per dataset; a dataset with too
few questions gives its remaining quota to the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from factory.llm.base import Sampling
from factory.utils.errors import FactoryError
from factory.utils.seeds import derived_seed
from factory.utils.splits import unit_hash


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
