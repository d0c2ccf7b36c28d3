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


# A suite never silent for a minute: the long tests (the end-to-end `dvc repro`, a training) print nothing
# while they run, and under xdist their output only comes with their result. When no test has finished for
# HEARTBEAT_S seconds, the xdist controller (`make test` runs two workers) says which tests are running and
# for how long. (Without xdist the running test's output capture would swallow the line.)
HEARTBEAT_S = float(os.environ.get("FACTORY_TEST_HEARTBEAT_S", "30"))


class Heartbeat:
    def __init__(self, config):
        import threading
        import time

        self.clock = time.monotonic
        self.config = config
        self.running: dict[str, float] = {}
        self.last = self.clock()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="test-heartbeat", daemon=True)

    def pytest_sessionstart(self, session):
        self.thread.start()

    def pytest_sessionfinish(self, session):
        self.stop.set()

    def pytest_runtest_logstart(self, nodeid, location):
        with self.lock:
            self.running[nodeid] = self.clock()

    def pytest_runtest_logfinish(self, nodeid, location):
        with self.lock:
            self.running.pop(nodeid, None)
            self.last = self.clock()

    def _beat(self):
        while not self.stop.wait(1.0):
            with self.lock:
                now = self.clock()
                if now - self.last < HEARTBEAT_S or not self.running:
                    continue
                self.last = now
                tests = ", ".join(f"{nodeid} ({now - start:.0f} s)" for nodeid, start in self.running.items())
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:  # on a line of its own, after the progress dots
                fresh_line = not getattr(reporter._tw, "width_of_current_line", 0)
                reporter.write_line(("" if fresh_line else "\n") + f"still running: {tests}", flush=True)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), never a worker
        config.pluginmanager.register(Heartbeat(config), "factory-heartbeat")
