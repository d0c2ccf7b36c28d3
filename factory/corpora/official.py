"""The official split of every configured source: train, or dev (an evaluation set).

A file's split is told by the words of its name, as the official releases and the shared samples
write them: ``hotpot_train_v1.1.json`` and ``train_sample.json`` are train;
``hotpot_dev_distractor_v1.json``, ``musique_ans_v1.0_dev.jsonl`` and ``dev_sample.json`` are dev; a
Hugging Face source's by its split (``train``; ``validation``). Any evaluation split (dev, validation,
test) counts as dev: it is never trained on. A name with no such word, or with both, is not guessed:
``splits.official`` (files) or ``ingest.hf[i].official_split`` states it, and ``official_splits``
refuses the run before any work, naming every such source and how to state it.
"""

from __future__ import annotations

import re
from pathlib import Path

from factory.corpora.files import check_file
from factory.params.config import Params
from factory.utils.errors import FactoryError

TRAIN_WORDS = frozenset({"train", "training"})
DEV_WORDS = frozenset({"dev", "development", "validation", "valid", "val", "test"})
_WORD = re.compile(r"[a-z]+")  # "hotpot_dev_distractor_v1.json" -> hotpot, dev, distractor, v, json
HOW = "docs/corpora.md#official-splits"


def split_of_name(name: str) -> str | None:
    """'train' or 'dev' from the words of a file or split name; None when it has neither or both."""
    words = set(_WORD.findall(name.lower()))
    train, dev = bool(words & TRAIN_WORDS), bool(words & DEV_WORDS)
    if train == dev:
        return None
    return "train" if train else "dev"


def hf_label(path: str, split: str) -> str:
    """How a Hugging Face source is named in rows (``source_file``), metrics and messages."""
    return f"hf:{path}[{split}]"


def official_splits(params: Params) -> dict[str, str]:
    """Every configured source (a corpus file as ``corpora.*`` lists it; a Hugging Face source as
    ``hf_label``) -> its official split; a ``FactoryError`` naming every source whose split cannot be
    told, or a ``splits.official`` entry naming no configured file."""
    stated = params.splits.official
    files = {str(f): dataset for dataset, fs in params.corpora.items() for f in fs}
    unknown = [key for key in stated if _configured(key, files) is None]
    if unknown:
        raise FactoryError(
            f"splits.official names {', '.join(map(repr, unknown))}, which corpora.* does not list: write "
            "the path exactly as it is listed under corpora.<dataset> (the configured files are "
            f"{', '.join(sorted(files)) or 'none'})"
        )
    found, untold = {}, []
    for f, dataset in files.items():
        check_file(Path(f))  # a missing file or a folder is named as such first
        key = next((k for k in stated if _configured(k, {f: dataset}) == f), None)
        found[f] = stated[key] if key is not None else split_of_name(Path(f).name)
        if found[f] is None:
            untold.append(f"{f} (corpora.{dataset})")
    for i, src in enumerate(params.ingest.hf):
        label = hf_label(src.path, src.split)
        found[label] = src.official_split or split_of_name(src.split)
        if found[label] is None:
            untold.append(f"{label} (ingest.hf[{i}]: state it with official_split: train or dev)")
    if untold:
        raise FactoryError(
            f"cannot tell the official split of {'; '.join(untold)}: the name says neither train nor dev "
            "(a word train/training, or dev/development/validation/val/valid/test). Training questions "
            "come from official train files only and the test split from official dev, so every file "
            "must be one or the other: state it in params.yaml, e.g. --set "
            f"'splits.official={{{untold[0].split(' (')[0]}: dev}}' ({HOW}). Nothing was read or written."
        )
    return found


def _configured(key: str, files: dict[str, str]) -> str | None:
    """The configured file ``key`` names: the same string, or the same file once resolved."""
    if key in files:
        return key
    resolved = Path(key).resolve()
    return next((f for f in files if Path(f).resolve() == resolved), None)
