"""GPU check of the local backend: batched vs sequential generation on a model of real size.

Self-contained (no network, no corpora needed): builds a Llama with random weights from a config
(SmolLM2-135M's, or a 1B Llama's) and a word-level tokenizer whose vocabulary has the config's
size, writes both to a temporary folder, loads it with factory.llm.local.LocalLLM (bf16 on CUDA,
fp32 on CPU) and generates greedily for 20 HotpotQA-like prompts: once as batches, once one
prompt at a time. Throughput does not depend on the weights; random weights rarely emit EOS, so
every call runs to the token budget and both modes do the same work.

    python bench/gpu_local_backend.py                         # SmolLM2-135M config, 20 prompts
    python bench/gpu_local_backend.py --size smollm2-135m llama-1b
    python bench/gpu_local_backend.py --size tiny --max-new-tokens 16   # quick CPU check
    python bench/gpu_local_backend.py --prompts prompts.json  # a JSON list of questions (or of {"question":
    ...})

Prints tokens/s and LLM calls/min for both modes and their ratio; writes the figures as JSON to
--out (default: $OUT when set, else bench/out/).
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
sys.path.insert(0, str(ROOT))

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[UNK]"]

CONFIGS = {
    # HuggingFaceTB/SmolLM2-135M-Instruct
    "smollm2-135m": {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
    },
    # meta-llama/Llama-3.2-1B
    "llama-1b": {
        "vocab_size": 128256,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
    },
    # for a quick check on CPU
    "tiny": {
        "vocab_size": 4096,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    },
}

ENTITIES = [
    "Scott Derrickson",
    "Ed Wood",
    "Kiss and Tell",
    "Shirley Temple",
    "the Laleli Mosque",
    "Esma Sultan Mansion",
    "Adriana Trigiani",
    "Big Stone Gap",
    "Greenwich Village",
    "the Oberoi family",
    "Allie Goertz",
    "Milhouse",
    "Tata Group",
    "Nobody Loves You",
    "Brown State Fishing Lake",
    "Jerry Glanville",
    "the Arena Football League",
]
RELATIONS = [
    "nationality",
    "director",
    "founded in",
    "located in",
    "member of",
    "born in",
    "spouse",
    "genre",
    "headquarters",
    "named after",
    "released in",
    "coached by",
]


def hotpot_like_prompts(n: int, seed: int = 0) -> list[str]:
    """``n`` synthetic multi-hop questions with a few retrieved-passage-like lines each."""
    rng = random.Random(seed)
    prompts = []
    for i in range(n):
        a, b = rng.sample(ENTITIES, 2)
        rel = rng.choice(RELATIONS)
        passages = "\n".join(
            f"[{k + 1}] {rng.choice(ENTITIES)} : "
            f"{' '.join(rng.choice(ENTITIES + RELATIONS) for _ in range(24))} ."
            for k in range(4)
        )
        prompts.append(
            f"Question {i}: What is the {rel} of the entity connected to {a} through {b} ?\n"
            f"Knowledge so far:\n({a} ; {rel} ; {b})\nRetrieved passages:\n{passages}\n"
            "Reply with a thought and entity | relation pairs, or a final answer."
        )
    return prompts


def load_prompts(path: Path | None, n: int) -> list[str]:
    if path is None:
        return hotpot_like_prompts(n)
    data = json.loads(Path(path).read_text())
    questions = [d["question"] if isinstance(d, dict) else str(d) for d in data]
    if not questions:
        raise SystemExit(f"{path}: no prompts")
    return [questions[i % len(questions)] for i in range(n)]


def build_tokenizer(texts: list[str], vocab_size: int):
    """A word-level tokenizer whose vocabulary has exactly ``vocab_size`` entries (filler words pad it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words: list[str] = []
    seen = set(SPECIAL)
    for text in texts:
        for w in pre_tokenizers.WhitespaceSplit().pre_tokenize_str(text):
            if w[0] not in seen:
                seen.add(w[0])
                words.append(w[0])
    base = SPECIAL + words
    vocab = {tok: i for i, tok in enumerate(base[:vocab_size])}
    for i in range(len(vocab), vocab_size):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="[UNK]"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_model(size: str, texts: list[str], out: Path, device: str) -> Path:
    """A random-weight Llama of ``size`` plus tokenizer, saved (bf16 on CUDA) to ``out``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = dict(CONFIGS[size])
    tokenizer = build_tokenizer(texts, spec["vocab_size"])
    tokenizer.save_pretrained(out)
    config = LlamaConfig(
        **spec,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out, n_params


def run_size(size: str, prompts: list[str], args) -> dict:
    import torch

    from factory.llm.base import ChatRequest, Sampling
    from factory.llm.local import LocalLLM, pick_device
    from factory.params.agent_sections import LLMParams

    device = pick_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        model_dir, n_params = build_model(size, prompts, Path(tmp) / size, device)
        build_s = time.perf_counter() - t0
        llm = LocalLLM(LLMParams(model=str(model_dir), device=device, batch_size=args.batch_size))
        sampling = Sampling(max_new_tokens=args.max_new_tokens)
        system = "You are a KnowTrace agent. Answer multi-hop questions by exploring a knowledge graph."
        requests = [
            ChatRequest.of([{"role": "system", "content": system}, {"role": "user", "content": p}], sampling)
            for p in prompts
        ]
        llm.generate(requests[:2])  # warm-up (kernels, allocator)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        batched = llm.generate(requests)
        batched_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        sequential = [llm.generate([r])[0] for r in requests]
        sequential_s = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
        identity, dtype = llm.identity, str(llm.dtype).replace("torch.", "")
        llm.close()
    bt, st = sum(r.completion_tokens for r in batched), sum(r.completion_tokens for r in sequential)
    n = len(requests)
    return {
        "size": size,
        "parameters": n_params,
        "device": device,
        "dtype": dtype,
        "identity": identity,
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "prompts": n,
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "mean_prompt_tokens": sum(r.prompt_tokens for r in batched) / n,
        "errors": sum(not r.ok for r in batched + sequential),
        "build_s": build_s,
        "batched": {
            "s": batched_s,
            "tokens": bt,
            "tokens_per_s": bt / batched_s,
            "calls_per_min": 60 * n / batched_s,
        },
        "sequential": {
            "s": sequential_s,
            "tokens": st,
            "tokens_per_s": st / sequential_s,
            "calls_per_min": 60 * n / sequential_s,
        },
        "speedup_tokens_per_s": (bt / batched_s) / (st / sequential_s),
        "trajectories_per_min_estimate": {
            "calls_per_trajectory": args.calls_per_trajectory,
            "batched": 60 * n / batched_s / args.calls_per_trajectory,
            "sequential": 60 * n / sequential_s / args.calls_per_trajectory,
        },
        "peak_gpu_memory_gib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", nargs="+", default=["smollm2-135m"], choices=sorted(CONFIGS))
    parser.add_argument(
        "--prompts", type=Path, default=None, help="JSON list of questions (default: 20 generated)"
    )
    parser.add_argument("--n", type=int, default=20, help="prompts generated / used")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument(
        "--calls-per-trajectory",
        type=float,
        default=7.0,
        help="LLM calls per trajectory for the trajectories/min estimate (e.g. 3 explore + 3 complete + "
        "1 final)",
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "bench" / "out")))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    prompts = load_prompts(args.prompts, args.n)
    results = []
    for size in args.size:
        r = run_size(size, prompts, args)
        results.append(r)
        b, s = r["batched"], r["sequential"]
        print(
            f"\n{size} ({r['parameters'] / 1e6:.0f}M params, {r['dtype']} on {r['gpu'] or r['device']}): "
            f"{r['prompts']} prompts of ~{r['mean_prompt_tokens']:.0f} tokens, <= {r['max_new_tokens']} "
            "new tokens, greedy"
        )
        print(
            f"  batched (batch {r['batch_size']}): {b['tokens_per_s']:9.1f} tokens/s  "
            f"{b['calls_per_min']:8.1f} calls/min  ({b['tokens']} tokens in {b['s']:.2f} s)"
        )
        print(
            f"  sequential:          {s['tokens_per_s']:9.1f} tokens/s  {s['calls_per_min']:8.1f} "
            f"calls/min  ({s['tokens']} tokens in {s['s']:.2f} s)"
        )
        t = r["trajectories_per_min_estimate"]
        print(
            f"  batched / sequential: {r['speedup_tokens_per_s']:.2f}x tokens/s; trajectories/min at "
            f"{t['calls_per_trajectory']:g} calls each: "
            f"{t['batched']:.1f} batched vs {t['sequential']:.1f} sequential"
        )
        if r["peak_gpu_memory_gib"] is not None:
            print(f"  peak GPU memory: {r['peak_gpu_memory_gib']:.2f} GiB; errors: {r['errors']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_local_backend.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\nfigures written to {args.out / 'gpu_local_backend.json'}")


if __name__ == "__main__":
    main()
