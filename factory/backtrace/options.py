"""What params give the labeller: the keyword arguments of ``backtrace_modes`` and the token counter.

Shared by every stage that backtraces (``backtrace``, ``simulate``) so that they label alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factory.backtrace.tokens import TokenCounter
from factory.config import Params


def backtrace_options(params: Params) -> dict[str, Any]:
    """The keyword arguments of ``backtrace_modes`` that params.backtrace sets (embedder loaded once).
    The passages of the answer-passage rule (``backtrace.answer_passage``) are data, not params: the
    caller adds ``passages=``."""
    bp = params.backtrace
    embedder = None
    if bp.embedding_model:
        from factory.backtrace.linking import sentence_embedder

        embedder = sentence_embedder(bp.embedding_model)
    return {
        "simple_cutoff": bp.simple_cutoff,
        "fuzzy_threshold": bp.fuzzy_threshold,
        "containment": bp.containment,
        "admin_relations": tuple(bp.admin_relations),
        "embedder": embedder,
        "embedding_threshold": bp.embedding_threshold,
        "containment_links": bp.containment_links,
        "link_max_containers": bp.link_max_containers,
        "merge_max_words": bp.merge_max_words,
        "question_case": bp.question_case,
    }


def load_token_counter(params: Params) -> tuple[TokenCounter, str | None]:
    """The policy's tokenizer (offline) as a TokenCounter, or whitespace with the reason why."""
    tried = []
    for folder in dict.fromkeys([params.llm.model, params.model.dir]):
        if not folder or not Path(folder).is_dir():
            tried.append(f"{folder}: not a local folder")
            continue
        try:
            fast = Path(folder) / "tokenizer.json"
            if (
                fast.is_file()
            ):  # the same encoder a fast HF tokenizer wraps, without importing transformers (~5 s)
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(fast))
            else:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any loading failure falls back, with the reason recorded
            tried.append(f"{folder}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        counter = TokenCounter(tokenizer)
        counter.name = f"hf:{folder}"
        return counter, None
    return TokenCounter(None), "; ".join(tried) or "no tokenizer folder configured"
