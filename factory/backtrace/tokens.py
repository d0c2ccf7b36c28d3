"""Token counts of generated text, in one unit for every figure (FA ratio): whitespace or a tokenizer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from factory.utils.errors import FactoryError


class TokenCounter:
    """Counts tokens of generated text: whitespace by default, an object with ``count_tokens(text)``,
    or a Hugging Face tokenizer (``encode`` without special tokens). ``name`` is recorded in labels."""

    def __init__(self, tokenizer: Any = None):
        if tokenizer is None:
            self.name, self._count = "whitespace", _whitespace_count
        elif isinstance(tokenizer, TokenCounter):
            self.name, self._count = tokenizer.name, tokenizer._count
        elif hasattr(tokenizer, "count_tokens"):
            self.name = str(getattr(tokenizer, "name", type(tokenizer).__name__))
            self._count = tokenizer.count_tokens
        elif hasattr(tokenizer, "encode"):
            self.name = "hf:" + str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
            self._count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))
        else:
            raise FactoryError(f"tokenizer {tokenizer!r}: needs count_tokens(text) or encode(text)")

    def __call__(self, text: str | None) -> int:
        return int(self._count(text or "")) if text else 0

    def many(self, texts: Iterable[str | None]) -> list[int]:
        """Token counts of several texts (the whitespace case without per-call overhead)."""
        if self._count is _whitespace_count:
            return [len(t.split()) if t else 0 for t in texts]
        return [self(t) for t in texts]


def _whitespace_count(text: str) -> int:
    return len(text.split())
