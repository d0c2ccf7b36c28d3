"""Passages by pid without holding the corpus: memory-mapped Arrow files written by the index stage.

``data/index/passages/`` holds one Arrow IPC file per dataset (``<dataset>.arrow``: pid, dataset,
title, text, sentences; uncompressed, so that the operating system maps it and only the pages a
lookup touches are read, shared by every process that opens it), the pids of all datasets sorted
(``keys.npy``, fixed-width bytes) with each one's dataset and position (``where.npy``), and per
dataset each position's place in that order (``<dataset>.rank.npy``: ties break by pid in numpy).
The mappings give their pages back every few thousand lookups (``factory.retrieval.mapped``). A passage's
position in its dataset's file is also its document id in that dataset's BM25 index.

A lookup is a binary search in the mapped keys and a ``take`` of one row: its cost follows the
lookups, not the corpus. ``PassageStore`` is a read-only ``Mapping`` pid -> passage dict, so it
stands wherever a ``{pid: passage}`` dict did. ``PassageStore.from_rows`` builds the same thing
in memory from a few rows (tests, notebooks).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factory.retrieval.mapped import Mappings
from factory.utils.errors import FactoryError
from factory.utils.io import atomic_path
from factory.utils.text import join_sentences
from schemas import PASSAGE, open_parquet
from schemas.read import decoded

FOLDER = "passages"
BATCH_ROWS = 4096


class PassageStore(Mapping):
    """pid -> passage dict ({pid, dataset, title, text, sentences}), over per-dataset Arrow tables."""

    def __init__(
        self,
        tables: dict[str, pa.Table],
        keys: np.ndarray,
        where: np.ndarray,
        ranks: dict[str, np.ndarray] | None = None,
        mappings: Mappings | None = None,
    ):
        self.tables = tables  # dataset -> table (memory-mapped, or in memory)
        self.datasets = sorted(tables)
        self._keys, self._where = keys, where  # sorted pid bytes; dataset index << 32 | position
        # per dataset and position: the pid's place in the sorted keys (ties break by pid without it)
        self.ranks = (
            ranks if ranks is not None else _ranks(where, {ds: t.num_rows for ds, t in tables.items()})
        )
        self._mappings = mappings or Mappings()
        self._recent = functools.lru_cache(maxsize=1 << 14)(self._read_passage)
        self._pid_columns = {ds: t.column("pid") for ds, t in tables.items()}
        # a table's record batches and where each starts: a lookup reads its own batch only (Arrow's
        # take over a whole chunked table would first concatenate it, reading every page of the file)
        self._batches = {ds: t.to_batches() for ds, t in tables.items()}
        self._starts = {
            ds: np.cumsum([0] + [b.num_rows for b in batches])[:-1] for ds, batches in self._batches.items()
        }

    # ------------------------------------------------------------------ building
    @staticmethod
    def write(passages_parquet: str | Path, index_dir: str | Path, on_batch=None) -> dict[str, int]:
        """Write ``<index_dir>/passages/`` from the passages table, streaming it a row group at a
        time; ``on_batch(dataset, table)`` sees each dataset's rows in file order (the index stage
        tokenizes them for BM25). Returns the passages per dataset."""
        folder = Path(index_dir) / FOLDER
        source = open_parquet(passages_parquet)  # checked against the passage contract
        writers: dict[str, pa.ipc.RecordBatchFileWriter] = {}
        counts: dict[str, int] = {}
        pieces: list[tuple[str, int, np.ndarray]] = []  # (dataset, first position, pids as bytes)
        with atomic_path(folder) as tmp:
            tmp.mkdir(parents=True)
            try:
                batches = source.iter_batches(batch_size=BATCH_ROWS, use_threads=False)
                for batch in decoded(batches, passages_parquet):  # a damaged file: named, restore said
                    table = pa.Table.from_batches([batch]).cast(PASSAGE)
                    for dataset in sorted(set(table.column("dataset").to_pylist())):
                        rows = table.filter(pc.equal(table.column("dataset"), dataset))
                        if dataset not in writers:
                            writers[dataset] = pa.ipc.new_file(tmp / f"{dataset}.arrow", PASSAGE)
                            counts[dataset] = 0
                        writers[dataset].write_table(rows, max_chunksize=BATCH_ROWS)
                        encoded = np.array([p.encode() for p in rows.column("pid").to_pylist()], dtype=bytes)
                        pieces.append((dataset, counts[dataset], encoded))
                        counts[dataset] += rows.num_rows
                        if on_batch is not None:
                            on_batch(dataset, rows)
            finally:
                for writer in writers.values():
                    writer.close()
            _write_keys(tmp, pieces, counts, passages_parquet)
        return dict(sorted(counts.items()))

    def save(self, index_dir: str | Path) -> None:
        """Write this store (e.g. one made ``from_rows``) in the format ``open`` reads."""
        with atomic_path(Path(index_dir) / FOLDER) as tmp:
            tmp.mkdir(parents=True)
            pieces = []
            for dataset in self.datasets:
                with pa.ipc.new_file(tmp / f"{dataset}.arrow", PASSAGE) as writer:
                    writer.write_table(self.tables[dataset], max_chunksize=BATCH_ROWS)
                pids = self.tables[dataset].column("pid").to_pylist()
                pieces.append((dataset, 0, np.array([p.encode() for p in pids], dtype=bytes)))
            _write_keys(tmp, pieces, {ds: self.size(ds) for ds in self.datasets}, "the store")

    @staticmethod
    def open(index_dir: str | Path) -> PassageStore:
        """The store of an index folder, memory-mapped."""
        folder = Path(index_dir) / FOLDER
        if not (folder / "datasets.json").exists():
            raise FactoryError(
                f"no passage store under {folder}: run `factory index` (or `dvc repro index`) first"
            )
        names = json.loads((folder / "datasets.json").read_text())
        mappings = Mappings()
        tables = {ds: mappings.arrow(folder / f"{ds}.arrow") for ds in sorted(names)}
        ranks = {ds: mappings.npy(folder / f"{ds}.rank.npy") for ds in sorted(names)}
        return PassageStore(
            tables, mappings.npy(folder / "keys.npy"), mappings.npy(folder / "where.npy"), ranks, mappings
        )

    @staticmethod
    def from_rows(passages: Iterable[Mapping]) -> PassageStore:
        """An in-memory store of passage rows (the first row of a pid wins), for tests and notebooks."""
        by_dataset: dict[str, list[dict]] = {}
        seen: set[str] = set()
        for p in passages:
            if p["pid"] not in seen:
                seen.add(p["pid"])
                sentences = list(p.get("sentences") or [])
                by_dataset.setdefault(p["dataset"], []).append(
                    {
                        "pid": p["pid"],
                        "dataset": p["dataset"],
                        "title": p["title"],
                        "text": p.get("text") or join_sentences(sentences),
                        "sentences": sentences,
                    }
                )
        names = sorted(by_dataset)
        tables = {ds: pa.Table.from_pylist(by_dataset[ds], schema=PASSAGE) for ds in names}
        located = sorted(
            (row["pid"].encode(), (i << 32) | pos)
            for i, ds in enumerate(names)
            for pos, row in enumerate(by_dataset[ds])
        )
        keys = np.array([k for k, _ in located], dtype=bytes) if located else np.array([], dtype="S1")
        return PassageStore(tables, keys, np.array([w for _, w in located], dtype=np.int64))

    # ------------------------------------------------------------------ lookups
    def size(self, dataset: str) -> int:
        table = self.tables.get(dataset)
        return 0 if table is None else table.num_rows

    def locate(self, pids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(dataset index into ``datasets``, position) of each pid; -1 for a pid not in the store."""
        if not len(pids) or not len(self._keys):
            return np.full(len(pids), -1), np.full(len(pids), -1)
        self._mappings.touched(len(pids))
        wanted = np.array([p.encode() for p in pids], dtype=bytes)
        at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
        found = self._keys[at] == wanted
        where = np.asarray(self._where[at])
        return np.where(found, where >> 32, -1), np.where(found, where & 0xFFFFFFFF, -1)

    def positions(self, dataset: str, pids: Sequence[str]) -> np.ndarray:
        """Positions in ``dataset`` of those of ``pids`` it holds, in the order given."""
        if dataset not in self.tables:
            return np.array([], dtype=np.int64)
        ds, pos = self.locate(pids)
        return pos[ds == self.datasets.index(dataset)].astype(np.int64)

    def first_pids(self, dataset: str, n: int) -> list[str]:
        """The ``n`` smallest pids of ``dataset`` (a walk of the sorted keys from the start)."""
        if dataset not in self.tables:
            return []
        code, found, block = self.datasets.index(dataset), [], 1 << 14
        for start in range(0, len(self._keys), block):
            mine = np.flatnonzero((np.asarray(self._where[start : start + block]) >> 32) == code)
            found += [self._keys[start + i].decode() for i in mine[: n - len(found)].tolist()]
            if len(found) >= n:
                break
        return found

    def pid(self, dataset: str, position: int) -> str:
        return self._pid_columns[dataset][int(position)].as_py()

    def passage(self, dataset: str, position: int) -> dict:
        return dict(self._recent(dataset, int(position)))

    def _read_passage(self, dataset: str, position: int) -> dict:
        """A row as a dict (~15 µs in Arrow, a fifth less than column by column; the passages a run
        keeps retrieving come from ``_recent``)."""
        batch, row = self._batch_of(dataset, position)
        return batch.slice(row, 1).to_pylist()[0]

    def _batch_of(self, dataset: str, position: int) -> tuple[pa.RecordBatch, int]:
        starts = self._starts[dataset]
        i = int(np.searchsorted(starts, position, side="right")) - 1
        return self._batches[dataset][i], position - int(starts[i])

    def get_many(self, pids: Iterable[str]) -> dict[str, dict]:
        """The passages of those ``pids`` the store holds, by pid (in the order asked)."""
        pids = list(dict.fromkeys(pids))
        ds, pos = self.locate(pids)
        out: dict[str, dict] = {}
        for d in np.unique(ds[ds >= 0]).tolist():
            dataset = self.datasets[d]
            mine = np.flatnonzero(ds == d)
            starts = self._starts[dataset]
            batch_of = np.searchsorted(starts, pos[mine], side="right") - 1
            for b in np.unique(batch_of).tolist():
                here = mine[batch_of == b]
                rows = self._batches[dataset][b].take(pa.array(pos[here] - starts[b])).to_pylist()
                out.update({pids[i]: row for i, row in zip(here.tolist(), rows)})
        return {p: out[p] for p in pids if p in out}

    def _locate_one(self, pid: str) -> tuple[int, int] | None:
        self._mappings.touched()
        key = pid.encode()
        at = int(np.searchsorted(self._keys, key))
        if at >= len(self._keys) or self._keys[at] != key:
            return None
        where = int(self._where[at])
        return where >> 32, where & 0xFFFFFFFF

    def __getitem__(self, pid: str) -> dict:
        found = self._locate_one(pid) if isinstance(pid, str) else None
        if found is None:
            raise KeyError(pid)
        return self.passage(self.datasets[found[0]], found[1])

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, str) and self._locate_one(pid) is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        for ds in self.datasets:
            for chunk in self._pid_columns[ds].chunks:
                yield from chunk.to_pylist()


