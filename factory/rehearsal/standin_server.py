"""A STAND-IN for vLLM's OpenAI-compatible server, for rehearsing the served path on a CPU. Not vLLM.

It serves a local transformers model folder (the embedded model, ``models/base``) through the local
backend (``factory.llm.local.LocalLLM``, PEFT for adapters) and answers the three endpoints the
factory's ``openai`` backend uses the way vLLM documents them (started with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``):

- ``GET /v1/models``: the base model (``root``: its folder, ``max_model_len``) and every adapter loaded,
  each with ``root`` (its path) and ``parent``;
- ``POST /v1/load_lora_adapter`` ``{lora_name, lora_path}``: ``lora_path`` is resolved on the server's
  side, against the server's own working directory (so a relative path fails as it would on vLLM),
  answered with vLLM's bodies: 404 ``No adapter found for <path>``, 400 for a name already loaded;
- ``POST /v1/chat/completions``: 404 for a model name it does not serve; otherwise the reply generated
  by the model with the named adapter applied. Concurrent requests are gathered into batches.

llama.cpp's server cannot load a LoRA by path at run time, which is why this exists; vLLM's batching,
paged attention, sampling kernels and structured outputs are not reproduced (a request with a grammar
field is refused with 400). Every adapter load (name, absolute path) and every request's model name is
logged to ``--log``, so a rehearsal can show what the server saw::

    python -m factory.rehearsal.standin_server --model models/base --port 8011 --log server.log
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections import OrderedDict
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.params.agent_sections import LLMParams

log = logging.getLogger("standin")
GRAMMAR_FIELDS = ("response_format", "structured_outputs", "grammar", "guided_json", "guided_regex")


class Models:
    """The base model and the adapters registered by name; one LocalLLM per model name, at most
    ``resident`` of them loaded at once (the least recently used one is dropped)."""

    def __init__(self, model_dir: Path, served_name: str, batch_size: int, resident: int = 2):
        self.model_dir, self.served_name = model_dir, served_name
        self.cfg = LLMParams(model=str(model_dir), batch_size=batch_size, cache=False)
        self.adapters: dict[str, Path] = {}  # name -> absolute adapter folder
        self.loaded: OrderedDict[str, object] = OrderedDict()
        self.resident = resident

    def serves(self, name: str) -> bool:
        return name == self.served_name or name in self.adapters

    def engine(self, name: str):
        from factory.llm.local import LocalLLM

        if name in self.loaded:
            self.loaded.move_to_end(name)
            return self.loaded[name]
        while len(self.loaded) >= self.resident:
            _, dropped = self.loaded.popitem(last=False)
            dropped.close()
        engine = LocalLLM(self.cfg, self.adapters.get(name))
        self.loaded[name] = engine
        return engine

    def max_model_len(self) -> int | None:
        import json

        config = json.loads((self.model_dir / "config.json").read_text())
        return config.get("max_position_embeddings")


def vllm_error(message: str, kind: str, code: int) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, code)


class Batcher:
    """Gathers the chat requests that arrive together and generates them as batches, one model at a
    time, in a worker thread (the event loop keeps accepting requests meanwhile)."""

    def __init__(self, models: Models, gather_s: float = 0.05):
        self.models, self.gather_s = models, gather_s
        self.queue: asyncio.Queue | None = None

    async def submit(self, model: str, request: ChatRequest) -> ChatResponse:
        if self.queue is None:
            self.queue = asyncio.Queue()
            asyncio.get_running_loop().create_task(self._work())
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((model, request, future))
        return await future

    async def _work(self) -> None:
        while True:
            pending = [await self.queue.get()]
            await asyncio.sleep(self.gather_s)
            while not self.queue.empty():
                pending.append(self.queue.get_nowait())
            by_model: dict[str, list] = {}
            for item in pending:
                by_model.setdefault(item[0], []).append(item)
            for model, items in by_model.items():
                try:
                    out = await asyncio.to_thread(self._generate, model, [i[1] for i in items])
                except Exception as exc:  # noqa: BLE001 — answered as a 500 to each request, the server lives on
                    out = [ChatResponse(text="", finish_reason="error", error=f"{type(exc).__name__}: {exc}")]
                    out *= len(items)
                for (_, _, future), resp in zip(items, out):
                    if not future.done():
                        future.set_result(resp)

    def _generate(self, model: str, requests: list[ChatRequest]) -> list[ChatResponse]:
        t0 = time.perf_counter()
        out = self.models.engine(model).generate(requests)
        log.info(
            "generated %d request(s) for model %s in %.1f s", len(requests), model, time.perf_counter() - t0
        )
        return out


def make_app(models: Models):
    app = FastAPI(title="TraceFactory stand-in for vLLM's OpenAI-compatible server")
    batcher = Batcher(models)

    @app.get("/v1/models")
    async def list_models() -> dict:
        base = {
            "id": models.served_name,
            "object": "model",
            "owned_by": "standin",
            "root": str(models.model_dir),
            "max_model_len": models.max_model_len(),
        }
        adapters = [
            {"id": n, "object": "model", "owned_by": "standin", "root": str(p), "parent": models.served_name}
            for n, p in models.adapters.items()
        ]
        return {"object": "list", "data": [base, *adapters]}

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(request: Request):
        body = await request.json()
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return vllm_error("Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput", 400)
        if name in models.adapters:
            return vllm_error(f"The lora adapter '{name}' has already been loaded.", "InvalidUserInput", 400)
        folder = Path.cwd() / path  # as vLLM: a relative path means one under the server's own cwd
        if not (folder / "adapter_config.json").is_file():
            log.warning("adapter load refused: name %s, path %s (no adapter at %s)", name, path, folder)
            return vllm_error(
                f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError", 404
            )
        models.adapters[name] = folder.resolve()
        log.info("adapter loaded: name %s, path %s", name, folder.resolve())
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        model = body.get("model", "")
        log.info("chat request: model %s", model)
        if not models.serves(model):
            return vllm_error(f"The model `{model}` does not exist.", "NotFoundError", 404)
        grammar = [k for k in GRAMMAR_FIELDS if body.get(k) is not None]
        if grammar:
            return vllm_error(
                f"the stand-in server does not decode under grammars ({grammar[0]})", "BadRequestError", 400
            )
        sampling = Sampling(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_new_tokens=int(body.get("max_tokens") or 160),
            stop=tuple(body.get("stop") or ()),
        )
        # the request's seed goes in as its sample index, not into Sampling: the local backend batches
        # requests of equal Sampling together, and seeds a sampled batch from its requests' content
        seed = int(body.get("seed") or 0)
        resp = await batcher.submit(model, ChatRequest.of(body.get("messages", []), sampling, sample=seed))
        if resp.error and resp.error.startswith("empty completion"):
            resp = ChatResponse(
                text="", prompt_tokens=resp.prompt_tokens, finish_reason="stop"
            )  # vLLM: 200, ""
        if not resp.ok:
            return vllm_error(resp.error or "generation failed", "InternalServerError", 500)
        return JSONResponse(
            {
                "id": "chatcmpl-standin",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": resp.text},
                        "finish_reason": resp.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": resp.prompt_tokens,
                    "completion_tokens": resp.completion_tokens,
                    "total_tokens": resp.prompt_tokens + resp.completion_tokens,
                },
            }
        )

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A stand-in for vLLM's OpenAI-compatible server (not vLLM).")
    parser.add_argument("--model", required=True, help="a transformers model folder (e.g. models/base)")
    parser.add_argument("--served-model-name", help="the name requests use (default: --model as given)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=16, help="requests generated together")
    parser.add_argument("--log", help="also log adapter loads and requests to this file")
    args = parser.parse_args(argv)
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if args.log:
        handlers.append(logging.FileHandler(args.log))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s stand-in %(message)s", handlers=handlers)
    model_dir = Path(args.model).resolve()
    models = Models(model_dir, args.served_model_name or args.model, args.batch_size)
    log.info(
        "stand-in server (not vLLM): model %s as %s, cwd %s, pid %d",
        model_dir,
        models.served_name,
        Path.cwd(),
        os.getpid(),
    )
    import uvicorn

    uvicorn.run(make_app(models), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
