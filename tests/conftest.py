import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("FACTORY_NO_PROGRESS", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

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
