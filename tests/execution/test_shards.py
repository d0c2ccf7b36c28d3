"""Question samples (seeded, even across datasets) and checkpointed shards (resume after a crash)."""

from __future__ import annotations

from collections import Counter

import pytest

from factory.agent.policy import Policy
from factory.agent.scripted import ScriptedPolicyLLM
from factory.execution.generate import check_complete, generate_trajectories
from factory.execution.sampling import even_quotas, sample_questions
from factory.execution.shards import run_in_shards, shard_folder
from factory.llm.base import Sampling
from factory.params.config import Params
from factory.retrieval.bm25 import BM25Retriever
from factory.utils.errors import FactoryError
from factory.utils.seeds import derived_seed
from schemas import num_rows


def test_even_quotas_redistribute_what_a_small_dataset_lacks():
    assert even_quotas({"a": 100, "b": 100, "c": 100}, 10) == {"a": 4, "b": 3, "c": 3}
    assert even_quotas({"a": 100, "b": 1, "c": 100}, 10) == {"a": 5, "b": 1, "c": 4}
    assert even_quotas({"a": 2, "b": 1}, 10) == {"a": 2, "b": 1}


def test_question_sample_is_seeded_even_and_split_pure(ingested):
    qs = ingested.questions
    a = sample_questions(qs, 24, seed=7, split="train")
    assert a == sample_questions(list(reversed(qs)), 24, seed=7, split="train")  # file order does not matter
    # 2WikiMultihopQA's shared sample is its dev file alone: no train question, its quota goes to the others
    assert Counter(q["dataset"] for q in a) == {"hotpotqa": 12, "musique": 12}
    assert all(q["split"] == "train" for q in a)
    test = sample_questions(qs, 24, seed=7, split="test")
    assert Counter(q["dataset"] for q in test) == {"hotpotqa": 8, "2wikimultihopqa": 8, "musique": 8}
    assert [q["question_id"] for q in a] != [
        q["question_id"] for q in sample_questions(qs, 24, seed=8, split="train")
    ]
    only = sample_questions(qs, 5, seed=7, split="heldout", datasets=["musique"])
    assert len(only) == 5 and {q["dataset"] for q in only} == {"musique"}
    assert len({q["dataset"] for q in a[:6]}) > 1  # the order interleaves datasets, so shards mix them
    with pytest.raises(FactoryError, match="no 'train' questions"):
        sample_questions(qs, 3, seed=1, split="train", datasets=["nope"])
    assert derived_seed(7, 2, 3) == 2010 and derived_seed(11, 0) == 11


@pytest.fixture(scope="module")
def setup(ingested):
    questions = sample_questions(ingested.questions, 9, seed=3, split="train")
    pool = {
        p["pid"]: {**p, "dataset": q["dataset"], "text": " ".join(p["sentences"])}
        for q in questions
        for p in q["passages"]
    }
    return questions, BM25Retriever.build(list(pool.values())), ScriptedPolicyLLM(questions)


def generate(params, questions, retriever, llm, out, samples=2, **options):
    """Round 0 of the base policy on ``questions`` (the agent tests' one way to run the driver)."""
    return generate_trajectories(
        params,
        questions,
        llm=llm,
        retriever=retriever,
        passages=None,
        policy=Policy("base", None, -1),
        round_=0,
        samples=samples,
        sampling=Sampling(temperature=0.7, seed=5),
        out_path=out,
        run_id="v/seed_0/round_0",
        **options,
    )


def _generate(params, setup, out, on_shard=None, samples=2):
    questions, retriever, llm = setup
    return generate(params, questions, retriever, llm, out, samples, on_shard=on_shard)


def test_resume_after_a_crash_gives_the_same_file(setup, tmp_path):
    params = Params(trajectories={"shard_size": 2})
    whole = tmp_path / "whole" / "round_0.parquet"
    reference = _generate(params, setup, whole)
    assert len(reference) == 18 and not shard_folder(whole).exists()

    out = tmp_path / "crashed" / "round_0.parquet"

    def crash(k):
        if k == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _generate(params, setup, out, on_shard=crash)
    folder = shard_folder(out)
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        "shard_00000.parquet",
        "shard_00001.parquet",
        "shard_00002.parquet",
    ]
    assert not out.exists()
    redone = []
    resumed = _generate(params, setup, out, on_shard=redone.append)
    assert redone == [3, 4]  # only the missing shards ran
    assert out.read_bytes() == whole.read_bytes() and resumed == reference
    assert not folder.exists()


def test_a_checkpoint_from_other_params_is_discarded(setup, tmp_path):
    out = tmp_path / "round_0.parquet"
    with pytest.raises(KeyboardInterrupt):
        _generate(
            Params(trajectories={"shard_size": 3}),
            setup,
            out,
            on_shard=lambda k: (_ for _ in ()).throw(KeyboardInterrupt()),
        )
    ran = []
    records = _generate(
        Params(trajectories={"shard_size": 3}, agent={"max_iterations": 2}), setup, out, on_shard=ran.append
    )
    assert ran == [0, 1, 2] and len(records) == 18


def test_empty_sample_and_count_checks(tmp_path):
    rows = run_in_shards([], lambda u: u["question_id"], 4, tmp_path / "e.parquet", "fp", lambda s, t: [])
    assert rows == 0 and num_rows(tmp_path / "e.parquet") == 0
    q = [{"question_id": "a"}, {"question_id": "b"}]
    rec = {"question_id": "a", "sample": 0, "rationalized": False}
    with pytest.raises(FactoryError, match="b sample 0: 0 records"):
        check_complete([rec], q, 1)
    with pytest.raises(FactoryError, match="a sample 0: 2 records"):
        check_complete([rec, rec, {**rec, "question_id": "b"}], q, 1)
    check_complete([rec, {**rec, "question_id": "b"}, {**rec, "sample": 1, "rationalized": True}], q, 1)
