"""The settings fingerprint of a run: what made a published set, so that two sets can be compared or
refused comparison.

Search-R1's users found 38 against 55 EM on HotpotQA from another retriever, corpus and top-k
(Search-R1 issue 40): a number means little without the settings that made it. The fingerprint
names the code (version, a sha256 of its source, the git commit when there is one), a hash of every
parameter, the served model, the retriever and its top-n, every corpus file and evaluation file
with its sha256, and every seed. ``id`` is a sha256 over all of it but the commit (a commit names
the same code as the source hash, and a published folder's bytes should not change with a rebase).
``compare`` says whether two fingerprints may be compared, and what differs.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import factory
from factory.params.config import Params
from factory.utils.errors import FactoryError

# What must be equal for two sets' downstream numbers to be comparable: the model that generated them,
# the retrieval it saw, the corpora its questions came from and the evaluation sets they were kept out of.
COMPARABLE_ON = ("served_model", "retriever", "corpora", "eval_sets")
CODE_ROOTS = ("factory", "schemas", "validators")  # the packages the stages run
CODE_SUFFIXES = (".py", ".j2")
FILE = "fingerprint.json"  # beside a published set's card


def settings_fingerprint(params: Params, model: str, ingest: dict, decontamination: dict) -> dict:
    """The fingerprint of this run (``model``: the served model's identity; ``ingest`` and
    ``decontamination``: metrics/ingest.json and metrics/decontamination.json)."""
    body = {
        "code": {"version": factory.__version__, "source_sha256": code_sha256()},
        "params_sha256": _sha256_json(params.model_dump(mode="json")),
        "served_model": model,
        "retriever": {
            "retriever": params.index.retriever,
            "scope": params.index.scope,
            "top_n": params.retrieval.top_n,
        },
        "corpora": [
            {"file": f, "dataset": s["dataset"], "official_split": s["official_split"], "sha256": s["sha256"]}
            for f, s in sorted((ingest.get("sources") or {}).items())
        ],
        "eval_sets": [
            {"file": e["file"], "dataset": e["dataset"], "sha256": e["sha256"]}
            for e in decontamination.get("eval_sets") or []
        ],
        "seeds": {
            "splits": params.splits.seed,
            "trajectories": params.trajectories.seed,
            "evaluate": params.evaluate.seed,
            "variants": params.variants.seed,
            "train": params.train.seed,
            "bootstrap": list(params.bootstrap.seeds),
        },
    }
    return {"id": _sha256_json(body), **body, "commit": git_commit()}


def compare(a: dict, b: dict) -> tuple[bool, list[str]]:
    """(may the two sets' numbers be set side by side, every setting that differs): comparable when
    the settings of ``COMPARABLE_ON`` are equal; the code, params and seeds may differ (that is what
    an experiment varies), and are listed."""
    differs = [key for key in (*COMPARABLE_ON, "code", "params_sha256", "seeds") if a.get(key) != b.get(key)]
    return not any(key in COMPARABLE_ON for key in differs), differs


def read_fingerprint(folder: str | Path) -> dict:
    """The fingerprint a published folder holds (``fingerprint.json``), or a ``FactoryError`` saying why
    not."""
    path = Path(folder) / FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FactoryError(
            f"{path} does not exist: {folder} is not a published set folder (data/published/<variant>), "
            "or it was published before sets carried their fingerprint; publish it again with `factory "
            "publish`"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FactoryError(f"{path} is not valid JSON ({exc}): publish the set again") from None


def code_sha256() -> str:
    """A sha256 over the stages' source (path and bytes of every .py and template file), the same on
    every machine for the same code."""
    root = Path(factory.__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in CODE_ROOTS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def git_commit() -> str | None:
    """The commit of the checkout the code runs from (``+modified`` when its source differs from it);
    None outside a git checkout."""
    root = Path(factory.__file__).resolve().parent.parent
    try:
        head = _git(root, "rev-parse", "HEAD")
        changed = _git(root, "status", "--porcelain", "--", *CODE_ROOTS)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+modified" if changed else "")


def _git(root: Path, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30)
    return run.stdout.strip()


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
