"""Reuse of a fixed prompt prefix's key/value cache across calls (the local backend's prefix caching).

Every call of one step kind starts with the same system message (instructions and few-shot
examples): ~330-400 of its ~520-570 tokens. Computing that prefix's keys and values once per model
and starting every batch's ``generate`` from them removes most of the prefill, which was over half
of a local generation's time on a CPU without AMX (py-spy, 2026-12-03).

A batch keeps its requests (batches stay what the params make them); each row gets its own
prefix. Rows are laid out as ``[pad][prefix][pad][rest of prompt]``: the prefixes end at one
column and the prompts at another, the pads are masked, and position ids run through the masked
columns (transformers derives them from the attention mask), so a row computes what it would
without the cache, up to floating-point rounding. The cached keys and values of a prefix are those
of a batch-of-one forward pass, so they never depend on the batch.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# A prefix shorter than this is not worth a cache entry (the chat template's own preamble).
MIN_PREFIX_TOKENS = 32
# Prefixes kept per model: the step kinds of a prompt version, their repair prompts and the judge's.
MAX_PREFIXES = 16


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class Layout:
    """A left-padded batch with per-row cached prefixes: the tensors ``generate`` starts from."""

    input_ids: Any  # [batch, prefix_width + rest_width]
    attention_mask: Any  # same shape; 0 on pads
    cache: Any  # a DynamicCache holding prefix_width columns
    width: int  # the whole prompt width (generation starts after it)


class PrefixCache:
    """Keys and values of prompt prefixes for one model (LRU of ``MAX_PREFIXES``)."""

    def __init__(self, model: Any, pad_id: int, device: str):
        self.model = model
        self.pad_id = pad_id
        self.device = device
        self._kv: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()

    def kv(self, prefix: tuple[int, ...]) -> list[tuple[Any, Any]]:
        """Per layer (keys, values) of ``prefix``, shaped [1, kv_heads, len(prefix), head_dim]."""
        import torch

        found = self._kv.get(prefix)
        if found is not None:
            self._kv.move_to_end(prefix)
            return found
        ids = torch.tensor([list(prefix)], device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True)
        found = [(keys, values) for keys, values, *_ in out.cache]
        self._kv[prefix] = found
        if len(self._kv) > MAX_PREFIXES:
            self._kv.popitem(last=False)
        return found

    def layout(self, prompts: list[list[int]], prefix_lengths: list[int], new_tokens: int) -> Layout:
        """The batch of ``prompts`` whose first ``prefix_lengths[i]`` tokens come from the cache
        (0: none), in a cache with room for ``new_tokens`` more."""
        import torch
        from transformers import StaticCache

        lengths = [n if n >= MIN_PREFIX_TOKENS else 0 for n in prefix_lengths]
        head = max(lengths)
        tail = max(len(p) - n for p, n in zip(prompts, lengths))
        rows, masks = [], []
        for prompt, n in zip(prompts, lengths):
            rest = len(prompt) - n
            rows.append([self.pad_id] * (head - n) + prompt[:n] + [self.pad_id] * (tail - rest) + prompt[n:])
            masks.append([0] * (head - n) + [1] * n + [0] * (tail - rest) + [1] * rest)
        cache = StaticCache(config=self.model.config, max_cache_len=head + tail + new_tokens)
        if head:
            per_row = [self.kv(tuple(p[:n])) if n else None for p, n in zip(prompts, lengths)]
            like = next(kv for kv in per_row if kv is not None)
            for layer, (keys, values) in enumerate(like):
                cache.update(
                    torch.cat([_left_pad(kv, layer, 0, keys, head) for kv in per_row]),
                    torch.cat([_left_pad(kv, layer, 1, values, head) for kv in per_row]),
                    layer,
                )
        return Layout(
            input_ids=torch.tensor(rows, device=self.device),
            attention_mask=torch.tensor(masks, device=self.device),
            cache=cache,
            width=head + tail,
        )


def _left_pad(kv: list | None, layer: int, which: int, like: Any, width: int) -> Any:
    """Row ``kv``'s keys (which=0) or values (1) of ``layer``, zero-padded on the left to ``width``
    columns; a row without a prefix is all zeros, shaped like ``like``."""
    import torch

    tensor = None if kv is None else kv[layer][which]
    missing = width - (0 if tensor is None else tensor.shape[2])
    pad = like.new_zeros((1, like.shape[1], missing, like.shape[3]))
    return pad if tensor is None else torch.cat([pad, tensor], dim=2) if missing else tensor
