"""LoRA supervised fine-tuning (PEFT + transformers' Trainer), loss on assistant tokens only.

``fit_lora`` is plain Python over supervision records (schemas.SUPERVISION rows, or any dicts
with ``messages``), usable from a notebook. It runs unchanged on CPU (fp32), one GPU (bf16
autocast, base weights in bf16, adapter weights in fp32) or several GPUs under ``accelerate
launch`` (the Trainer picks up DDP from the environment; only the main process writes files).

Why transformers' Trainer and not TRL's SFTTrainer: the examples are tokenised here with exact
assistant-only labels (see factory.train.examples), so SFTTrainer's dataset preparation would only be
bypassed; the Trainer with a padding collator is the whole training loop we need, without the
per-step entropy/accuracy bookkeeping SFTTrainer adds. bench/gpu_train.py compares the two.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from factory.params.round_sections import TrainParams
from factory.train import live
from factory.train.examples import PadCollator, data_hash, encode_examples
from factory.train.model import build_model, load_tokenizer
from factory.train.trainer import counting_trainer_class, step_budget_rows
from factory.utils.errors import FactoryError
from factory.utils.io import write_json

log = logging.getLogger(__name__)

ADAPTER = "adapter"
TRAINED, EMPTY, SKIPPED = "trained", "empty", "skipped"
OUTPUT_FILES = ("status.json", "loss_curve.json", "training_config.json")


def save_adapter(model, adapter_dir: Path) -> None:
    """``save_pretrained``, then the config's ``target_modules`` sorted: PEFT keeps them as a set and
    writes them in hash order, which made the adapter folder differ from run to run."""
    model.save_pretrained(str(adapter_dir))
    config_path = Path(adapter_dir) / "adapter_config.json"
    config = json.loads(config_path.read_text())
    if isinstance(config.get("target_modules"), list):
        config["target_modules"] = sorted(config["target_modules"])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))


def is_main_process() -> bool:
    """True outside distributed runs and on rank 0 under ``accelerate launch`` / torchrun."""
    return int(os.environ.get("RANK", "0")) == 0


def device_and_dtype() -> tuple[str, str]:
    """('cuda', 'bfloat16') when a GPU is present (fp16 on GPUs without bf16), else ('cpu', 'float32')."""
    import torch

    if torch.cuda.is_available():
        return "cuda", "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "cpu", "float32"


def reset_output(out_dir: str | Path) -> Path:
    """Remove what an earlier run left in out_dir (a stale adapter must never survive a rerun)."""
    out = Path(out_dir)
    if is_main_process():
        shutil.rmtree(out / ADAPTER, ignore_errors=True)
        for name in OUTPUT_FILES:
            (out / name).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
    return out


def write_status(out_dir: str | Path, status: str, reason: str | None = None) -> dict:
    """status.json: {"status": trained|empty|skipped, "reason", "adapter": "adapter" or null}."""
    record = {"status": status, "reason": reason, "adapter": ADAPTER if status == TRAINED else None}
    if is_main_process():
        write_json(Path(out_dir) / "status.json", record)
    return record


def training_arguments(params: TrainParams, output_dir: str, device: str, dtype: str, progress: bool = True):
    """TrainingArguments from params.train (also used by the bench for the TRL side, field for field)."""
    from transformers import TrainingArguments

    try:
        return TrainingArguments(**training_argument_values(params, output_dir, device, dtype, progress))
    except ValueError as exc:  # e.g. an unknown lr_scheduler name
        raise FactoryError(f"params.train does not make valid training arguments: {exc}") from None


def training_argument_values(
    params: TrainParams, output_dir: str, device: str, dtype: str, progress: bool = True
) -> dict:
    return {
        "output_dir": output_dir,
        "num_train_epochs": params.epochs,
        # budget: steps -> the same number of optimizer steps for every set, over a dataset laid out to
        # exactly that many full batches (fit_lora); -1 = train.epochs decides
        "max_steps": params.max_steps if params.budget == "steps" else -1,
        "per_device_train_batch_size": params.batch_size,
        "gradient_accumulation_steps": params.grad_accum,
        "learning_rate": params.learning_rate,
        "lr_scheduler_type": params.lr_scheduler,
        "warmup_steps": params.warmup_ratio,  # a float in [0, 1) is a share of the total steps
        "seed": params.seed,
        "data_seed": params.seed,
        "bf16": device == "cuda" and dtype == "bfloat16",
        "fp16": device == "cuda" and dtype == "float16",
        "use_cpu": device == "cpu",
        "logging_steps": 1,
        "save_strategy": "no",
        "eval_strategy": "no",
        "report_to": "none",
        "remove_unused_columns": False,
        "ddp_find_unused_parameters": False,  # every LoRA weight gets a gradient each step
        "include_num_input_tokens_seen": "non_padding",
        "dataloader_num_workers": 0,
        "gradient_checkpointing": params.gradient_checkpointing,
        # non-reentrant: works with frozen inputs (LoRA) without enable_input_require_grads
        "gradient_checkpointing_kwargs": {"use_reentrant": False} if params.gradient_checkpointing else None,
        "disable_tqdm": not progress,
    }


def loss_curve(log_history: list[dict]) -> list[dict]:
    """[{step, loss, lr}] from the Trainer's log history (one entry per optimizer step)."""
    return [
        {"step": int(e["step"]), "loss": float(e["loss"]), "lr": float(e.get("learning_rate", 0.0))}
        for e in log_history
        if "loss" in e and "step" in e
    ]


