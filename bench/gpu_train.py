"""GPU check of issue 5: one LoRA round with the factory's train vs a plain TRL SFTTrainer.

Builds a model of real size from its config (SmolLM2-135M's Llama shape, random weights: the GPU
machine has no network) with a BPE tokenizer trained here on seeded synthetic KnowTrace-style
chats, then trains the same LoRA round twice on the same data with the same settings (the factory's
``fit_lora``, and TRL's ``SFTTrainer`` on the prompt/completion form of the same chats with
``completion_only_loss``), and prints tokens/s of both and their ratio (target >= 1.0).
tokens/s = non-padding input tokens seen / the Trainer's train_runtime, the same for both.

    python bench/gpu_train.py --out $OUT     # on a GPU: bf16, 135M model, 2048 chats, 2 runs per side
    python bench/gpu_train.py --tiny         # anywhere (CPU): a tiny model, 16 chats, 1 run per side

Both sides train under ``train.budget`` (default ``steps``: ``--max-steps`` optimizer steps, 256 = one
pass over the 2048 chats at batch 8; --tiny 6, one and a half passes over 16 chats at batch 4, so the
set is cycled), with the same TrainingArguments values.

On one H200 the GPU run should take a few minutes, most of it building the model and tokenising.
Needs torch (CUDA build), transformers, peft, trl, datasets, pydantic, pyyaml; no network, no data
files. Writes gpu_train.json (all figures: per run tokens/s, losses, peak memory; label agreement).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from factory.params.round_sections import TrainParams  # noqa: E402 (after the sys.path line)
from factory.train.examples import IGNORE, encode_example  # noqa: E402 (after the sys.path line)
from factory.train.lora import (  # noqa: E402 (after the sys.path line)
    device_and_dtype,
    fit_lora,
    training_argument_values,
)
from factory.train.model import load_tokenizer, lora_config  # noqa: E402

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# SmolLM2-135M(-Instruct)'s LlamaConfig; --tiny shrinks it to run on a laptop CPU in seconds.
REAL_SHAPE = {
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
}
TINY_SHAPE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": None,
}
SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "an", "er", "is", "on", "ul")]
RELATIONS = [
    "born in",
    "director of",
    "capital of",
    "spouse of",
    "located in",
    "founded by",
    "member of",
    "author of",
]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))


def entity(rng: random.Random) -> str:
    return " ".join(word(rng).capitalize() for _ in range(rng.randint(1, 2)))


def synthetic_chats(n: int, max_length: int, seed: int) -> list[dict]:
    """Seeded KnowTrace-like chats: a long prompt (question, passages) and a short structured answer."""
    rng = random.Random(seed)
    chats = []
    for i in range(n):
        question = f"Which {rng.choice(RELATIONS)} the {word(rng)} of {entity(rng)}?"
        passages = []
        for k in range(max(1, rng.randint(max_length // 90, max_length // 45))):
            passages.append(
                f"[{k + 1}] {entity(rng)}: " + " ".join(word(rng) for _ in range(rng.randint(6, 14))) + "."
            )
        user = (
            f"Question: {question}\nRetrieved passages:\n" + "\n".join(passages) + "\nKnowledge so far: none."
        )
        triplets = " ".join(
            f"({entity(rng)} ; {rng.choice(RELATIONS)} ; {entity(rng)})"
            for _ in range(rng.randint(1, max(1, max_length // 150)))
        )
        thought = " ".join(word(rng) for _ in range(rng.randint(2, max(3, max_length // 85))))
        answer = f"Thought: {thought}\nTriplets: {triplets}\nAnswer: {entity(rng)}"
        chats.append(
            {
                "example_id": f"bench/{i}",
                "messages": [
                    {
                        "role": "system",
                        "content": "You answer multi-hop questions by extracting knowledge triplets from "
                        "passages.",
                    },
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": answer},
                ],
            }
        )
    return chats


def build_bench_model(out: Path, chats: list[dict], tiny: bool, seed: int) -> tuple[Path, int]:
    """A BPE tokenizer trained on the chats + a Llama of the chosen shape with random weights."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024 if tiny else 8192,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator((m["content"] for c in chats for m in c["messages"]), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    shape = dict(TINY_SHAPE if tiny else REAL_SHAPE)
    shape["vocab_size"] = max(
        shape["vocab_size"] or 0, len(fast)
    )  # real shape: 49152 rows, as the real model
    torch.manual_seed(seed)
    config = LlamaConfig(
        **shape,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    model.to(torch.float32 if tiny else torch.bfloat16).save_pretrained(out)
    return out, sum(p.numel() for p in model.parameters())


def run_factory(chats: list[dict], model_dir: Path, out: Path, params: TrainParams) -> dict:
    m = fit_lora(chats, model_dir, out, params).metrics
    curve = json.loads((out / "loss_curve.json").read_text())
    return {
        "tokens_seen": m["tokens_seen"],
        "tokens_labelled_seen": m["assistant_tokens_seen"],
        "tokens_labelled_per_pass": m["tokens_assistant"],
        "examples_seen": m["examples_seen"],
        "train_runtime_s": m["train_runtime_s"],
        "tokens_per_s": m["tokens_per_s"],
        "first_loss": curve[0]["loss"],
        "final_loss": m["final_loss"],
        "mean_loss": m["mean_loss"],
        "steps": m["steps"],
        "gpu_peak_mem_gb": m["gpu_peak_mem_gb"],
    }


def run_trl(
    chats: list[dict], model_dir: Path, out: Path, params: TrainParams, device: str, dtype: str
) -> tuple[dict, object]:
    """Plain TRL: prompt/completion chats, completion-only loss, the same TrainingArguments values."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, set_seed
    from trl import SFTConfig, SFTTrainer

    dataset = Dataset.from_list(
        [{"prompt": c["messages"][:-1], "completion": c["messages"][-1:]} for c in chats]
    )
    config = SFTConfig(
        **training_argument_values(
            params, str(out), device, dtype, progress=os.environ.get("FACTORY_NO_PROGRESS") != "1"
        ),
        max_length=params.max_length,
        completion_only_loss=True,
        packing=False,
        padding_free=False,
        gradient_checkpointing=False,  # TRL's default is True; the factory does not checkpoint
        pad_to_multiple_of=None,
    )
    tokenizer = load_tokenizer(model_dir)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    set_seed(params.seed)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
    model.config.use_cache = False
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(params),
    )
    result = trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    runtime = float(result.metrics["train_runtime"])
    tokens = int(trainer.state.num_input_tokens_seen)
    labelled = sum(sum(1 for t in r["labels"] if t != IGNORE) for r in trainer.train_dataset)
    return {
        "tokens_seen": tokens,
        "tokens_labelled_per_pass": labelled,
        "train_runtime_s": runtime,
        "tokens_per_s": tokens / runtime,
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "mean_loss": float(result.training_loss),
        "steps": int(trainer.state.global_step),
        "gpu_peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
    }, trainer.train_dataset


def label_agreement(chats: list[dict], trl_rows, model_dir: Path, max_length: int, limit: int = 64) -> dict:
    """Do both sides label the same tokens? TRL's completion also holds the template's trailing newline."""
    tokenizer = load_tokenizer(model_dir)
    same = ids_equal = 0
    n = min(limit, len(chats))
    for chat, row in zip(chats[:n], trl_rows):
        enc = encode_example(chat, tokenizer, max_length)
        ours = [t for t in enc.labels if t != IGNORE]
        theirs = [t for t in row["labels"] if t != IGNORE]
        ids_equal += enc.input_ids == list(row["input_ids"])
        same += theirs[: len(ours)] == ours and tokenizer.decode(theirs[len(ours) :]).strip() == ""
    return {"checked": n, "same_input_ids": ids_equal, "same_labels_up_to_trailing_whitespace": same}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="tiny model and data (CPU check of the script)")
    ap.add_argument("--examples", type=int, help="chats (default 2048; --tiny 16)")
    ap.add_argument("--max-length", type=int, help="tokens per example (default 1024; --tiny 256)")
    ap.add_argument(
        "--batch-size", type=int, help="per-device batch (default params.train.batch_size: 8; --tiny 4)"
    )
    ap.add_argument("--epochs", type=float, default=1.0, help="passes over the chats under --budget epochs")
    ap.add_argument(
        "--budget", choices=("epochs", "steps"), default="steps", help="train.budget (default steps)"
    )
    ap.add_argument(
        "--max-steps", type=int, help="optimizer steps under --budget steps (default 256; --tiny 6)"
    )
    ap.add_argument(
        "--repeats", type=int, help="measured runs of each side, order alternating (default 2; --tiny 1)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="output folder (default: a temporary folder)")
    args = ap.parse_args(argv)

    import torch

    n = args.examples or (16 if args.tiny else 2048)
    repeats = args.repeats or (1 if args.tiny else 2)
    max_length = args.max_length or (256 if args.tiny else 1024)
    defaults = TrainParams()
    params = TrainParams(
        max_length=max_length,
        epochs=args.epochs,
        budget=args.budget,
        max_steps=args.max_steps or (6 if args.tiny else 256),
        batch_size=args.batch_size or (4 if args.tiny else defaults.batch_size),
    )
    device, dtype = device_and_dtype()
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-train-"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    chats = synthetic_chats(n, max_length, args.seed)
    model_dir, n_params = build_bench_model(out / "model", chats, args.tiny, args.seed)
    print(
        f"model: {n_params / 1e6:.1f}M params ({'tiny' if args.tiny else 'SmolLM2-135M shape'}), {n} chats, "
        f"max_length {max_length}, device {device} ({dtype}); setup {time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    if device == "cuda":  # CUDA context, cuBLAS handles, kernels: paid once here, by neither side
        fit_lora(chats[: 4 * params.batch_size], model_dir, out / "warmup", params)

    runs: dict[str, list[dict]] = {"factory": [], "trl": []}
    trl_rows = None
    for rep in range(repeats):
        order = ["factory", "trl"] if rep % 2 == 0 else ["trl", "factory"]
        for side in order:
            if device == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            if side == "factory":
                runs[side].append(run_factory(chats, model_dir, out / f"factory-{rep}", params))
            else:
                result, trl_rows = run_trl(chats, model_dir, out / f"trl-{rep}", params, device, dtype)
                runs[side].append(result)
            r = runs[side][-1]
            print(
                f"{side:8s} run {rep}: {r['tokens_per_s']:.0f} tokens/s ({r['tokens_seen']} tokens in "
                f"{r['train_runtime_s']:.2f}s, {r['steps']} steps), "
                f"loss {r['first_loss']:.4f} -> {r['final_loss']:.4f}",
                flush=True,
            )

    mean = {side: sum(r["tokens_per_s"] for r in rs) / len(rs) for side, rs in runs.items()}
    ratio = mean["factory"] / mean["trl"]
    summary = {
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "dtype": dtype,
        "model_params_m": round(n_params / 1e6, 2),
        "shape": "tiny" if args.tiny else "SmolLM2-135M",
        "examples": n,
        "train": params.model_dump(mode="json"),
        "runs": runs,
        "tokens_per_s": mean,
        "ratio_factory_over_trl": ratio,
        "target_met": ratio >= 1.0,
        "labels": label_agreement(chats, trl_rows, model_dir, max_length),
        "versions": {m: __import__(m).__version__ for m in ("torch", "transformers", "peft", "trl")},
    }
    (out / "gpu_train.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "device",
                    "gpu",
                    "dtype",
                    "model_params_m",
                    "tokens_per_s",
                    "ratio_factory_over_trl",
                    "target_met",
                    "labels",
                )
            },
            indent=2,
        )
    )
    print(
        f"tokens/s factory {mean['factory']:.0f} vs TRL SFTTrainer {mean['trl']:.0f}: ratio {ratio:.3f} "
        f"(target >= 1.0: {'met' if ratio >= 1.0 else 'NOT met'}); details in {out / 'gpu_train.json'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
