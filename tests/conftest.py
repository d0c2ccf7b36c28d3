import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("FACTORY_NO_PROGRESS", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
if "PYTEST_XDIST_WORKER" in os.environ:
    # two workers on two cores: torch's default of one thread per core would oversubscribe (10x slower)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("FACTORY_CORPORA", ROOT.parent / "shared" / "corpora"))


@pytest.fixture(scope="session")
def corpora() -> Path:
    if not CORPORA.exists():
        pytest.fail(f"shared corpora not found at {CORPORA} (set FACTORY_CORPORA)")
    return CORPORA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, corpora) -> Path:
    """A few-M-parameter Llama with a tokenizer trained here; built once per test session."""
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), corpora)


@pytest.fixture(scope="session")
def corpora_params(corpora):
    """Default params with the corpus files resolved against the shared corpora folder."""
    from factory.params.config import Params

    return Params(
        corpora={
            "hotpotqa": [
                str(corpora / "hotpotqa" / "dev_sample.json"),
                str(corpora / "hotpotqa" / "train_sample.json"),
            ],
            "2wikimultihopqa": [str(corpora / "2wikimultihopqa" / "dev_sample.json")],
            "musique": [
                str(corpora / "musique" / "dev_sample.jsonl"),
                str(corpora / "musique" / "train_sample.jsonl"),
            ],
        }
    )


@pytest.fixture(scope="session")
def ingested(corpora_params):
    """All shared corpora ingested once per session (questions, passages, quarantine, counts)."""
    from factory.corpora.ingest import ingest_sources

    return ingest_sources(corpora_params)


@pytest.fixture(scope="session")
def questions_by_id(ingested) -> dict:
    return {q["question_id"]: q for q in ingested.questions}


# The slowest tests first: with two xdist workers, the end-to-end `dvc repro` (~7 minutes) then runs on
# one worker while the other takes the rest; collected last, it started after the rest and the suite took
# ~10.5 minutes instead of ~8.
SLOWEST_FIRST = ("tests/test_pipeline_e2e.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(SLOWEST_FIRST))
