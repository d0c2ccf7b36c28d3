"""The training loop: transformers' Trainer, counting what it trains on.

Under ``train.budget: steps`` every variant makes the same number of optimizer steps over full
batches: its set is laid out as seeded passes cut to exactly steps x batch (``step_budget_rows``), so
a small set is cycled and a large one stopped early without the Trainer's short last batch of an
epoch giving a small set fewer examples per step. Examples seen are then equal across variants;
tokens seen follow from the examples' lengths. The training metrics record both, so a report can put
the compute next to the result.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from factory.train.examples import IGNORE

Row = TypeVar("Row")


def step_budget_rows(rows: Sequence[Row], total: int, seed: int) -> list[Row]:
    """Exactly ``total`` rows: passes over ``rows``, each a fresh seeded permutation, the last one cut.
    Every row appears ``total // len(rows)`` or one more times; same rows and seed, same list."""
    if not rows:
        raise ValueError("step_budget_rows: no rows to lay out")
    rng = random.Random(seed)
    out: list[Row] = []
    while len(out) < total:
        order = list(range(len(rows)))
        rng.shuffle(order)
        out.extend(rows[i] for i in order[: total - len(out)])
    return out


def counting_trainer_class():
    """transformers' Trainer that also counts the examples and the labelled tokens of every batch it
    trains on (the Trainer itself counts input tokens only)."""
    import torch
    from transformers import Trainer

    class CountingTrainer(Trainer):
        examples_seen = 0
        labelled_tokens_seen = 0

        def training_step(self, model, inputs, *args, **kwargs):
            self.examples_seen += int(inputs["input_ids"].shape[0])
            self.labelled_tokens_seen += int((inputs["labels"][:, 1:] != IGNORE).sum())
            return super().training_step(model, inputs, *args, **kwargs)

        def counts(self) -> tuple[int, int]:
            """(examples, labelled tokens) over all processes."""
            local = torch.tensor([self.examples_seen, self.labelled_tokens_seen], device=self.args.device)
            total = self.accelerator.gather(local).reshape(-1, 2).sum(dim=0)
            return int(total[0]), int(total[1])

    return CountingTrainer
