"""What a generation stage sets up: the policy's backend, and the questions and index it works on.

Only what a stage needs is read: the id, dataset and split of every question (to draw the sample),
then the agent's fields of the sampled questions alone (their pools as pids), and the index with
its passage store, memory-mapped. Memory follows the sample, not the corpus. A question the
decontaminate stage flagged (``data/interim/contamination.jsonl``) is never among those drawn from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from factory.agent.policy import Policy
from factory.params.config import Params
from factory.utils import paths

SAMPLE_COLUMNS = ["question_id", "dataset", "split"]  # what drawing a sample needs
AGENT_COLUMNS = [  # what the agent and its records need of a question
    "question_id",
    "dataset",
    "split",
    "qtype",
    "route",
    "question",
    "answers",
    "passages.list.element.pid",
]


def make_policy_llm(params: Params, policy: Policy, cache=None):
    """The backend for ``policy`` (its adapter, served under the policy's unique name); ``cache``:
    the response cache to use instead of the local file (a Ray worker's, ``factory.execution.cluster``)."""
    from factory.llm import make_llm

    if policy.adapter is None:
        return make_llm(params, cache=cache)
    return make_llm(params, adapter_path=policy.adapter, adapter_name=policy.name, cache=cache)


@dataclass
class Inputs:
    """The questions to sample from (id, dataset and split of each) and the retriever with its
    passage store (``retriever.store``: pid -> passage)."""

    questions: list[dict]
    retriever: Any

    @property
    def passages(self):
        return self.retriever.store

    def rows(self, chosen: list[dict]) -> list[dict]:
        """The agent's fields of the ``chosen`` questions, in their order."""
        from schemas import read_rows

        ids = [q["question_id"] for q in chosen]
        found = {q["question_id"]: q for q in read_rows(paths.QUESTIONS, AGENT_COLUMNS, {"question_id": ids})}
        return [found[i] for i in ids]


def sample_pool() -> list[dict]:
    """The id, dataset and split of every question a sample may draw (decontamination's flagged ones
    left out)."""
    from factory.decontamination.flagged import contaminated_ids
    from schemas import read_rows, require

    require(paths.QUESTIONS, "run `factory ingest` and `factory index` first")
    require(paths.CONTAMINATION, "run `factory decontaminate` first")
    flagged = contaminated_ids(paths.CONTAMINATION)
    return [q for q in read_rows(paths.QUESTIONS, SAMPLE_COLUMNS) if q["question_id"] not in flagged]


def load_inputs(params: Params, questions: list[dict] | None = None) -> Inputs:
    """The questions to draw from (``sample_pool``, unless given) and the retriever over the index
    folder."""
    from factory.retrieval import load_retriever
    from schemas import require

    questions = sample_pool() if questions is None else questions
    require(paths.INDEX_DIR, "run `factory index` first")
    return Inputs(questions, load_retriever(paths.INDEX_DIR, params))
