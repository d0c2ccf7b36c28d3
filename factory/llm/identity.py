"""Content hashes that name model weights and LoRA adapters.

A backend's ``identity`` is part of every cache key, so it must change whenever the weights
change: it carries a short hash of the weight files, never just a folder name. Hashing a base
model's weights (hundreds of MB) on every run would be slow, so the result is memoised in a small
sidecar file *next to* the model folder (``<parent>/.<name>.weights-sha256.json``, keyed by each
file's size and mtime) — not inside it, so a DVC-tracked model folder is never modified.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from factory.utils.errors import FactoryError

log = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter_model.safetensors"
SHORT = 12  # hex characters of a hash shown in an identity


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    """sha256 hex digest of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def weight_files(model_dir: str | Path) -> list[Path]:
    """The files holding a model's weights: ``*.safetensors`` (else ``*.bin``), sorted by name."""
    model_dir = Path(model_dir)
    files = sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
    if not files:
        raise FactoryError(
            f"{model_dir}: no weight files (*.safetensors or *.bin) found — is this a model folder?"
        )
    return files


def memo_path(model_dir: str | Path) -> Path:
    """Sidecar file memoising the weights hash of ``model_dir`` (a sibling, not inside the folder)."""
    model_dir = Path(model_dir).resolve()
    return model_dir.parent / f".{model_dir.name}.weights-sha256.json"


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def weights_hash(model_dir: str | Path) -> str:
    """sha256 over (file name, file sha256) of every weight file; memoised by size + mtime."""
    files = weight_files(model_dir)
    memo_file = memo_path(model_dir)
    memo: dict = {}
    if memo_file.exists():
        try:
            memo = json.loads(memo_file.read_text())
        except (OSError, ValueError):
            memo = {}
    stamps = {f.name: _stamp(f) for f in files}
    if memo.get("files") == stamps and isinstance(memo.get("sha256"), str):
        return memo["sha256"]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.name}\0{file_sha256(f)}\n".encode())
    result = digest.hexdigest()
    try:
        tmp = memo_file.with_name(f"{memo_file.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps({"files": stamps, "sha256": result}, sort_keys=True))
        os.replace(tmp, memo_file)
    except OSError as exc:  # read-only location: hashing again next time is only slower
        log.debug("could not write weights-hash memo %s: %s", memo_file, exc)
    return result


def adapter_hash(adapter_dir: str | Path) -> str:
    """sha256 of a PEFT adapter folder's ``adapter_model.safetensors`` bytes."""
    weights = Path(adapter_dir) / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise FactoryError(f"{adapter_dir}: not a LoRA adapter folder ({ADAPTER_WEIGHTS} missing)")
    return file_sha256(weights)
