"""Building the index folder from the passages table, streaming: the passage store and BM25 (and
the dense vectors when asked for), written atomically (``factory.utils.io.atomic_path``).

One pass over passages.parquet, a row group at a time, writes each dataset's store file and feeds
its BM25 builder, whose (document, token, count) entries spill to a folder inside the temporary
index; each dataset's score matrix is then laid out and saved in turn. Memory follows a batch and
the largest dataset's entries, not the text of the corpus.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from factory.retrieval.bm25 import BM25Builder
from factory.retrieval.store import PassageStore

log = logging.getLogger(__name__)


def build_index(passages_path: str | Path, index_dir: Path, params, progress=None) -> dict[str, int]:
    """Write ``index_dir`` (store, bm25/, dense/ for index.retriever dense or hybrid); returns the
    passages per dataset. ``progress(n)`` is told of each batch of passages read."""
    from factory.utils.io import atomic_path

    with atomic_path(index_dir) as tmp:
        tmp.mkdir(parents=True)
        spill = tmp / ".spill"
        builders: dict[str, BM25Builder] = {}

        def add(dataset: str, rows) -> None:
            if dataset not in builders:
                builders[dataset] = BM25Builder(params.index, spill / dataset)
            titles, texts = rows.column("title").to_pylist(), rows.column("text").to_pylist()
            builders[dataset].add([f"{title}. {text}" for title, text in zip(titles, texts)])
            if progress is not None:
                progress(rows.num_rows)

        try:
            counts = PassageStore.write(passages_path, tmp, on_batch=add)
            for dataset in sorted(builders):
                builders[dataset].finish().save(tmp / "bm25" / dataset)
                builders[dataset].close()
                shutil.rmtree(spill / dataset)
        finally:
            for builder in builders.values():
                builder.close()
        shutil.rmtree(spill, ignore_errors=True)
        if params.index.retriever in ("dense", "hybrid"):
            from factory.retrieval.dense import DenseRetriever

            log.info("encoding %d passages with %s", sum(counts.values()), params.index.dense_model)
            DenseRetriever.encode_store(PassageStore.open(tmp), params.index.dense_model).save(tmp)
    return counts
