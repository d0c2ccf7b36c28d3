"""The training loop: transformers' Trainer, counting what it trains on.

Under ``train.budget: steps`` the number of optimizer steps is fixed and the examples and tokens a
variant sees follow from its set's size; the training metrics record both, so a report can put the
compute next to the result.
"""

from __future__ import annotations

from factory.train.examples import IGNORE


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
