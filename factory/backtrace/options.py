"""What params give the labeller beyond ``params.backtrace`` itself: the loaded embedder and the token
counter.

Shared by every stage that backtraces (``backtrace``, ``simulate``) so that they label alike; the
labelling functions take ``params.backtrace`` (``BacktraceParams``) as it is.
"""

from __future__ import annotations

from pathlib import Path

from factory.backtrace import linking
from factory.backtrace.tokens import TokenCounter
from factory.params.config import Params
from factory.params.label_sections import BacktraceParams


def load_embedder(params: BacktraceParams) -> linking.Embedder | None:
    """The sentence embedder ``params.embedding_model`` names, loaded (None: the embedding tier is off)."""
    return linking.sentence_embedder(params.embedding_model) if params.embedding_model else None


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
