"""GPU check for the day a GPU is lent: the local backend's generation and one LoRA training round on a
model of real size (issue 43, item 8).

Builds a Llama with random weights from a config (Llama-3.1-8B's shape by default: 8.03B parameters,
no download, no network) and a word-level tokenizer whose vocabulary has the config's size, saves both
to a temporary folder, then

1. generates with factory.llm.local.LocalLLM (bf16 on CUDA, fp32 on CPU) for --prompts HotpotQA-like
   prompts as batches, greedy, to --max-new-tokens (random weights rarely emit EOS, so every call runs
   to the budget): tokens/s and peak memory;
2. trains one LoRA round with factory.train.lora.fit_lora (the factory's train: no gradient
   checkpointing) for --steps optimizer steps of --batch-size synthetic KnowTrace-like chats of about
   --max-length tokens: step time, tokens/s and peak memory, next to what ``factory params --cost``
   estimates for the same shape and settings (factory.bootstrap.cost_gpu) as the ratio measured /
   estimated.

    python bench/gpu.py                # one H100: Llama-3.1-8B shape; about 5 minutes, most of it
                                       # writing and loading 16 GB of weights (budget: 8 minutes)
    python bench/gpu.py --tiny         # anywhere (CPU): a 2-layer model, seconds

Prints the machine, the figures, and writes them as JSON to --out (default: $OUT when set, else
bench/out/gpu.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package
sys.path.insert(0, str(ROOT / "bench"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from gpu_local_backend import CONFIGS, build_tokenizer, hotpot_like_prompts  # noqa: E402 (after sys.path)
from gpu_train import synthetic_chats  # noqa: E402 (after sys.path)

from factory.bootstrap.cost_gpu import SHAPES, training_memory  # noqa: E402 (after sys.path)
from factory.params.agent_sections import LLMParams  # noqa: E402 (after sys.path)
from factory.params.config import Params  # noqa: E402 (after sys.path)
from factory.params.round_sections import TrainParams  # noqa: E402 (after sys.path)

# the local-generation bench's tiny model; max_position_embeddings and rope_theta are build_model's
TINY = {k: v for k, v in CONFIGS["tiny"].items() if k not in ("max_position_embeddings", "rope_theta")}
SIZES = {"llama-3.1-8b": SHAPES["Llama-3.1-8B"], "tiny": TINY}
GIB = 2**30


def machine() -> str:
    import torch

    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    gpu = (
        f"{torch.cuda.get_device_name(0)} ({torch.cuda.get_device_properties(0).total_memory / GIB:.0f} GiB)"
        if torch.cuda.is_available()
        else "no GPU"
    )
    return f"{gpu}; {cpu}, {os.cpu_count()} cores; torch {torch.__version__}"


def build_model(shape: dict, texts: list[str], out: Path, device: str) -> int:
    """A random-weight Llama of ``shape`` and a tokenizer of its vocabulary size, saved to ``out``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(texts, shape["vocab_size"])
    tokenizer.save_pretrained(out)
    config = LlamaConfig(
        **shape,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in its dtype on its device: 8B fp32 would not fit
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return n


def generate(model_dir: Path, prompts: list[str], args, device: str) -> dict:
    import torch

    from factory.llm.base import ChatRequest, Sampling
    from factory.llm.local import LocalLLM

    llm = LocalLLM(LLMParams(model=str(model_dir), device=device, batch_size=args.batch_size_generate))
    system = "You answer multi-hop questions by building a knowledge graph of triplets."
    requests = [
        ChatRequest.of(
            [{"role": "system", "content": system}, {"role": "user", "content": p}],
            Sampling(max_new_tokens=args.max_new_tokens),
        )
        for p in prompts
    ]
    llm.generate(requests[:2])  # warm-up: kernels, allocator
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    results = llm.generate(requests)
    seconds = time.perf_counter() - t0
    llm.close()
    tokens = sum(r.completion_tokens for r in results)
    return {
        "prompts": len(requests),
        "batch_size": args.batch_size_generate,
        "mean_prompt_tokens": sum(r.prompt_tokens for r in results) / len(results),
        "max_new_tokens": args.max_new_tokens,
        "completion_tokens": tokens,
        "errors": sum(not r.ok for r in results),
        "s": seconds,
        "tokens_per_s": tokens / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / GIB if device == "cuda" else None,
    }


def train(model_dir: Path, chats: list[dict], params: TrainParams, out: Path, device: str) -> dict:
    import torch

    from factory.train.lora import fit_lora

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    m = fit_lora(chats, model_dir, out, params).metrics
    # the estimate at the tokens an example really had (--cost assumes train.max_length, an upper bound)
    mean_tokens = max(32, round(m["tokens_seen"] / m["examples_seen"]))
    at = params.model_copy(update={"max_length": mean_tokens})
    estimate = training_memory(Params(model={"base": str(model_dir)}, train=at.model_dump()))
    measured = m["gpu_peak_mem_gb"]
    return {
        "steps": m["steps"],
        "batch_size": params.batch_size,
        "max_length": params.max_length,
        "mean_tokens_an_example": mean_tokens,
        "tokens_seen": m["tokens_seen"],
        "train_runtime_s": m["train_runtime_s"],
        "step_s": m["train_runtime_s"] / m["steps"],
        "tokens_per_s": m["tokens_per_s"],
        "final_loss": m["final_loss"],
        "peak_memory_gib": measured,
        "estimated_memory_gib": estimate["total"] / GIB,
        "measured_over_estimate": measured / (estimate["total"] / GIB) if measured else None,
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tiny", action="store_true", help="a 2-layer model on CPU: checks the script in seconds"
    )
    ap.add_argument("--prompts", type=int, help="prompts generated (default 64; --tiny 4)")
    ap.add_argument("--max-new-tokens", type=int, help="generation budget (default 128; --tiny 8)")
    ap.add_argument("--batch-size-generate", type=int, help="prompts a batch (default 32; --tiny 4)")
    ap.add_argument("--steps", type=int, help="LoRA optimizer steps (default 10; --tiny 2)")
    ap.add_argument("--batch-size", type=int, help="chats a step (default train.batch_size 8; --tiny 2)")
    ap.add_argument(
        "--max-length", type=int, help="tokens a chat (default train.max_length 1024; --tiny 128)"
    )
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "bench" / "out")))
    args = ap.parse_args(argv)
    defaults, tiny = TrainParams(), args.tiny
    args.prompts = args.prompts or (4 if tiny else 64)
    args.max_new_tokens = args.max_new_tokens or (8 if tiny else 128)
    args.batch_size_generate = args.batch_size_generate or (4 if tiny else 32)
    args.steps = args.steps or (2 if tiny else 10)
    args.batch_size = args.batch_size or (2 if tiny else defaults.batch_size)
    args.max_length = args.max_length or (128 if tiny else defaults.max_length)
    return args


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    size = "tiny" if args.tiny else "llama-3.1-8b"
    print(f"machine: {machine()}", flush=True)
    params = TrainParams(
        budget="steps", max_steps=args.steps, batch_size=args.batch_size, max_length=args.max_length
    )
    started = time.perf_counter()
    prompts = hotpot_like_prompts(args.prompts)
    # gpu_train's chats hold about a quarter of their length argument in words (the tokens of the
    # word-level tokenizer here): 3.5x fills most of max_length and keeps the assistant turn at the end
    chats = synthetic_chats(args.steps * args.batch_size, int(3.5 * args.max_length), seed=0)
    texts = prompts + [m["content"] for c in chats for m in c["messages"]]
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        model_dir = Path(tmp) / "model"
        n = build_model(SIZES[size], texts, model_dir, device)
        build_s = time.perf_counter() - started
        print(f"model: {size}, {n / 1e9:.2f}B parameters, random weights, on {device}; built and saved in "
              f"{build_s:.0f} s", flush=True)  # fmt: skip
        gen = generate(model_dir, prompts, args, device)
        print(
            f"generation (factory.llm.local, batches of {gen['batch_size']}): {gen['tokens_per_s']:.1f} "
            f"tokens/s ({gen['completion_tokens']} tokens for {gen['prompts']} prompts of "
            f"~{gen['mean_prompt_tokens']:.0f} tokens in {gen['s']:.1f} s)"
            + (f", peak {gen['peak_memory_gib']:.1f} GiB" if gen["peak_memory_gib"] else ""),
            flush=True,
        )
        tr = train(model_dir, chats, params, Path(tmp) / "train", device)
    print(
        f"LoRA round (factory.train, {tr['steps']} steps of {tr['batch_size']} x <= {tr['max_length']} "
        f"tokens): {tr['step_s']:.2f} s a step, {tr['tokens_per_s']:.0f} tokens/s"
        + (
            f", peak {tr['peak_memory_gib']:.1f} GiB; params --cost's formula at the "
            f"{tr['mean_tokens_an_example']} tokens an example had: {tr['estimated_memory_gib']:.1f} GiB "
            f"(measured / estimated {tr['measured_over_estimate']:.2f})"
            if tr["peak_memory_gib"]
            else f"; params --cost's formula at the {tr['mean_tokens_an_example']} tokens an example had: "
            f"{tr['estimated_memory_gib']:.2f} GiB on a GPU"
        )
    )
    total = time.perf_counter() - started
    print(f"total {total:.0f} s")
    summary = {"machine": machine(), "size": size, "parameters": n, "device": device, "build_s": build_s}
    summary.update(generation=gen, training=tr, total_s=total)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"figures written to {args.out / 'gpu.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
