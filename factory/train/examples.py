"""Chat examples -> token ids and labels for supervised fine-tuning, loss on assistant tokens only.

The assistant spans are found by rendering, with the model's own chat template, the conversation
up to each assistant turn *with* the generation prompt (the prompt the model sees at inference) and
the conversation *through* that turn: the text between the two is what the model must produce. The
full conversation is tokenised once with character offsets and a token is labelled when it overlaps
an assistant span. This needs no template keyword (no ``{% generation %}`` tags) and is immune to
BPE merges that make "tokenise the prefix separately" disagree with the full tokenisation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from factory.utils.errors import FactoryError

IGNORE = -100  # label of tokens that carry no loss (prompt, template glue, padding)
ROLES = ("system", "user", "assistant")


def _example_id(example: dict, index: int) -> str:
    return str(example.get("example_id") or f"#{index}")


def check_messages(example: dict, index: int = 0) -> list[dict]:
    """The example's messages as [{role, content}], or a FactoryError naming the example and field."""
    eid = _example_id(example, index)
    messages = example.get("messages")
    if not isinstance(messages, (list, tuple)) or not messages:
        raise FactoryError(
            f"supervision example {eid!r}: field 'messages' must be a non-empty list of {{role, content}}"
        )
    out = []
    for j, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise FactoryError(
                f"supervision example {eid!r}: field 'messages[{j}]' must be "
                f"{{role: system|user|assistant, content: str}} (got {m!r:.120})"
            )
        out.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "assistant" for m in out):
        raise FactoryError(
            f"supervision example {eid!r}: field 'messages' has no assistant turn to learn from"
        )
    return out


def _render(tokenizer, messages: list[dict], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def assistant_spans(
    messages: list[dict], tokenizer, example_id: str = "?"
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the [start, end) character spans of its assistant outputs.

    A span runs from the end of the generation prompt to the end of the rendered turn (content
    plus the template's end-of-turn marker), without trailing whitespace the model never emits.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise FactoryError(
            "the model's tokenizer has no chat template; training needs one to render the examples"
        )
    text = _render(tokenizer, messages, False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = _render(tokenizer, messages[:i], True)
        through = _render(tokenizer, messages[: i + 1], False)
        if not (through.startswith(prompt) and text.startswith(through)):
            raise FactoryError(
                f"supervision example {example_id!r}: the chat template renders turn {i} differently in "
                "a prefix of the "
                "conversation than in the whole conversation, so the assistant tokens cannot be located; "
                "use a model "
                "whose template renders conversations incrementally (ChatML, Llama 3, ...)"
            )
        end = len(through.rstrip())
        if end > len(prompt):
            spans.append((len(prompt), end))
    return text, spans


@dataclass
class Encoded:
    """Token ids of one example and their labels (IGNORE outside the assistant spans)."""

    example_id: str
    input_ids: list[int]
    labels: list[int]
    truncated: bool  # the rendered example was longer than max_length

    @property
    def assistant_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


def encode_example(example: dict, tokenizer, max_length: int, index: int = 0) -> Encoded:
    """Tokenise one chat example with the model's template; labels only on assistant tokens; truncate."""
    eid = _example_id(example, index)
    messages = check_messages(example, index)
    text, spans = assistant_spans(messages, tokenizer, eid)
    if not getattr(tokenizer, "is_fast", False):
        raise FactoryError("training needs a fast tokenizer (character offsets locate the assistant tokens)")
    # The template text already holds any BOS/special tokens it wants; adding more would shift it.
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    labels = [
        tok if any(start < e and end > s for s, e in spans) else IGNORE
        for tok, (start, end) in zip(ids, offsets)
    ]
    truncated = len(ids) > max_length
    return Encoded(eid, ids[:max_length], labels[:max_length], truncated)


@dataclass
class EncodedSet:
    """Encoded examples fit for training, and what happened to every input example."""

    examples: list[Encoded] = field(default_factory=list)
    received: int = 0
    truncated: int = 0  # among kept examples
    dropped_no_assistant_tokens: list[str] = field(default_factory=list)  # truncation left no assistant token

    @property
    def tokens_total(self) -> int:
        return sum(len(e.input_ids) for e in self.examples)

    @property
    def tokens_assistant(self) -> int:
        return sum(e.assistant_tokens for e in self.examples)

    def counts(self) -> dict:
        return {
            "examples_received": self.received,
            "examples_used": len(self.examples),
            "examples_dropped_no_assistant_tokens": len(self.dropped_no_assistant_tokens),
            "examples_truncated": self.truncated,
            "tokens_total": self.tokens_total,
            "tokens_assistant": self.tokens_assistant,
        }


def encode_examples(examples: Sequence[dict], tokenizer, max_length: int) -> EncodedSet:
    """Encode every example; one whose assistant tokens all fall past max_length is dropped and named."""
    out = EncodedSet(received=len(examples))
    for i, example in enumerate(examples):
        enc = encode_example(example, tokenizer, max_length, i)
        if enc.assistant_tokens == 0:
            out.dropped_no_assistant_tokens.append(enc.example_id)
            continue
        out.truncated += enc.truncated
        out.examples.append(enc)
    return out


class PadCollator:
    """Right-pads a batch: input ids with the pad id, labels with IGNORE, attention mask 0 on padding."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, features: list[dict]) -> dict:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for row, f in enumerate(features):
            n = len(f["input_ids"])
            ids[row, :n] = torch.tensor(f["input_ids"], dtype=torch.long)
            labels[row, :n] = torch.tensor(f["labels"], dtype=torch.long)
            mask[row, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def data_hash(examples: Sequence[dict]) -> str:
    """sha256 of the examples' ids and messages, in order (the training data's identity)."""
    h = hashlib.sha256()
    for i, ex in enumerate(examples):
        record = {
            "example_id": _example_id(ex, i),
            "messages": [
                {"role": m.get("role"), "content": m.get("content")} for m in ex.get("messages") or []
            ],
        }
        h.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
