"""Constrained decoding for the local backend: llguidance grammars as a transformers logits processor.

A request's ``Constraint`` (``factory.llm.base``) carries its grammar as a regex; llguidance
compiles it against the model's tokenizer and, at every decoding step, gives the set of tokens
that keep the output inside the grammar (EOS once the grammar is complete). ``GrammarProcessor``
masks every other token to ``-inf`` before temperature and top-p apply (transformers runs custom
processors before its warpers), so greedy and sampled decoding alike only pick allowed tokens.

It runs wherever ``generate`` runs (CPU or CUDA): masks are computed on the CPU (llguidance,
several rows in parallel) and applied to the logits on their device. Rows of a batch may carry
different grammars or none; a row that has finished (EOS) is left alone. llguidance is a small
wheel with no dependencies (the grammar engine of vLLM's ``guidance`` backend).
"""

from __future__ import annotations

import logging
from typing import Any

from factory.llm.base import Constraint

log = logging.getLogger(__name__)


class GrammarEngine:
    """llguidance's view of one tokenizer, and the grammars compiled for it (built once per model)."""

    def __init__(self, hf_tokenizer: Any, eos_ids: set[int]):
        import llguidance
        import llguidance.hf

        self._ll = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=sorted(eos_ids))
        self.vocab = self.tokenizer.vocab_size
        self.eos_ids = set(eos_ids)
        self.executor = llguidance.LLExecutor()
        self._compiled: dict[Constraint, Any] = {}

    def matcher(self, constraint: Constraint):
        """A fresh matcher at the start of ``constraint``'s grammar (compiled once, then copied)."""
        template = self._compiled.get(constraint)
        if template is None:
            grammar = self._ll.LLMatcher.grammar_from_regex(constraint.regex)
            template = self._ll.LLMatcher(self.tokenizer, grammar, log_level=0)
            if template.is_error():
                raise ValueError(f"grammar {constraint.name!r} does not compile: {template.get_error()}")
            self._compiled[constraint] = template
        return template.deep_copy()

    def processor(self, constraints: list[Constraint | None], prompt_width: int) -> GrammarProcessor:
        return GrammarProcessor(self, constraints, prompt_width)


class GrammarProcessor:
    """Masks the logits of each constrained row of a left-padded batch to its grammar's next tokens."""

    def __init__(self, engine: GrammarEngine, constraints: list[Constraint | None], prompt_width: int):
        import torch

        self.engine = engine
        self.matchers = [engine.matcher(c) if c is not None else None for c in constraints]
        self.done = [m is None for m in self.matchers]
        self.width = prompt_width
        self.words = (engine.vocab + 31) // 32
        self.bitmask = torch.zeros((len(constraints), self.words), dtype=torch.int32)
        self.shifts = torch.arange(32, dtype=torch.int32)

    def __call__(self, input_ids, scores):
        import torch
        from llguidance.torch import fill_next_token_bitmask_par

        if input_ids.shape[1] > self.width:  # a token was chosen last step: advance each grammar
            last = input_ids[:, -1].tolist()
            for i, matcher in enumerate(self.matchers):
                if self.done[i]:
                    continue
                if last[i] in self.engine.eos_ids:
                    self.done[i] = True
                elif not matcher.consume_token(last[i]):
                    log.warning(
                        "grammar matcher of row %d failed: %s; row left unconstrained", i, matcher.get_error()
                    )
                    self.done[i] = True
        rows = [i for i, d in enumerate(self.done) if not d]
        if not rows:
            return scores
        fill_next_token_bitmask_par(self.engine.executor, [(self.matchers[i], i) for i in rows], self.bitmask)
        words = self.bitmask[rows]
        allowed = ((words.unsqueeze(-1) >> self.shifts) & 1).reshape(len(rows), -1).bool()
        allowed = allowed[:, : min(allowed.shape[1], scores.shape[1])]
        if not bool(allowed.any(dim=1).all()):  # a matcher with nothing left: end the reply
            for k in torch.nonzero(~allowed.any(dim=1)).flatten().tolist():
                allowed[k, sorted(self.engine.eos_ids)] = True
        mask = torch.zeros((len(rows), scores.shape[1]), dtype=torch.bool)
        mask[:, : allowed.shape[1]] = allowed
        index = torch.tensor(rows, device=scores.device)
        sub = scores.index_select(0, index).masked_fill(~mask.to(scores.device), float("-inf"))
        return scores.index_copy(0, index, sub)
