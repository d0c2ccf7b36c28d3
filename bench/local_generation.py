"""Local generation on the demo's own calls: the factory's path against transformers' plain batched
generate, and bf16 against fp32, measured on this host.

The factory's local backend (``factory.llm.local``) prefills each step kind's system prompt once and
starts every batch from its keys and values in a preallocated cache (``factory.llm.prefix``). The
baseline is what ``generate`` does when handed the batch as it is: whole prompts, left-padded, its
default dynamic cache (which copies the whole cache at every token). Both decode under the same
grammars (llguidance) and settings.

The bench records the LLM calls of the base model's greedy evaluation of ``--questions`` held-out
questions (the agent's real prompts, constraints and batches: run ``dvc repro prepare_model index``
first), then replays those batches in each configuration, interleaved, ``--repeats`` times, and
prints CPU and wall seconds per configuration (the least of the repeats), the ratio to the baseline
of the same precision, how many replies agree with the baseline's, and the machine: its CPU, whether
it has AMX and AVX512-BF16, cores and load. bf16 is the local backend's choice on CPUs with either
(``llm.dtype: auto``); compare the two precisions' rows here before changing that on a new CPU.
``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16`` keeps oneDNN off AMX, to see a CPU without it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import print_table  # noqa: E402 (after the sys.path line)


class Recorder:
    """An LLM that passes batches to ``inner`` and keeps each batch's requests."""

    def __init__(self, inner):
        self.inner, self.batches = inner, []
        self.identity, self.backend = inner.identity, inner.backend

    def generate(self, requests):
        self.batches.append(list(requests))
        return self.inner.generate(requests)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)

    def close(self):
        pass


def record_batches(params, n_questions: int) -> list[list]:
    """The batches of the base model's greedy evaluation of ``n_questions`` held-out questions."""
    from factory.agent.loop import Run, run_trajectories
    from factory.agent.policy import BASE, Policy
    from factory.agent.setup import load_inputs
    from factory.execution.sampling import evaluation_sample
    from factory.llm.local import LocalLLM

    params.evaluate.n_questions = n_questions
    inputs = load_inputs(params)
    chosen, sampling = evaluation_sample(params, inputs.questions, "heldout")
    llm = Recorder(LocalLLM(params.llm.model_copy(update={"device": "cpu"})))
    questions = inputs.rows(chosen)
    lockstep = Run(
        questions,
        llm,
        inputs.retriever,
        params,
        Policy(BASE, None, -1),
        0,
        sampling,
        passages=inputs.passages,
    )
    run_trajectories(lockstep, questions, 1)
    return llm.batches


def baseline_generate(llm, requests: list) -> list[str]:
    """transformers' generate on the whole left-padded prompts, default cache, same grammar and config."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    _ = llm.model  # loaded (sets eos_ids)
    prompts = [llm._prompt(r) for r in requests]
    pad, width = llm.tokenizer.pad_token_id, max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    s = requests[0].sampling
    config = GenerationConfig(
        max_new_tokens=s.max_new_tokens,
        do_sample=False,
        eos_token_id=sorted(llm.eos_ids),
        pad_token_id=pad,
        stop_strings=list(s.stop) or None,
    )
    extra = {"tokenizer": llm.tokenizer} if s.stop else {}
    if any(r.constraint for r in requests):
        extra["logits_processor"] = LogitsProcessorList(
            [llm.grammar.processor([r.constraint for r in requests], width)]
        )
    with torch.inference_mode():
        out = llm.model.generate(input_ids=ids, attention_mask=mask, generation_config=config, **extra)
    return [llm.tokenizer.decode(row, skip_special_tokens=True) for row in out[:, width:].tolist()]


def machine() -> str:
    import torch

    model = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return (
        f"{model}; AMX {'yes' if amx else 'no'}, AVX512-BF16 {'yes' if bf16 else 'no'}"
        f"{f', ONEDNN_MAX_CPU_ISA={isa}' if isa else ''}; {os.cpu_count()} cores, "
        f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}"
    )


def replay(params, batches: list[list], dtypes: list[str], repeats: int) -> dict:
    from factory.llm.local import LocalLLM

    llms = {d: LocalLLM(params.llm.model_copy(update={"device": "cpu", "dtype": d})) for d in dtypes}
    runs = {(d, path): [] for d in dtypes for path in ("baseline", "factory")}
    texts: dict = {}
    for _ in range(repeats):
        for (dtype, path), times in runs.items():
            llm = llms[dtype]
            c0, t0, out = time.process_time(), time.perf_counter(), []
            for batch in batches:
                if path == "factory":
                    out += [r.text for r in llm.generate(batch)]
                else:
                    out += baseline_generate(llm, batch)
            times.append((time.process_time() - c0, time.perf_counter() - t0))
            texts[dtype, path] = out
    return {
        key: {
            "cpu_s": min(c for c, _ in times),
            "wall_s": min(w for _, w in times),
            "same_as_baseline": sum(a == b for a, b in zip(texts[key], texts[key[0], "baseline"])),
        }
        for key, times in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=4, help="held-out questions evaluated (default 4)")
    parser.add_argument("--repeats", type=int, default=2, help="replays of each configuration (default 2)")
    parser.add_argument("--dtypes", default="bfloat16,float32", help="precisions compared")
    args = parser.parse_args()
    os.chdir(ROOT)
    from factory.params.config import load_params

    params = load_params("params.yaml", [])
    batches = record_batches(params, args.questions)
    calls = sum(len(b) for b in batches)
    print(f"machine: {machine()}")
    print(f"recorded {len(batches)} batches, {calls} calls of {args.questions} questions' evaluation")
    results = replay(params, batches, args.dtypes.split(","), args.repeats)
    rows = []
    for (dtype, path), r in results.items():
        base = results[dtype, "baseline"]
        rows.append(
            (
                f"{dtype} {path}",
                f"{r['cpu_s']:.1f} s CPU, {r['wall_s']:.1f} s",
                f"{base['wall_s'] / r['wall_s']:.2f}x baseline wall; "
                f"{r['same_as_baseline']}/{calls} replies as baseline",
            )
        )
    fastest = min(results, key=lambda k: results[k]["wall_s"])
    rows.append(
        ("fastest", f"{fastest[0]} {fastest[1]}", "llm.dtype: auto picks bfloat16 on AMX / AVX512-BF16")
    )
    print_table(f"local generation, least of {args.repeats} replays", rows)


if __name__ == "__main__":
    main()