def _write_keys(
    folder: Path, pieces: list[tuple[str, int, np.ndarray]], counts: dict[str, int], source: object
) -> None:
    """keys.npy (every pid, sorted), where.npy (its dataset's rank << 32 | position), datasets.json."""
    index_of = {ds: i for i, ds in enumerate(sorted(counts))}
    keys = np.concatenate([k for _, _, k in pieces]) if pieces else np.array([], dtype="S1")
    where = (
        np.concatenate(
            [
                (np.int64(index_of[ds]) << 32) | np.arange(start, start + len(k), dtype=np.int64)
                for ds, start, k in pieces
            ]
        )
        if pieces
        else np.array([], dtype=np.int64)
    )
    order = np.argsort(keys, kind="stable")
    keys, where = keys[order], where[order]
    repeated = keys[1:][keys[1:] == keys[:-1]]
    if len(repeated):
        raise FactoryError(f"{source}: pid {repeated[0].decode()!r} appears twice (re-run `factory ingest`)")
    np.save(folder / "keys.npy", keys)
    np.save(folder / "where.npy", where)
    for dataset, rank in _ranks(where, counts).items():
        np.save(folder / f"{dataset}.rank.npy", rank)
    (folder / "datasets.json").write_text(json.dumps(counts, sort_keys=True))


def _ranks(where: np.ndarray, counts: dict[str, int]) -> dict[str, np.ndarray]:
    """Per dataset, each position's place in the sorted keys (``where`` is in key order)."""
    where = np.asarray(where, dtype=np.int64)
    code, position = where >> 32, where & 0xFFFFFFFF
    out = {}
    for i, dataset in enumerate(sorted(counts)):
        mine = np.flatnonzero(code == i)
        rank = np.zeros(counts[dataset], dtype=np.int64)
        rank[position[mine]] = mine
        out[dataset] = rank
    return out
