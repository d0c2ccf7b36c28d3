"""What a run on an OpenAI-compatible server needs before it starts: the servers, the served name and
the weights."""

from __future__ import annotations

from pathlib import Path

from factory.params.config import Params
from factory.utils.errors import FactoryError


def served_model_gaps(params: Params, weights: bool = True) -> list[tuple[str, str, str]]:
    """What a run on the openai backend lacks to start, as (key, 'not set' or 'folder missing', what it
    is): the servers, the served model's name, the served weights on local disk (training trains LoRA
    adapters on them; ``weights=False``: a stage that loads no weights, which a hosted API runs without
    them). Empty for the local backend."""
    llm, model = params.llm, params.model
    if llm.backend != "openai":
        return []
    gaps = []
    if not llm.base_urls:
        gaps.append(
            ("llm.base_urls", "not set", "the servers' OpenAI-compatible URLs, e.g. [http://gpu1:8000/v1]")
        )
    if llm.model == model.dir:
        gaps.append(
            (
                "llm.model",
                "not set",
                f"the name the servers serve the model under; it is {llm.model!r}, the local folder "
                "prepare-model writes",
            )
        )
    if not weights:
        return gaps
    folder = "a local folder holding the served model's weights, which training trains LoRA adapters on"
    if model.base.startswith("embedded:"):
        gaps.append(("model.base", "not set", f"{folder}; it is {model.base!r}"))
    elif not Path(model.base).is_dir():
        gaps.append(("model.base", "folder missing", folder))
    return gaps


def served_model_missing(params: Params, weights: bool = True) -> list[str]:
    """``served_model_gaps`` as 'key (what it is)' lines."""
    gaps = served_model_gaps(params, weights)
    return [f"{key} ({_gap(params, key, kind, what)})" for key, kind, what in gaps]


def _gap(params: Params, key: str, kind: str, what: str) -> str:
    """'not set: <what>' or 'folder missing: <the folder>, <what>'."""
    return f"folder missing: {params.model.base}, {what}" if kind == "folder missing" else f"{kind}: {what}"


# What to --set for each key a served run lacks, as the message's example
SERVED_EXAMPLE = {
    "llm.base_urls": "'llm.base_urls=[http://gpu1:8000/v1]'",
    "llm.model": "llm.model=llama",
    "model.base": "model.base=/models/Llama-3.1-8B-Instruct",
}


VLLM_SERVE = (
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve /models/Llama-3.1-8B-Instruct "
    "--served-model-name llama --enable-lora --max-lora-rank 64"
)


def require_served_model(
    params: Params, profile: str | None = None, params_file: str = "params.yaml", weights: bool = True
) -> None:
    """Stop before any work when the openai backend lacks what it needs (``served_model_gaps``); ``profile``:
    the profile ``params_file`` was written from, named in the message. The advice re-writes the file with
    `factory params --params`, which keeps what it sets (its corpora): `--profile` would start over.
    ``weights``: the stage loads the served weights (``NEEDS_WEIGHTS``), so model.base is checked too."""
    gaps = served_model_gaps(params, weights)
    if not gaps:
        return
    unset = [key for key, kind, _ in gaps if kind == "not set"]
    parts = (
        ["not set: " + ", ".join(f"{key} ({what})" for key, k, what in gaps if k == "not set")]
        if unset
        else []
    )
    parts += [
        f"folder missing: {params.model.base} ({key}: {what})" for key, k, what in gaps if k != "not set"
    ]
    steps = []
    if {"llm.base_urls", "llm.model"} & set(unset):
        steps.append(f"serve the model with vLLM (`{VLLM_SERVE}`)")
    if unset:
        sets = " ".join(f"--set {SERVED_EXAMPLE[key]}" for key in unset)
        steps.append(
            f"add {', '.join(unset)} to {params_file}, keeping the rest of it (its corpora among them): "
            f"`factory params --params {params_file} {sets} --output {params_file}` (or give the same --set "
            "to every stage)"
        )
    if len(unset) < len(gaps):
        steps.append(
            "put the served weights in the missing folder, or --set model.base to the folder holding them"
        )
    whose = f"the {profile} profile" if profile else "these params"
    raise FactoryError(
        f"llm.backend is openai ({whose}), but {'; '.join(parts)}. To run: {'; '.join(steps)} "
        "(docs/full-scale.md). Nothing was read or written."
    )
