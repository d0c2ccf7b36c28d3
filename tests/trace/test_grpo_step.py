"""One real TRL GRPOTrainer step on the CPU: the tiny model, the TRACE reward functions and RL
records exported from scripted trajectories over the shared corpora."""

from __future__ import annotations

import math

import pytest

from factory.params.round_sections import TraceParams
from factory.trace.export import export_trace
from factory.trace.rewards import make_reward_functions, score_completion
from factory.variants.registry import select_units
from factory.variants.round import selection_rows
from tests.scripted import scripted_trajectories


@pytest.fixture(scope="module")
def rl_records(ingested):
    questions = []
    for dataset in ("2wikimultihopqa", "hotpotqa", "musique"):
        pool = sorted(
            (q for q in ingested.questions if q["dataset"] == dataset and q["split"] == "train"),
            key=lambda q: q["question_id"],
        )
        questions.extend(pool[:1])
    pids = {p["pid"] for q in questions for p in q["passages"]}
    passages = [p for p in ingested.passages if p["pid"] in pids]
    trajectories = scripted_trajectories(questions, passages)
    everything = {t["trajectory_id"]: select_units(t, None, "unfiltered", 0) for t in trajectories}
    result = export_trace(
        trajectories,
        [],
        selection_rows("unfiltered", everything),
        {q["question_id"]: q for q in questions},
        {p["pid"]: p for p in passages},
        TraceParams(max_passages=3),
        variant="unfiltered",
        round_=0,
        mode="undirected_shortest",
        target_mode="thought_and_answer",
        passage_chars=80,
        allow_synthetic=True,
    )
    assert len(result.rl) >= 2
    return result.rl[:2]


def test_one_grpo_step_with_trace_rewards(tiny_model_dir, rl_records, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    calls: list[dict] = []
    funcs = make_reward_functions(TraceParams(bonus_weight=10.0))

    def recording(fn):
        def wrapped(completions, **kwargs):
            out = fn(completions, **kwargs)
            calls.append({"name": fn.__name__, "completions": completions, "kwargs": kwargs, "rewards": out})
            return out

        wrapped.__name__ = fn.__name__
        return wrapped

    columns = (
        "prompt",
        "gold_answers",
        "gold_relevant_indices",
        "dataset",
        "qtype",
        "route",
        "gold_coverage",
    )
    dataset = Dataset.from_list([{k: r[k] for k in columns} for r in rl_records])
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        per_device_train_batch_size=4,  # completions per step: 2 prompts x 2 generations
        num_generations=2,
        max_completion_length=16,
        max_steps=1,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        reward_weights=[1.0, 1.0, 1.0, 1.0],
        dataloader_num_workers=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[recording(f) for f in funcs],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 1

    # each reward function was called on the 2 x 2 completions with the exported reference columns
    assert sorted({c["name"] for c in calls}) == [
        "accuracy_reward",
        "format_reward",
        "relevance_reward",
        "trace_bonus",
    ]
    golds = {tuple(r["gold_answers"]): r["gold_relevant_indices"] for r in rl_records}
    for call in calls:
        assert len(call["completions"]) == 4 and len(call["rewards"]) == 4
        assert all(
            isinstance(c, list) and c[-1]["role"] == "assistant" for c in call["completions"]
        )  # chat completions
        for c, answers, indices, reward in zip(
            call["completions"],
            call["kwargs"]["gold_answers"],
            call["kwargs"]["gold_relevant_indices"],
            call["rewards"],
        ):
            assert golds[tuple(answers)] == list(indices)
            component = {
                "format_reward": "format",
                "accuracy_reward": "accuracy",
                "relevance_reward": "relevance",
                "trace_bonus": "bonus",
            }[call["name"]]
            assert reward == score_completion(c[-1]["content"], answers, indices)[component]

    # the trainer logged every reward and a finite loss
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    for name in ("format_reward", "accuracy_reward", "relevance_reward", "trace_bonus"):
        assert f"rewards/{name}/mean" in logs
    assert math.isfinite(logs.get("loss", logs.get("train_loss")))
    after = dict(trainer.model.named_parameters())
    assert all(torch.isfinite(p).all() for p in after.values())
    assert set(before) == set(after)
