import pytest

from bench.decontamination_cases import build_cases
from factory.decontamination.index import EvalIndex
from factory.decontamination.rows import eval_row
from factory.params.data_sections import DecontaminationParams


@pytest.fixture(scope="session")
def dev(ingested) -> list[dict]:
    """The real dev questions of the shared samples (the evaluation side of these tests)."""
    return [q for q in ingested.questions if q["source_file"].startswith("dev")]


@pytest.fixture(scope="session")
def eval_rows(dev) -> list[dict]:
    return [eval_row(q) for q in dev]


@pytest.fixture(scope="session")
def index(eval_rows) -> EvalIndex:
    """The dev questions indexed at the default params."""
    return EvalIndex(eval_rows, DecontaminationParams())


@pytest.fixture(scope="session")
def cases(dev) -> list:
    """Cases built from every third dev record (bench/decontamination_cases.py), all kinds."""
    return build_cases(dev[::3])
