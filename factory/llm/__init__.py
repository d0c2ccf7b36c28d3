"""LLM backends behind one interface (factory.llm.base.LLM), built from params by ``make_llm``.

- ``local``: transformers + PEFT in-process (factory.llm.local.LocalLLM);
- ``openai``: OpenAI-compatible endpoints such as vLLM (factory.llm.openai_backend.OpenAILLM);
- both optionally wrapped in the response cache (factory.llm.cache.CachedLLM).
"""

from __future__ import annotations

import logging
from pathlib import Path

from factory.llm.base import LLM, ChatRequest, ChatResponse, Sampling
from factory.params.config import Params
from factory.utils import paths
from factory.utils.errors import FactoryError

__all__ = ["LLM", "ChatRequest", "ChatResponse", "Sampling", "make_llm", "server_adapter_path"]
log = logging.getLogger(__name__)


def server_adapter_path(adapter_path: str | Path, prefix: str | None) -> str:
    """The adapter path as the server sees it: the local ``models`` prefix replaced by ``prefix``; with no
    prefix, the local path made absolute (a server resolves a relative ``lora_path`` against its own
    working directory, which is not this project's folder)."""
    path = Path(adapter_path)
    if prefix is None:
        return str(path.resolve())
    if not path.is_absolute() and path.parts[:1] == (paths.MODELS.name,):
        rest = Path(*path.parts[1:])
    else:
        try:
            rest = path.resolve().relative_to((Path.cwd() / paths.MODELS).resolve())
        except ValueError:
            raise FactoryError(
                f"adapter {adapter_path} is not under the local '{paths.MODELS}' folder, so "
                "llm.lora_path_prefix "
                f"({prefix!r}) cannot be applied to it"
            ) from None
    return f"{prefix.rstrip('/')}/{rest.as_posix()}"


def make_llm(
    params: Params, adapter_path: str | Path | None = None, adapter_name: str | None = None, cache=None
) -> LLM:
    """The backend named by ``params.llm.backend`` (with an optional LoRA adapter), cached when ``llm.cache``.

    ``local`` loads ``llm.model`` (a folder) plus ``adapter_path`` in-process. ``openai`` talks to
    ``llm.base_urls``; with ``adapter_name`` it serves the adapter as ``<adapter_name>-<weights
    hash>`` (logged; never re-used for other weights): registered on the servers when
    ``llm.load_lora``, else expected among the servers' models (``--lora-modules``). With
    ``llm.cache`` the replies go through ``cache`` (a ``ResponseCache``-like object) when given,
    else through the project's SQLite file.
    """
    cfg = params.llm
    if adapter_path is not None and not Path(adapter_path).is_dir():
        raise FactoryError(f"adapter folder {adapter_path} does not exist (was the round trained?)")
    if cfg.backend == "local":
        from factory.llm.local import LocalLLM

        llm: LLM = LocalLLM(cfg, adapter_path)
    elif cfg.backend == "openai":
        llm = _make_openai(params, adapter_path, adapter_name)
    else:  # pydantic already restricts the value; kept for direct callers
        raise FactoryError(f"llm.backend {cfg.backend!r}: expected 'local' or 'openai'")
    if cfg.cache:
        from factory.llm.cache import CachedLLM
        from factory.llm.responses import ResponseCache

        llm = CachedLLM(
            llm, cache if cache is not None else ResponseCache(paths.CACHE_DIR / "responses.sqlite")
        )
    return llm


def _make_openai(params: Params, adapter_path: str | Path | None, adapter_name: str | None) -> LLM:
    from factory.llm.identity import adapter_hash
    from factory.llm.openai_backend import OpenAILLM

    cfg = params.llm
    llm = OpenAILLM(cfg, tokenizer_path=params.model.dir)  # the prepared model's tokenizer, when there is one
    if adapter_path is not None and adapter_name is None:
        raise FactoryError(
            "the openai backend serves an adapter by name: pass adapter_name (e.g. '<variant>-r<round>')"
        )
    if adapter_name is not None:
        if adapter_path is None:
            raise FactoryError(f"adapter {adapter_name!r}: the adapter folder is needed to hash its weights")
        # served as '<variant>-r<round>-<weights hash>': a retrained round gets a new name, and no
        # name ever stands for other weights (vLLM caches adapters by name)
        digest = adapter_hash(adapter_path)
        served = f"{adapter_name}-{digest[:8]}"
        server_path = server_adapter_path(adapter_path, cfg.lora_path_prefix)
        log.info("policy %s: LoRA adapter served as %s=%s", adapter_name, served, server_path)
        if cfg.load_lora:
            llm.load_adapter(served, adapter_path, server_path)
        else:  # the operator registered it at server start (--lora-modules served=server_path)
            llm.use_model(served, digest, server_path)
    return llm
