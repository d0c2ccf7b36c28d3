"""The params sections of a round and after it: training, bootstrapping, the TRACE export, routes,
publishing."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from factory.params.vocab import (
    Section,
    Seed,
    Variant,
    Weight,
)


class TrainParams(Section):
    lora_r: int = Field(16, ge=1, description="LoRA rank.")
    lora_alpha: int = Field(32, ge=1, description="LoRA alpha.")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] = Field(
        ["q_proj", "k_proj", "v_proj", "o_proj"], description="Modules that get LoRA adapters."
    )
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    lr_scheduler: str = Field(
        "cosine", description="transformers scheduler name (linear, cosine, constant, ...)."
    )
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="Share of steps used for warm-up.")
    epochs: float = Field(2.0, gt=0, description="Passes over the supervision set (budget: epochs).")
    budget: Literal["epochs", "steps"] = Field(
        "steps",
        description="'steps': every variant of a round trains for max_steps optimizer steps (a small set "
        "is cycled, a large one stopped early: equal compute across variants); 'epochs': train.epochs "
        "passes (a larger set gets more steps).",
    )
    max_steps: int = Field(
        200,
        ge=1,
        description="Optimizer steps per round under budget: steps (of batch_size x grad_accum x processes "
        "examples: under torchrun / accelerate launch every process takes its own batch).",
    )
    batch_size: int = Field(8, ge=1, description="Examples per device per step.")
    grad_accum: int = Field(1, ge=1, description="Gradient accumulation steps.")
    max_length: int = Field(1024, ge=32, description="Examples are truncated to this many tokens.")
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass (about 30% slower a step): an 8B model's "
        "LoRA training then needs ~18 GiB instead of ~49 GiB (`factory params --cost`), e.g. beside a vLLM "
        "server on the same GPU.",
    )
    init: Literal["base", "previous"] = Field(
        "base",
        description="Each round starts from the base model ('base', on the accumulated set) or continues "
        "the previous adapter.",
    )
    seed: int = Field(31, ge=0, description="Training seed.")


class RoundSlot(Section):
    round: int = Field(ge=0, description="Round number (0 = trajectories from the base model).")
    after: str = Field(description="The chain step before it: 'init' for round 0, else 'round_<round-1>'.")


class BootstrapParams(Section):
    variants: list[Variant] = Field(
        ["backtrace", "random", "unfiltered"],  # the demo's three
        min_length=1,
        description="Supervision variants, each with its own chain of policies.",
    )
    max_rounds: int = Field(
        2,
        ge=1,
        description="R_max: bootstrapping rounds per chain (rounds 0..R_max-1 run; later slots record "
        "'skipped').",
    )
    rounds: list[RoundSlot] = Field(
        default_factory=lambda: [
            RoundSlot(round=r, after="init" if r == 0 else f"round_{r - 1}") for r in range(3)
        ],
        description="Round stages in dvc.yaml (DVC needs a list and cannot compute r-1): entry i is "
        "{round: i, after: init | round_<i-1>}. Keep at least max_rounds entries; extra ones record "
        "'skipped', "
        "so `dvc exp run -S bootstrap.max_rounds=N` runs only the new rounds (each slot is 8 stages).",
    )
    seeds: list[Seed] = Field(
        [0], min_length=1, description="Repeats of the whole protocol (mean +- std in the report)."
    )
    min_delta: float = Field(
        0.0,
        ge=0,
        description="Held-out EM must rise by at least this (and by more than nothing) over the best "
        "policy so far to count as progress (float tolerance 1e-9).",
    )
    patience: int = Field(2, ge=1, description="Rounds without progress before later rounds are skipped.")
    stop_test: Literal["threshold", "paired_bootstrap"] = Field(
        "paired_bootstrap",
        description="'paired_bootstrap': progress also needs the lower bound of the 95% paired bootstrap CI "
        "of the per-question held-out EM difference against the best policy so far above 0; "
        "'threshold': the EM rise alone decides.",
    )
    ci_samples: int = Field(
        2000, ge=100, description="Bootstrap resamples of the paired CIs (stop test and report verdicts)."
    )
    ci_seed: int = Field(41, ge=0, description="Seed of the paired bootstrap resamples.")

    @model_validator(mode="after")
    def _check_rounds(self) -> BootstrapParams:
        for i, slot in enumerate(self.rounds):
            want = "init" if i == 0 else f"round_{i - 1}"
            if slot.round != i or slot.after != want:
                raise ValueError(
                    f"rounds[{i}] must be {{round: {i}, after: {want}}} (got "
                    f"{{round: {slot.round}, after: {slot.after}}})"
                )
        if len(self.rounds) < self.max_rounds:
            slots = ", ".join(
                f"{{round: {r}, after: {'init' if r == 0 else f'round_{r - 1}'}}}"
                for r in range(self.max_rounds)
            )
            raise ValueError(
                f"max_rounds={self.max_rounds} needs at least that many entries in bootstrap.rounds (has "
                f"{len(self.rounds)}): give them with it, e.g. dvc exp run -S "
                f"bootstrap.max_rounds={self.max_rounds} -S 'bootstrap.rounds=[{slots}]'"
            )
        return self


class TraceParams(Section):
    max_passages: int = Field(8, ge=1, description="Passages numbered in a TRACE prompt.")
    bonus_weight: float = Field(
        10.0, ge=0, description="Bonus reward when format, accuracy and relevance are all perfect."
    )
    reward_weights: dict[Literal["format", "accuracy", "relevance"], Weight] = Field(
        {"format": 1.0, "accuracy": 1.0, "relevance": 1.0},
        description="Weights of the format, accuracy and relevance rewards in trace_reward (the bonus "
        "has bonus_weight).",
    )


class RoutesParams(Section):
    n_questions: int = Field(10, ge=1, description="Questions per dataset classified by the LLM.")
    seed: int = Field(37, ge=0, description="Seed of the sample.")
    max_new_tokens: int = Field(
        48, ge=1, description="Generation budget of one route reply ('Route: ...' and a short reason)."
    )


class PublishParams(Section):
    repo_id: str | None = Field(
        None,
        description="`factory publish --push-to-hub` uploads each variant to the Hub dataset repo "
        "<repo_id>-<variant> (e.g. me/tracefactory -> me/tracefactory-backtrace); the token comes from "
        "the HF_TOKEN environment variable and is never written.",
    )
    private: bool = Field(True, description="Create the Hub dataset repos as private.")
