"""Tokens, LoRA training memory and GPU-hours of a protocol, from its params (``factory params --cost``).

Estimates, each with its rule printed next to it:

* prompt tokens: the agent's real prompts (factory.agent.prompts, ``agent.prompt_version``) rendered for
  a worst-case trajectory of the params (every step taken, every pair looked up, ``retrieval.top_n``
  passages of ``agent.passage_chars`` characters each, one triplet added per pair, every call repaired
  ``agent.repair_attempts`` times after a reply of ``llm.max_new_tokens``), counted at
  ``CHARS_PER_TOKEN`` characters a token (message text only: a chat template adds a few tokens a
  message). Every LLM call of the bound is counted at that trajectory's mean prompt.
* completion tokens: every call of the bound uses its whole budget ``llm.max_new_tokens``.
* training memory: bf16 weights + fp32 LoRA weights, gradients and Adam states + activations
  (Korthikanti et al. 2022), with and without gradient checkpointing.
* GPU-hours of generation: completion tokens at ``H100_TOKENS_PER_S``, a published figure (its source
  is printed).
"""

from __future__ import annotations

import json
from pathlib import Path

from factory.agent.prompts import complete_messages, explore_messages, final_messages, repair_messages
from factory.params.config import Params

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text with a BPE tokenizer
# Output tokens/s of Llama-3.1-8B on one H100 under vLLM: MLPerf Inference v5.1, Offline scenario
# (summarization prompts), Red Hat's submission, FP8 weights, vLLM 0.10.0.
H100_TOKENS_PER_S = 5777
H100_SOURCE = (
    "Red Hat, 'Efficient and reproducible LLM inference: Red Hat MLPerf Inference v5.1 results' (2025), "
    "redhat.com/en/blog/efficient-and-reproducible-llm-inference-red-hat-mlperf-inference-v51-results: "
    "Llama-3.1-8B FP8, vLLM 0.10.0, one H100, Offline"
)
GIB = 2**30

# The shapes --cost knows without a model folder (config.json keys of transformers' LlamaConfig).
SHAPES = {
    "Llama-3.1-8B": {
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "tie_word_embeddings": False,
    },
    "SmolLM2-135M": {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "tie_word_embeddings": True,
    },
}

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"  # HotpotQA's first dev question
TRIPLET = ("Scott Derrickson", "nationality", "American")
PASSAGE = (
    "Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer. He lives "
    "in Los Angeles, California. He is best known for directing horror films such as Sinister, The "
    "Exorcism of Emily Rose, and Deliver Us From Evil, as well as the 2016 Marvel Cinematic Universe "
    "installment, Doctor Strange. "
) * 8  # longer than any passage_chars used here: complete_messages cuts it


def _chars(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages)


def worst_case_prompts(params: Params) -> list[int]:
    """Characters of every prompt of one worst-case trajectory (repairs included), in call order."""
    a, version = params.agent, params.agent.prompt_version
    passages = [("Scott Derrickson", PASSAGE)] * params.retrieval.top_n
    bad = "x" * (params.llm.max_new_tokens * CHARS_PER_TOKEN)  # an unreadable reply of the whole budget
    prompts = []
    for step in range(a.max_iterations):
        graph = [TRIPLET] * (step * a.max_pairs)  # one triplet per pair looked up so far
        prompts.append(explore_messages(version, QUESTION, graph))
        prompts += [
            complete_messages(version, QUESTION, *TRIPLET[:2], passages, a.passage_chars)
        ] * a.max_pairs
    prompts.append(final_messages(version, QUESTION, [TRIPLET] * (a.max_iterations * a.max_pairs)))
    sizes = []
    for messages in prompts:
        sizes.append(_chars(messages))
        repaired = repair_messages(version, messages, bad, "the reply does not follow the format")
        sizes += [_chars(repaired)] * a.repair_attempts
    return sizes


def token_estimate(params: Params, calls: int) -> dict:
    sizes = worst_case_prompts(params)
    mean_prompt = sum(sizes) / len(sizes) / CHARS_PER_TOKEN
    prompt, completion = calls * mean_prompt, calls * params.llm.max_new_tokens
    return {
        "mean_prompt_tokens": mean_prompt,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "gpu_hours": completion / H100_TOKENS_PER_S / 3600,
    }


