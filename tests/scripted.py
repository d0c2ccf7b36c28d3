"""Trajectories of the scripted policy (``factory.agent.scripted``: the gold facts looked up with real
retrieval and grounding) on real questions: the input several tests build on."""

from __future__ import annotations

from collections.abc import Sequence


def own_passages(questions: Sequence[dict]) -> list[dict]:
    """The questions' own passages, each once, with its dataset and text (as the passage store has them)."""
    seen, passages = set(), []
    for q in questions:
        for p in q["passages"]:
            if p["pid"] not in seen:
                seen.add(p["pid"])
                passages.append({**p, "dataset": q["dataset"], "text": " ".join(p["sentences"])})
    return passages


def scripted_trajectories(
    questions: Sequence[dict],
    passages: Sequence[dict],
    *,
    llm_passages: Sequence[dict] | None = None,
    run_id: str | None = None,
) -> list[dict]:
    """One trajectory per question, retrieving (BM25) from ``passages``; the scripted policy finds the
    gold facts in ``llm_passages`` (default: ``passages``)."""
    from factory.agent.loop import Run, run_trajectories
    from factory.agent.policy import Policy
    from factory.agent.scripted import ScriptedPolicyLLM
    from factory.llm.base import Sampling
    from factory.params.config import Params
    from factory.retrieval.bm25 import BM25Retriever

    llm = ScriptedPolicyLLM(questions, passages if llm_passages is None else llm_passages)
    policy = Policy("base", None, -1)
    run = Run(questions, llm, BM25Retriever.build(passages), Params(), policy, 0, Sampling(), run_id=run_id)
    return run_trajectories(run, questions, 1)