@dataclass
class TrainOutcome:
    metrics: dict
    model: object | None  # the trained PeftModel in memory (None when nothing was trained)


def fit_lora(
    examples: Sequence[dict],
    model_path: str | Path,
    out_dir: str | Path,
    params: TrainParams,
    init_adapter: str | Path | None = None,
    live_dir: str | Path | None = None,
) -> TrainOutcome:
    """Train a LoRA adapter on chat examples; write adapter/, loss_curve.json, training_config.json,
    status.json to out_dir (and the DVCLive curves to ``live_dir``, factory.train.live); return the
    training metrics and the trained model (for checks against the saved adapter).

    ``init_adapter`` (a saved adapter folder) is loaded trainable and continued; None starts a
    fresh adapter on the base model. An empty set (or one whose assistant tokens all fall past
    ``max_length``) writes status "empty" and trains nothing.
    """
    started = time.perf_counter()
    model_path = Path(model_path)
    if not (model_path / "config.json").exists():
        raise FactoryError(
            f"base model folder {model_path} has no config.json (run `factory prepare-model` first)"
        )
    out = reset_output(out_dir)
    if live_dir is not None and is_main_process():
        live.reset(live_dir)
    device, dtype = device_and_dtype()
    tokenizer = load_tokenizer(model_path) if examples else None  # an empty set needs none (nor its import)
    encoded = encode_examples(examples, tokenizer, params.max_length)
    config = {
        "train": params.model_dump(mode="json"),
        "model_path": str(model_path),
        "init_adapter": str(init_adapter) if init_adapter is not None else None,
        "data_hash": data_hash(examples),
        "examples": len(examples),
        "examples_used": len(encoded.examples),
        "dropped_no_assistant_tokens": encoded.dropped_no_assistant_tokens,
    }
    metrics = {"device": device, "dtype": dtype, "init_adapter": config["init_adapter"], **encoded.counts()}
    if is_main_process():
        write_json(out / "training_config.json", config)
    if not encoded.examples:
        reason = (
            "the supervision set is empty (no correct trajectory produced an example)"
            if not examples
            else f"no example keeps an assistant token within max_length={params.max_length}"
        )
        _write_untrained(out, reason, live_dir)
        return TrainOutcome(
            {**metrics, "status": EMPTY, "reason": reason, "wall_s": time.perf_counter() - started}, None
        )
    model = build_model(model_path, params, init_adapter, dtype)
    trainer, result = _train(model, encoded, tokenizer.pad_token_id, params, (device, dtype), live_dir)
    if trainer.is_world_process_zero():
        save_adapter(model, out / ADAPTER)
        write_json(out / "loss_curve.json", loss_curve(trainer.state.log_history))
        if live_dir is not None:
            live.finish(live_dir, TRAINED)
    write_status(out, TRAINED)
    trainer.accelerator.wait_for_everyone()
    metrics.update(_trained_metrics(trainer, result, model, params, len(encoded.examples), device, started))
    m = metrics
    log.info(
        "train: %d examples, %d steps (budget %s), %d examples / %d tokens seen, mean loss %.4f, "
        "%.0f tokens/s on %s (%s)", len(encoded.examples), m["steps"], params.budget, m["examples_seen"],
        m["tokens_seen"], m["mean_loss"], m["tokens_per_s"], device, dtype,
    )  # fmt: skip
    return TrainOutcome(metrics, model)