def model_shape(params: Params) -> tuple[str, dict]:
    """(where the shape comes from, the shape): model.base's config.json when it is a folder here, the
    embedded model's, or Llama-3.1-8B's (what docs/full-scale.md serves) otherwise."""
    base = params.model.base
    if base.startswith("embedded:smollm2-135m"):
        if params.llm.backend == "local":
            return "SmolLM2-135M (the embedded model)", SHAPES["SmolLM2-135M"]
        # a served profile before --set model.base: the model the docs serve
        return "Llama-3.1-8B (assumed: model.base is not set yet)", SHAPES["Llama-3.1-8B"]
    config = Path(base) / "config.json"
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        data.setdefault("head_dim", data["hidden_size"] // data["num_attention_heads"])
        data.setdefault("tie_word_embeddings", False)
        return f"{config}", data
    return f"Llama-3.1-8B (assumed: model.base {base!r} is no model folder here)", SHAPES["Llama-3.1-8B"]


def _module_dims(shape: dict) -> dict[str, tuple[int, int]]:
    h, i, d = shape["hidden_size"], shape["intermediate_size"], shape["head_dim"]
    q, kv = shape["num_attention_heads"] * d, shape["num_key_value_heads"] * d
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def n_parameters(shape: dict) -> int:
    """Weights of a Llama-shaped model: embeddings (+ an untied head), attention, SwiGLU MLP, norms."""
    h, v, layers = shape["hidden_size"], shape["vocab_size"], shape["num_hidden_layers"]
    per_layer = sum(a * b for a, b in _module_dims(shape).values()) + 2 * h
    return v * h * (1 if shape["tie_word_embeddings"] else 2) + layers * per_layer + h


def training_memory(params: Params) -> dict:
    """Bytes of one LoRA training process at train.batch_size x train.max_length tokens a step."""
    source, shape = model_shape(params)
    t = params.train
    dims = _module_dims(shape)
    counted = [m for m in t.target_modules if m in dims]
    lora = shape["num_hidden_layers"] * sum(t.lora_r * sum(dims[m]) for m in counted)
    n = n_parameters(shape)
    sbh = t.batch_size * t.max_length * shape["hidden_size"]
    layers = shape["num_hidden_layers"]
    weights, adapter = 2 * n, 16 * lora
    plain, checkpointed = 34 * sbh * layers, 2 * sbh * layers + 34 * sbh
    return {
        "source": source,
        "parameters": n,
        "lora_parameters": lora,
        "not_counted": [m for m in t.target_modules if m not in dims],
        "weights": weights,
        "adapter": adapter,
        "activations": plain,
        "activations_checkpointed": checkpointed,
        "total": weights + adapter + plain,
        "total_checkpointed": weights + adapter + checkpointed,
    }


def training_tokens(params: Params, runs: int) -> int | None:
    """Tokens trained on in ``runs`` rounds under train.budget steps (an upper bound: examples shorter
    than train.max_length train on fewer); None under budget epochs (the set's size decides)."""
    t = params.train
    if t.budget != "steps":
        return None
    return runs * t.max_steps * t.batch_size * t.grad_accum * t.max_length


def render_gpu_cost(params: Params, total_calls: int, training_runs: int) -> list[str]:
    tok = token_estimate(params, total_calls)
    mem = training_memory(params)
    t, a = params.train, params.agent
    g = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731 (a local format)
    trained = training_tokens(params, training_runs)
    lines = [
        "",
        f"# tokens (estimates; rule: {CHARS_PER_TOKEN} characters a token, message text only)",
        f"prompt          ~{tok['mean_prompt_tokens']:,.0f} tokens a call (the agent's "
        f"{a.prompt_version} prompts of a worst-case trajectory: retrieval.top_n "
        f"{params.retrieval.top_n} passages of agent.passage_chars {a.passage_chars}, "
        "one triplet a pair, each repair after a full reply)",
        f"prompt tokens   whole run x mean = {total_calls:,} x {tok['mean_prompt_tokens']:,.0f} = "
        f"{tok['prompt_tokens']:,.0f}",
        f"completion      whole run x llm.max_new_tokens = {total_calls:,} x {params.llm.max_new_tokens} = "
        f"{tok['completion_tokens']:,.0f}   (every call uses its whole budget)",
        f"GPU-hours       completion / {H100_TOKENS_PER_S:,} tokens/s = {tok['gpu_hours']:,.1f} "
        "H100-hours of generation (rough: FP8 and summarization prompts there, bf16 and longer prompts here)",
        f"  throughput source: {H100_SOURCE}",
        "",
        "# LoRA training memory, one process (formula: 2 bytes a bf16 weight; 16 bytes a LoRA weight:",
        "# fp32 weight, gradient, Adam m and v; activations 34 s b h bytes a layer, Korthikanti et al.",
        "# 2022, 16-bit, no attention-score matrix; with gradient checkpointing 2 s b h a layer + one",
        "# layer's 34 s b h)",
        f"model           {mem['source']}: {mem['parameters'] / 1e9:.2f}B parameters",
        f"weights         2 x {mem['parameters']:,} = {g(mem['weights'])}",
        f"LoRA            16 x {mem['lora_parameters']:,} (r {t.lora_r} on {', '.join(t.target_modules)}) = "
        f"{g(mem['adapter'])}"
        + (f"   (not counted: {', '.join(mem['not_counted'])})" if mem["not_counted"] else ""),
        f"activations     s = train.max_length {t.max_length}, b = train.batch_size {t.batch_size}: "
        f"{g(mem['activations'])}; with gradient checkpointing {g(mem['activations_checkpointed'])}",
        f"total           {g(mem['total'])} without gradient checkpointing; {g(mem['total_checkpointed'])} "
        f"with it (train.gradient_checkpointing is {str(t.gradient_checkpointing).lower()}; + CUDA context "
        "and workspace, ~1-2 GiB)",
    ]
    if trained is not None:
        lines.append(
            "trained tokens  rounds x train.max_steps x batch_size x grad_accum x max_length = "
            f"{training_runs} x {t.max_steps} x {t.batch_size} x {t.grad_accum} x {t.max_length} = "
            f"{trained:,}   (at most; bench/gpu.py measures a step's time)"
        )
    return lines
