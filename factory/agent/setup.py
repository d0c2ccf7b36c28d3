"""What a generation stage sets up: the policy's backend, and the questions, passages and retriever."""

from __future__ import annotations

from factory import paths
from factory.agent.policy import Policy
from factory.config import Params
from factory.errors import FactoryError


def make_policy_llm(params: Params, policy: Policy):
    """The backend for ``policy`` (its adapter, served under the policy's unique name)."""
    from factory.llm import make_llm

    if policy.adapter is None:
        return make_llm(params)
    return make_llm(params, adapter_path=policy.adapter, adapter_name=policy.name)


def load_inputs(params: Params):
    """Questions, pid -> passage, and the retriever over the index."""
    from factory.retrieval import load_retriever
    from schemas import read_rows

    for path in (paths.QUESTIONS, paths.PASSAGES):
        if not path.exists():
            raise FactoryError(f"{path} is missing: run `factory ingest` and `factory index` first")
    questions = read_rows(paths.QUESTIONS)
    passages = read_rows(paths.PASSAGES)
    retriever = load_retriever(paths.INDEX_DIR, passages, params)
    return questions, {p["pid"]: p for p in passages}, retriever