def _write_untrained(out: Path, reason: str, live_dir: str | Path | None) -> None:
    write_status(out, EMPTY, reason)
    if is_main_process():
        write_json(out / "loss_curve.json", [])
        if live_dir is not None:
            live.write_untrained(live_dir, EMPTY)
    log.warning("train: %s; no adapter trained", reason)


def _train(model, encoded, pad_id: int, params: TrainParams, placement: tuple[str, str], live_dir):
    """The Trainer that trained on the encoded examples (cycled or cut to the step budget), its result."""
    device, dtype = placement
    rows = [{"input_ids": e.input_ids, "labels": e.labels} for e in encoded.examples]
    with tempfile.TemporaryDirectory(prefix="factory-train-") as scratch:
        args = training_arguments(
            params, scratch, device, dtype, progress=os.environ.get("FACTORY_NO_PROGRESS") != "1"
        )
        if params.budget == "steps":  # full batches at every step (factory.train.trainer)
            per_step = params.batch_size * params.grad_accum * args.world_size
            rows = step_budget_rows(rows, params.max_steps * per_step, params.seed)
        trainer = counting_trainer_class()(
            model=model,
            args=args,
            train_dataset=rows,
            data_collator=PadCollator(pad_id),
            callbacks=[live.live_callback(live_dir, params.model_dump(mode="json"))] if live_dir else None,
        )
        return trainer, trainer.train()


def _trained_metrics(
    trainer, result, model, params: TrainParams, n_examples: int, device: str, started: float
) -> dict:
    import torch

    losses = [p["loss"] for p in loss_curve(trainer.state.log_history)]
    runtime = float(result.metrics.get("train_runtime", 0.0)) or (time.perf_counter() - started)
    tokens_seen = int(trainer.state.num_input_tokens_seen)
    examples_seen, labelled_seen = trainer.counts()
    return dict(
        status=TRAINED,
        reason=None,
        budget=params.budget,
        max_steps=params.max_steps if params.budget == "steps" else None,
        steps=int(trainer.state.global_step),
        epochs=examples_seen / n_examples,  # passes actually made over the set
        examples_seen=examples_seen,
        assistant_tokens_seen=labelled_seen,
        final_loss=losses[-1] if losses else None,
        mean_loss=float(result.training_loss),
        tokens_seen=tokens_seen,
        tokens_per_s=tokens_seen / runtime if runtime > 0 else 0.0,
        train_runtime_s=runtime,
        wall_s=time.perf_counter() - started,
        world_size=int(trainer.args.world_size),
        trainable_params=sum(p.numel() for p in model.parameters() if p.requires_grad),
        gpu_peak_mem_gb=(torch.cuda.max_memory_allocated() / 2**30) if device == "cuda" else None,
    )
