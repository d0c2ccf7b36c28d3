import pytest

from factory.retrieval.bm25 import BM25Retriever


@pytest.fixture(scope="module")
def bm25(ingested):
    return BM25Retriever.build(ingested.passages)
