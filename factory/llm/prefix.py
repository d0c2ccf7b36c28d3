"""Reuse of a fixed prompt prefix's key/value cache across calls (the local backend's prefix caching).

Every call of one step kind starts with the same system message (instructions and few-shot
examples): ~330-400 of its ~520-570 tokens. Computing that prefix's keys and values once per model
and starting every batch's ``generate`` from them removes most of the prefill, which was over half
of a local generation's time on a CPU without AMX (py-spy, 2026-12-03).

A batch keeps its requests (batches stay what the params make them); each row gets its own
prefix. Rows are laid out as ``[pad][prefix][pad][rest of prompt]``: the prefixes end at one
column and the prompts at another, the pads are masked, and position ids run through the masked
columns (transformers derives them from the attention mask), so a row computes what it would
without the cache, up to floating-point rounding.

The rest of each prompt, but for its last token, is prefilled row by row too (a batch-of-one
forward pass from the row's prefix): a batched prefill computes every row at the width of the
longest rest, and the rests of one step kind vary by a third to a half (their passages and graphs),
so the padding was a third of the prefill. ``generate`` then starts from a cache holding every
prompt but its last column. Keys and values of a prompt are thereby those of a batch-of-one pass:
they never depend on the batch.
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
    cache: Any  # a StaticCache holding every column but the last (width - 1)
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
        (0: none), in a cache holding all but each prompt's last token, with room for ``new_tokens``
        more."""
        import torch
        from transformers import StaticCache

        # a prefix keeps at least the prompt's last token out: generate() computes that column
        lengths = [
            min(n, len(p) - 1) if n >= MIN_PREFIX_TOKENS else 0 for p, n in zip(prompts, prefix_lengths)
        ]
        head = max(lengths)
        tail = max(len(p) - n for p, n in zip(prompts, lengths))
        rows, masks, placed = [], [], []
        for prompt, n in zip(prompts, lengths):
            rest = len(prompt) - n
            rows.append([self.pad_id] * (head - n) + prompt[:n] + [self.pad_id] * (tail - rest) + prompt[n:])
            masks.append([0] * (head - n) + [1] * n + [0] * (tail - rest) + [1] * rest)
            placed.append(self._row_kv(prompt, n))
        cache = StaticCache(config=self.model.config, max_cache_len=head + tail + new_tokens)
        for layer in range(len(placed[0])):
            columns = [
                [
                    _place(kv[layer][which], n, head - n, tail - (len(p) - n))
                    for kv, p, n in zip(placed, prompts, lengths)
                ]
                for which in (0, 1)
            ]
            cache.update(torch.cat(columns[0]), torch.cat(columns[1]), layer)
        return Layout(
            input_ids=torch.tensor(rows, device=self.device),
            attention_mask=torch.tensor(masks, device=self.device),
            cache=cache,
            width=head + tail,
        )

    def _row_kv(self, prompt: list[int], n: int) -> list[tuple[Any, Any]]:
        """Per layer (keys, values) of ``prompt`` but its last token, [1, kv_heads, len - 1, head_dim]:
        the cached prefix of ``n`` tokens, then the rest from a batch-of-one pass."""
        import torch
        from transformers import DynamicCache

        rest = prompt[n:-1]
        prefix = self.kv(tuple(prompt[:n])) if n else None
        if not rest and prefix is not None:
            return prefix
        cache = DynamicCache(config=self.model.config)
        for layer, (keys, values) in enumerate(prefix or ()):
            cache.update(keys, values, layer)
        ids = torch.tensor([rest or prompt[:1]], device=self.device)
        positions = torch.arange(n, n + ids.shape[1], device=self.device)[None]
        with torch.inference_mode():
            out = self.model(
                input_ids=ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1
            )
        kv = [(keys, values) for keys, values, *_ in out.cache]
        if not rest:  # a one-token prompt: nothing before its last token
            kv = [(k[:, :, :0], v[:, :, :0]) for k, v in kv]
        return kv


def _place(tensor: Any, n: int, left: int, middle: int) -> Any:
    """A row's keys or values (prefix of ``n`` columns, then its rest) with zero columns before the
    prefix (``left``) and between prefix and rest (``middle``): the batch layout's columns."""
    import torch

    def zeros(width: int) -> Any:
        return tensor.new_zeros((1, tensor.shape[1], width, tensor.shape[3]))

    parts = [zeros(left), tensor[:, :, :n], zeros(middle), tensor[:, :, n:]]
    kept = [part for part in parts if part.shape[2]]
    return torch.cat(kept, dim=2) if kept else zeros(0)
