"""Rows read with Hugging Face ``datasets`` (a save_to_disk folder, a local data file or a hub id).

Hub copies of these corpora use column-oriented nested fields (HotpotQA on the hub:
``context = {title: [...], sentences: [[...]]}``, ``supporting_facts = {title: [...], sent_id: [...]}``,
``id`` instead of ``_id``). Each corpus's ``hub_row`` (``factory.corpora.corpus.Corpus``) turns such a
row back into the official layout so one builder per dataset serves both sources; ``zip_columns`` is
the helper they share. The hub ids docs/corpora.md names, and the layouts read:

- ``hotpotqa/hotpot_qa`` (config ``distractor``): ``id``, ``context {title, sentences}``,
  ``supporting_facts {title, sent_id}``;
- ``ohjoonhee/2WikiMultihopQA``: ``_id``, ``context {title, content}``, ``supporting_facts {title,
  sent_id}``, ``evidences {fact, relation, entity}`` (the official [subject, relation, object]
  triplets as three parallel columns, in that order);
- ``dgslibisey/MuSiQue``: the official JSONL files (``musique_ans_v1.0_{train,dev}.jsonl``, splits
  ``train`` and ``validation``), read as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factory.utils.errors import FactoryError

if TYPE_CHECKING:
    from factory.corpora.corpus import Corpus


def zip_columns(value: Any, first: str, seconds: tuple[str, ...]) -> Any:
    """``{first: [...], second: [...]}`` (parallel columns, the first of ``seconds`` present) -> ``[[a, b],
    ...]``; any other value as it is (the builder then quarantines the record naming the field)."""
    if isinstance(value, dict) and first in value:
        for second in seconds:
            if second in value:
                return [list(p) for p in zip(value[first], value[second], strict=False)]
    return value


def read_hf(path: str, name: str | None, split: str, corpus: Corpus) -> Iterator[tuple[str, dict]]:
    """Yield (location, official-layout record) from a datasets source of ``corpus``."""
    import datasets

    local = Path(path)
    try:
        saved = local.is_dir() and any(
            (local / f).exists() for f in ("dataset_info.json", "dataset_dict.json", "state.json")
        )
        if saved:
            ds = datasets.load_from_disk(str(local))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise FactoryError(f"{path}: no split {split!r} (has {sorted(ds)})")
                ds = ds[split]
        elif local.is_file():
            builder = "json" if local.suffix in (".json", ".jsonl") else local.suffix.lstrip(".")
            ds = datasets.load_dataset(builder, data_files=str(local), split="train")
        else:
            ds = datasets.load_dataset(path, name, split=split)
    except FactoryError:
        raise
    except Exception as exc:  # datasets raises many types; the user needs the source and the reason
        raise FactoryError(
            f"cannot read Hugging Face dataset {path!r} (name={name}, split={split}): {exc}"
        ) from None
    label = local.name or path
    for i, row in enumerate(ds):
        yield f"{label}[{i}]", corpus.hub_row(row)
