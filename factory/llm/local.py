"""The in-process backend: transformers + PEFT on CPU or CUDA (bf16 where the hardware has it, else fp32).

Requests with identical ``Sampling`` are generated together in batches of ``llm.batch_size`` with
LEFT padding (prompts end where generation starts), shortest-prompt-first within a group so a
batch wastes little padding. Sampled batches seed torch from the batch's own content (messages,
seeds, sample indices) inside ``torch.random.fork_rng``, so a batch is reproducible and the global
RNG state of the caller is left untouched. A batch that fails (e.g. CUDA out of memory, after
halving it down to single requests) yields error responses — never an exception.

A request with a ``Constraint`` is decoded under its grammar (``factory.llm.constrain``, llguidance);
constrained and unconstrained requests may share a batch. An empty completion (the model ended its
reply at once) is an error response, not text: the agent never sends a repair prompt for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import defaultdict
from pathlib import Path

from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.llm.identity import SHORT, adapter_hash, weights_hash
from factory.llm.prefix import PrefixCache, common_prefix
from factory.params.agent_sections import LLMParams
from factory.utils.errors import FactoryError
from factory.utils.progress import meter

log = logging.getLogger(__name__)


def pick_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; explicit 'cuda' without a GPU is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise FactoryError("llm.device is 'cuda' but no CUDA device is visible (use 'auto' or 'cpu')")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise FactoryError(f"llm.device {device!r}: expected auto, cpu or cuda")
    return device


def native_bf16_cpu() -> bool:
    """True on CPUs with bf16 matrix units (AMX or AVX512-BF16)."""
    import torch

    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def pick_dtype(device: str, dtype: str):
    """'auto': bf16 on CUDA and on CPUs with native bf16 (decoding is memory-bound: half the bytes, about
    twice the speed there), else fp32. In bf16 a request's text can depend on its batch-mates; runs stay
    reproducible because the agent forms the same batches every time and the response cache stores a
    whole batch at once (a resumed run re-forms the interrupted batch exactly). Part of the model
    identity, so cached answers never mix precisions."""
    import torch

    if dtype == "int8":  # a CPU format: loaded in fp32, then quantized (factory.llm.quantize); else 'auto'
        dtype = "float32" if device == "cpu" else "auto"
    if dtype != "auto":
        return {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    return torch.bfloat16 if device.startswith("cuda") or native_bf16_cpu() else torch.float32


def batch_seed(requests: list[ChatRequest]) -> int:
    """A torch seed derived from the batch's content, seeds and sample indices."""
    blob = json.dumps([[r.messages, r.sampling.seed, r.sample] for r in requests], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big") & ((1 << 63) - 1)


def trim_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """Cut ``text`` at the earliest occurrence of any stop string; True when one was found."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


class LocalLLM:
    """A local model folder (plus an optional PEFT LoRA adapter folder) served in-process."""

    backend = "local"
    constraint_via = "local:llguidance"  # part of a constrained request's cache key

    def __init__(self, cfg: LLMParams, adapter_path: str | Path | None = None, *, prefix_cache: bool = True):
        """The model folder ``cfg.model`` on ``cfg.device`` in ``cfg.dtype``, ``cfg.batch_size`` prompts a
        batch (``params.llm``, validated when it was made). ``prefix_cache=False`` prefills every prompt
        whole (the baseline the prefix cache is checked against)."""
        self.model_path = Path(cfg.model)
        if not (self.model_path / "config.json").is_file():
            raise FactoryError(
                f"model folder {self.model_path} not found or has no config.json "
                "(run `factory prepare-model` first, or set llm.model to a local model folder)"
            )
        self.device = pick_device(cfg.device)
        self.batch_size = cfg.batch_size
        # int8 is a CPU format (factory.llm.quantize): on a GPU the demo profile's int8 runs as 'auto' (bf16)
        self.int8 = cfg.dtype == "int8" and self.device == "cpu"
        self.dtype = pick_dtype(self.device, cfg.dtype)
        precision = "int8" if self.int8 else str(self.dtype).removeprefix("torch.")
        self.identity = (
            f"local:{self.model_path.resolve().name}@{weights_hash(self.model_path)[:SHORT]}:{precision}"
        )
        self.adapter_path = Path(adapter_path) if adapter_path is not None else None
        if self.adapter_path is not None:
            self.identity += f"+{adapter_hash(self.adapter_path)[:SHORT]}"
        # The model loads on first use: a stage whose calls all hit the response cache never pays for it.
        self._model = None
        self._tokenizer = None
        self._grammar = None
        self.prefix_cache = prefix_cache
        self._prefixes = None
        self._shared_ids: dict[tuple, list[int]] = {}  # shared messages -> their tokens

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            if not getattr(tokenizer, "chat_template", None):
                raise FactoryError(f"{self.model_path}: the tokenizer has no chat template")
            self._tokenizer = tokenizer
        return self._tokenizer

    @property
    def model(self):
        if self._model is None:
            from transformers import AutoModelForCausalLM

            from factory.utils.io import loading_weights

            with loading_weights(self.model_path):  # a damaged model.safetensors: named, restore said
                model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=self.dtype)
            if self.adapter_path is not None:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.adapter_path)
            if self.int8:
                from factory.llm.quantize import quantize_int8

                model = quantize_int8(model.eval())
            self._model = model.to(self.device).eval()
            self.eos_ids = self._eos_ids()
        return self._model

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(int(i) for i in source)
        if not ids:
            raise FactoryError(f"{self.model_path}: neither the tokenizer nor the model defines an EOS token")
        return ids

    @property
    def grammar(self):
        """The llguidance engine for this tokenizer (built on the first constrained request)."""
        if self._grammar is None:
            from factory.llm.constrain import GrammarEngine

            _ = self.model  # sets eos_ids
            self._grammar = GrammarEngine(self.tokenizer, self.eos_ids)
        return self._grammar

    # ------------------------------------------------------------------ public API
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        """One response per request, in order; identical Sampling -> the same batches."""
        out: list[ChatResponse | None] = [None] * len(requests)
        if requests:
            _ = self.model  # load now (sets eos_ids) rather than inside a batch
        prompts = [self._prompt(r) for r in requests]
        groups: dict[Sampling, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[r.sampling].append(i)
        for sampling, idx in groups.items():
            idx = sorted(idx, key=lambda i: (len(prompts[i]), i))  # less padding per batch
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                results = self._generate_safely(
                    [requests[i] for i in chunk], [prompts[i] for i in chunk], sampling
                )
                for i, resp in zip(chunk, results):
                    out[i] = resp
        return [r for r in out if r is not None]

    def close(self) -> None:
        """Free the model (and the CUDA cache)."""
        import torch

        self._model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ internals
    def _prompt(self, request: ChatRequest) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            request.message_dicts(), add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _prefix_length(self, request: ChatRequest, prompt: list[int]) -> int:
        """Tokens at the start of ``prompt`` that its shared messages alone render to (0: none)."""
        shared = request.shared_messages
        if shared is None:
            shared = int(bool(request.messages) and request.messages[0][0] == "system")
        if not self.prefix_cache or not 0 < shared < len(request.messages):
            return 0
        head = request.messages[:shared]
        ids = self._shared_ids.get(head)
        if ids is None:
            messages = [{"role": r, "content": c} for r, c in head]
            text = self.tokenizer.apply_chat_template(messages, tokenize=False)
            ids = self._shared_ids[head] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return common_prefix(ids, prompt)

    def _generate_safely(
        self, requests: list[ChatRequest], prompts: list[list[int]], sampling: Sampling
    ) -> list[ChatResponse]:
        import torch

        try:
            return self._generate_batch(requests, prompts, sampling)
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()
            if len(requests) > 1:
                half = len(requests) // 2
                log.warning("CUDA out of memory on a batch of %d; retrying as two halves", len(requests))
                return self._generate_safely(
                    requests[:half], prompts[:half], sampling
                ) + self._generate_safely(requests[half:], prompts[half:], sampling)
            return [_error(f"CUDA out of memory: {exc}".splitlines()[0])]
        except Exception as exc:  # noqa: BLE001 — one failed batch must not lose the caller's other records
            log.warning("local generation failed for a batch of %d: %s", len(requests), exc)
            return [_error(f"{type(exc).__name__}: {exc}".splitlines()[0]) for _ in requests]

    def _generate_batch(
        self, requests: list[ChatRequest], prompts: list[list[int]], sampling: Sampling
    ) -> list[ChatResponse]:
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList

        t0 = time.perf_counter()
        pad = self.tokenizer.pad_token_id
        if self._prefixes is None:
            self._prefixes = PrefixCache(self.model, pad, self.device)
        with torch.inference_mode():
            prefixes = [self._prefix_length(r, p) for r, p in zip(requests, prompts)]
            layout = self._prefixes.layout(prompts, prefixes, sampling.max_new_tokens)
        width = layout.width
        sampled = sampling.temperature > 0
        config = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=sampled,
            temperature=sampling.temperature if sampled else None,
            top_p=sampling.top_p if sampled else None,
            top_k=0 if sampled else None,  # temperature + top_p only, as the OpenAI API means them
            repetition_penalty=1.0,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=pad,
            stop_strings=list(sampling.stop) or None,
            disable_compile=True,  # the batch's shapes change every call: compiling would not pay
        )
        extra: dict = {"tokenizer": self.tokenizer} if sampling.stop else {}
        extra["stopping_criteria"] = StoppingCriteriaList([TokenMeter(len(requests), self.eos_ids)])
        if any(r.constraint is not None for r in requests):
            from transformers import LogitsProcessorList

            processor = self.grammar.processor([r.constraint for r in requests], width)
            extra["logits_processor"] = LogitsProcessorList([processor])
        with (
            torch.inference_mode(),
            torch.random.fork_rng(devices=[self.device] if self.device.startswith("cuda") else []),
        ):
            if sampled:
                torch.manual_seed(batch_seed(requests))
            generated = self.model.generate(
                input_ids=layout.input_ids,
                attention_mask=layout.attention_mask,
                cache=layout.cache,
                generation_config=config,
                **extra,
            )
        new_tokens = generated[:, width:].tolist()
        meter.add(calls=len(requests))
        elapsed = time.perf_counter() - t0
        responses = []
        for prompt, ids in zip(prompts, new_tokens):
            end = next((j for j, t in enumerate(ids) if t in self.eos_ids), None)
            kept = ids if end is None else ids[:end]
            if end is None:  # no EOS: trailing pads (batch-mates finished later) are not output
                while kept and kept[-1] == pad:
                    kept = kept[:-1]
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            text, stopped = trim_at_stop(text, sampling.stop)
            hit_budget = end is None and not stopped and len(kept) >= sampling.max_new_tokens
            if not text.strip() and not stopped and not hit_budget:
                responses.append(
                    ChatResponse(
                        text="",
                        prompt_tokens=len(prompt),
                        completion_tokens=len(kept) + (0 if end is None else 1),
                        latency_s=elapsed,
                        finish_reason="error",
                        error="empty completion (the model ended its reply at once)",
                    )
                )
                continue
            responses.append(
                ChatResponse(
                    text=text,
                    prompt_tokens=len(prompt),
                    completion_tokens=len(kept) + (0 if end is None else 1),
                    latency_s=elapsed,
                    finish_reason="length" if hit_budget else "stop",
                )
            )
        return responses


class TokenMeter:
    """A stopping criterion that never stops: it adds each decoding step's new tokens (rows not yet
    ended) to ``factory.utils.progress.meter``, so a long batch shows progress token by token."""

    def __init__(self, rows: int, eos_ids: set[int]):
        self.ended = [False] * rows
        self.eos_ids = eos_ids

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        last = input_ids[:, -1].tolist()
        meter.add(tokens=sum(not ended for ended in self.ended))
        self.ended = [ended or token in self.eos_ids for ended, token in zip(self.ended, last)]
        return torch.zeros(len(last), dtype=torch.bool, device=input_ids.device)


def _error(reason: str) -> ChatResponse:
    return ChatResponse(text="", finish_reason="error", error=reason)
