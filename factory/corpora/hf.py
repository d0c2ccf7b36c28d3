"""Rows read with Hugging Face ``datasets`` (a save_to_disk folder, a local data file or a hub id).

Hub copies of these corpora use column-oriented nested fields (HotpotQA on the hub:
``context = {title: [...], sentences: [[...]]}``, ``supporting_facts = {title: [...], sent_id: [...]}``,
``id`` instead of ``_id``). ``to_official`` turns such a row back into the official layout so one
builder per dataset serves both sources. The hub ids docs/corpora.md names, and the layouts read:

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
from typing import Any

from factory.utils.errors import FactoryError

# 2WikiMultihopQA's evidence triplets stored as parallel columns: (subject, relation, object) by name or,
# in ohjoonhee/2WikiMultihopQA, as (fact, relation, entity). A dict with neither set of columns stays as
# it is, and the builder quarantines the record naming the field.
EVIDENCE_COLUMNS = (("subject", "relation", "object"), ("fact", "relation", "entity"))


def _zip_columns(value: Any, first: str, seconds: tuple[str, ...]) -> Any:
    if isinstance(value, dict) and first in value:
        for second in seconds:
            if second in value:
                return [list(p) for p in zip(value[first], value[second], strict=False)]
    return value


def to_official(row: dict, dataset: str) -> dict:
    row = dict(row)
    if dataset in ("hotpotqa", "2wikimultihopqa"):
        if "_id" not in row and "id" in row:
            row["_id"] = row.pop("id")
        row["context"] = _zip_columns(row.get("context"), "title", ("sentences", "content"))
        row["supporting_facts"] = _zip_columns(row.get("supporting_facts"), "title", ("sent_id", "sent_idx"))
        ev = row.get("evidences")
        columns = next((c for c in EVIDENCE_COLUMNS if isinstance(ev, dict) and set(c) <= set(ev)), None)
        if columns is not None:
            row["evidences"] = [list(t) for t in zip(*(ev[k] for k in columns), strict=False)]
        elif isinstance(ev, list):
            row["evidences"] = [
                [e["subject"], e["relation"], e["object"]] if isinstance(e, dict) else e for e in ev
            ]
    return row


def read_hf(path: str, name: str | None, split: str, dataset: str) -> Iterator[tuple[str, dict]]:
    """Yield (location, official-layout record) from a datasets source."""
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
        yield f"{label}[{i}]", to_official(row, dataset)
