"""Corpora at any size for bench/scale.py: the shared samples copied, every copy made distinct.

Copy ``k`` of a record gets ``-c<k>`` on its id, `` (v<k>)`` on its question and on every passage
title it names (context, supporting facts, MuSiQue paragraphs), so that nothing de-duplicates
away: ids, normalised question texts and pids are all new, and a question's copy tag is a word of
its own passages' titles (BM25 finds the right copy). Files are written in the official formats
(HotpotQA and 2Wiki: one JSON list per file; MuSiQue: JSONL), at most ``FILE_RECORDS`` records each,
about the size of the official release files, so that reading one is the same work as reading those.

``FULL`` is the size of the three full corpora (questions per dataset, train + dev); a size is a
fraction of it.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import msgspec

from bench.common import corpora_files
from factory.corpora import corpus
from factory.corpora.official import split_of_name

SOURCES = corpora_files()  # every corpus of factory.corpora.CORPORA: its default sample files
FULL = {"hotpotqa": 97_852, "2wikimultihopqa": 180_030, "musique": 22_355}  # train + dev of each release
FILE_RECORDS = 90_000  # HotpotQA's train file holds 90,447 records (566 MB)
_ENCODER = msgspec.json.Encoder()


@cache
def _read(dataset: str, split: str | None = None) -> list[dict]:
    """The dataset's sample records; with ``split``, those of its files of that official split."""
    records = []
    for name in SOURCES[dataset]:
        path = Path(name)
        if split is not None and split_of_name(path.name) != split:
            continue
        if path.suffix == ".jsonl":
            records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            records += json.loads(path.read_text())
    return records


def _tag(text: str, k: int) -> str:
    return f"{text} (v{k})"


def _copy(dataset: str, r: dict, k: int) -> dict:
    id_field = corpus(dataset).id_field
    copy = {**r, id_field: f"{r[id_field]}-c{k}", "question": _tag(r["question"], k)}
    if "paragraphs" in r:  # MuSiQue's layout: titled paragraphs
        copy["paragraphs"] = [{**p, "title": _tag(p["title"], k)} for p in r["paragraphs"]]
    else:  # HotpotQA's layout (2Wiki's too): context and supporting facts by title
        copy["context"] = [[_tag(title, k), sentences] for title, sentences in r["context"]]
        copy["supporting_facts"] = [[_tag(title, k), idx] for title, idx in r["supporting_facts"]]
    return copy


def _jsonl(dataset: str) -> bool:
    """The copies keep the format of the dataset's sample files: JSONL, or one JSON list per file."""
    return SOURCES[dataset][0].endswith(".jsonl")


def copies_for(fraction: float) -> dict[str, int]:
    """Copies of each dataset's sample that make ``fraction`` of the full corpora (at least one)."""
    return {ds: max(1, round(fraction * FULL[ds] / len(_read(ds)))) for ds in SOURCES}


def build(folder: str | Path, fraction: float) -> dict:
    """Write the corpora at ``fraction`` of full size under ``folder``; returns
    ``{dataset: {"files": [...], "questions": n}}`` (``corpora.*`` takes the file lists)."""
    folder = Path(folder)
    out = {}
    for dataset, copies in copies_for(fraction).items():
        files, total = [], 0
        # each official split in files of its own, named for it: ingest tells a file's split by its name
        for split in ("train", "dev"):
            base = _read(dataset, split)
            if base:
                files += _write_copies(dataset, split, base, copies, folder / dataset)
                total += copies * len(base)
        out[dataset] = {"files": files, "questions": total, "copies": copies}
    return out


def _write_copies(dataset: str, split: str, base: list[dict], copies: int, target: Path) -> list[str]:
    """``copies`` distinct copies of ``base`` in files of at most ~FILE_RECORDS records each."""
    target.mkdir(parents=True, exist_ok=True)
    n_files = math.ceil(copies * len(base) / FILE_RECORDS)
    per_file = math.ceil(copies / n_files)
    files = []
    # JSON Lines: a record per line; JSON: one array, records separated by commas
    lines = _jsonl(dataset)
    opening, separator, closing = (b"", b"\n", b"\n") if lines else (b"[", b",", b"]")
    for f in range(n_files):
        ks = range(f * per_file, min(copies, (f + 1) * per_file))
        path = target / f"{split}_part_{f:02d}.{'jsonl' if lines else 'json'}"
        records = (_ENCODER.encode(_copy(dataset, r, k)) for k in ks for r in base)
        with path.open("wb") as fh:  # streamed: a file holds up to FILE_RECORDS records
            fh.write(opening)
            for i, record in enumerate(records):
                fh.write(separator + record if i else record)
            fh.write(closing)
        files.append(str(path))
    return files
