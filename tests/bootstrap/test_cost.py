"""LLM calls of a protocol from its params: hand-computed numbers, and the per-trajectory bound met
exactly by a worst-case policy (never sufficient, every reply repaired once)."""

from __future__ import annotations

import itertools
import json

from factory.agent.format import render_complete, render_explore, render_final
from factory.bootstrap.cost import (
    calls_per_trajectory,
    counterfactual_calls_per_trajectory,
    protocol_cost,
    render_cost,
)
from factory.bootstrap.cost_gpu import (
    H100_TOKENS_PER_S,
    model_shape,
    n_parameters,
    token_estimate,
    training_memory,
    worst_case_prompts,
)
from factory.cli import main
from factory.params.config import Params
from factory.params.profiles import profile_params
from factory.retrieval.bm25 import BM25Retriever
from tests.agent.test_loop import FakeLLM, run


def test_protocol_cost_by_hand():
    p = Params()  # L=5, P=3, A=1; N=24, k=1; H=16; R=2; 3 variants x 1 seed; 10 routes x 3 datasets
    assert calls_per_trajectory(p) == (5 * (1 + 3) + 1) * (1 + 1) == 42
    # counterfactual: M=200 re-asked at most, 5 conditions + 2 more random seeds = 7 graphs, repaired once
    assert counterfactual_calls_per_trajectory(p) == 7 * 2 == 14
    cost = protocol_cost(p)
    assert cost["counterfactual_per_round"] == min(24, 200) * 14 == 336
    assert cost["per_round"] == (24 * 1 + 16) * 42 + 336 == 2016
    assert cost["per_chain"] == 2 * 2016 + 16 * 42 == 4704
    assert cost["total"] == 3 * 4704 + 16 * 42 + 10 * 3 == 14814
    narrow = Params(counterfactual={"conditions": ["full", "without_sq"], "max_trajectories": 5})
    assert protocol_cost(narrow)["counterfactual_per_round"] == 5 * 2 * 2
    full = Params(
        trajectories={"n_questions": 1000, "samples": 4, "rationalize": True},
        evaluate={"n_questions": 500},
        bootstrap={
            "seeds": [0, 1, 2],
            "max_rounds": 3,
            "rounds": [{"round": r, "after": a} for r, a in enumerate(["init", "round_0", "round_1"])],
        },
    )
    cost = protocol_cost(full)
    assert cost["trajectories_per_round"] == 1000 * 4 + 1000 and cost["chains"] == 9
    assert cost["per_round"] == (5000 + 500) * 42 + 200 * 14
    text = render_cost(full)
    line = "per round       (N k + N + H) c + counterfactual = (1000 x 4 + 1000 + 500) x 42 + 2,800 = 233,800"
    assert line in text
    assert f"= {cost['total']:,}" in text


def test_params_cost_command(capsys):
    assert main(["params", "--cost", "--set", "agent.repair_attempts=0"]) == 0
    out = capsys.readouterr().out
    assert "per trajectory  c = (L(1 + P) + 1)(1 + A) = (" in out and "(1 + 0) = " in out


def test_the_per_trajectory_bound_is_met_by_a_worst_case_policy(ingested):
    questions = [q for q in ingested.questions if q["split"] == "train"][:2]
    passages = {
        p["pid"]: {**p, "dataset": q["dataset"], "text": " ".join(p["sentences"])}
        for q in questions
        for p in q["passages"]
    }
    retriever = BM25Retriever.build(list(passages.values()))
    fresh = itertools.count()

    def reply(kind, request):
        if len(request.messages) <= 2:  # first attempt: unreadable, so every call is repaired once
            return "???"
        if kind == "explore":
            return render_explore("need more", [(f"entity {next(fresh)}", "relation") for _ in range(2)])
        if kind == "complete":
            n = next(fresh)
            return render_complete([(f"subject {n}", "relation", f"object {n}")])
        return render_final("done", "an answer")

    params = Params(agent={"max_iterations": 3, "max_pairs": 2, "repair_attempts": 1})
    records = run(questions, FakeLLM(reply), retriever, params)
    assert calls_per_trajectory(params) == (3 * (1 + 2) + 1) * 2 == 20
    assert [r["llm_calls"] for r in records] == [20, 20]


def test_one_prompt_per_call_of_the_bound_and_prompts_grow_with_the_passages():
    p = Params()
    assert len(worst_case_prompts(p)) == calls_per_trajectory(p)  # repairs included
    more = Params(retrieval={"top_n": 6}, agent={"passage_chars": 1200})
    assert sum(worst_case_prompts(more)) > sum(worst_case_prompts(p)) + 4 * 3 * 2 * 600  # 4 lookups x 2 tries
    tokens = token_estimate(p, 1000)
    assert tokens["completion_tokens"] == 1000 * p.llm.max_new_tokens
    assert tokens["prompt_tokens"] == 1000 * sum(worst_case_prompts(p)) / len(worst_case_prompts(p)) / 4
    assert tokens["gpu_hours"] == 1000 * p.llm.max_new_tokens / H100_TOKENS_PER_S / 3600


def test_lora_training_memory_of_an_8b_model_by_hand():
    mem = training_memory(profile_params("full"))  # model.base not set: Llama-3.1-8B's shape assumed
    assert mem["parameters"] == 8_030_261_248  # Llama-3.1-8B's published count
    assert mem["lora_parameters"] == 32 * 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    assert mem["weights"] == 2 * 8_030_261_248
    sbh = 8 * 1024 * 4096  # train.batch_size x train.max_length x hidden
    assert mem["activations"] == 34 * sbh * 32
    assert mem["activations_checkpointed"] == 2 * sbh * 32 + 34 * sbh
    assert mem["total"] == mem["weights"] + 16 * mem["lora_parameters"] + mem["activations"]
    assert 45 * 2**30 < mem["total"] < 55 * 2**30 and mem["total_checkpointed"] < 20 * 2**30


def test_the_shape_is_read_from_model_base_when_it_is_a_folder(tmp_path):
    config = {
        "vocab_size": 1000,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    source, shape = model_shape(Params(model={"base": str(tmp_path)}))
    assert source.endswith("config.json") and shape["head_dim"] == 16
    assert n_parameters(shape) == 1000 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64
    assert model_shape(Params())[0].startswith("SmolLM2-135M")  # the demo's embedded model


def test_pilot_cost_prints_tokens_memory_and_gpu_hours(capsys):
    assert main(["params", "--profile", "pilot", "--cost"]) == 0
    out = capsys.readouterr().out
    calls = protocol_cost(profile_params("pilot"))["total"]
    assert "whole run       V S x per chain + H c + Q D = 3 x 1 x" in out and f"= {calls:,}" in out
    assert f"completion      whole run x llm.max_new_tokens = {calls:,} x 160 = {calls * 160:,}" in out
    assert "H100-hours of generation" in out and "MLPerf Inference v5.1" in out
    assert "model           Llama-3.1-8B (assumed: model.base is not set yet): 8.03B parameters" in out
    total = "total           49.2 GiB without gradient checkpointing; 18.2 GiB with it"
    assert f"{total} (train.gradient_checkpointing is false" in out
