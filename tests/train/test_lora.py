"""LoRA SFT library: assistant-only labels, adapter round trip, continuation, empty sets, determinism."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from factory.params.round_sections import TrainParams
from factory.train.examples import IGNORE, PadCollator, encode_example, encode_examples
from factory.train.lora import fit_lora
from factory.train.model import build_model, load_adapter_model, load_tokenizer
from factory.utils.errors import FactoryError

SYSTEM = "You answer multi-hop questions."


def chat(i: int, answer: str | None = None) -> dict:
    return {
        "example_id": f"ex-{i}",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: which river flows through city number {i}?"},
            {
                "role": "assistant",
                "content": answer or f"Thought: the river of city {i} | flows through ; Answer: River {i}",
            },
        ],
    }


EXAMPLES = [chat(i) for i in range(6)]
# Small and fast, with a learning rate high enough that one epoch moves the adapter visibly.
PARAMS = TrainParams(
    max_length=128,
    budget="epochs",
    epochs=1,
    batch_size=2,
    lora_r=4,
    lora_alpha=8,
    learning_rate=5e-3,
    lora_dropout=0.0,
)


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir)


def labelled_text(tok, enc) -> str:
    return tok.decode([t for t in enc.labels if t != IGNORE])


def test_only_assistant_tokens_are_labelled(tok):
    ex = EXAMPLES[0]
    enc = encode_example(ex, tok, max_length=128)
    assistant = ex["messages"][-1]["content"]
    # Labelled tokens are exactly the assistant output and the end-of-turn token.
    assert labelled_text(tok, enc) == assistant + "<|im_end|>"
    prompt_len = len(
        tok(
            tok.apply_chat_template(ex["messages"][:2], tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
    )
    assert all(x == IGNORE for x in enc.labels[:prompt_len])
    assert all(x != IGNORE for x in enc.labels[prompt_len:-1])
    assert enc.labels[-1] == IGNORE  # the template's newline after <|im_end|> is never generated
    assert [x for x in enc.labels if x != IGNORE] == [
        t for t, x in zip(enc.input_ids, enc.labels) if x != IGNORE
    ]


def test_every_assistant_turn_is_labelled_and_user_turns_are_not(tok):
    ex = {
        "example_id": "multi",
        "messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second question"},
            {"role": "assistant", "content": "second answer"},
        ],
    }
    text = labelled_text(tok, encode_example(ex, tok, 128))
    assert text == "first answer<|im_end|>second answer<|im_end|>"


def test_masking_needs_no_template_keyword(tiny_model_dir):
    # A template with no role markers at all: spans still come from prompt-vs-turn rendering.
    tok = load_tokenizer(tiny_model_dir)
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'] + '<|endoftext|>' }}"
        "{% else %}{{ '>> ' + m['content'] + '\n' }}{% endif %}{% endfor %}"
    )
    enc = encode_example(EXAMPLES[1], tok, 128)
    assert labelled_text(tok, enc) == EXAMPLES[1]["messages"][-1]["content"] + "<|endoftext|>"


def test_padding_is_ignored_and_masked(tok):
    encoded = encode_examples([EXAMPLES[0], chat(1, "Answer: Nile")], tok, 128).examples
    batch = PadCollator(tok.pad_token_id)([{"input_ids": e.input_ids, "labels": e.labels} for e in encoded])
    short = min(range(2), key=lambda r: len(encoded[r].input_ids))
    n = len(encoded[short].input_ids)
    assert batch["input_ids"].shape[1] == max(len(e.input_ids) for e in encoded) > n
    assert (batch["labels"][short, n:] == IGNORE).all()
    assert (batch["attention_mask"][short, n:] == 0).all()
    assert (batch["input_ids"][short, n:] == tok.pad_token_id).all()
    assert batch["attention_mask"][short, :n].all()


def test_truncation_and_examples_without_assistant_tokens(tok):
    enc = encode_example(EXAMPLES[0], tok, max_length=40)
    assert len(enc.input_ids) == len(enc.labels) == 40 and enc.truncated
    # A prompt longer than max_length leaves nothing to learn: dropped, named, counted.
    long_prompt = chat(9)
    long_prompt["messages"][1]["content"] = "word " * 200
    result = encode_examples([EXAMPLES[0], long_prompt], tok, 64)
    counts = result.counts()
    assert result.dropped_no_assistant_tokens == ["ex-9"]
    assert (
        counts["examples_received"]
        == counts["examples_used"] + counts["examples_dropped_no_assistant_tokens"]
        == 2
    )


def test_bad_example_names_record_and_field(tok):
    with pytest.raises(FactoryError, match=r"'bad'.*messages\[1\]"):
        encode_example(
            {
                "example_id": "bad",
                "messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}],
            },
            tok,
            64,
        )
    with pytest.raises(FactoryError, match=r"'noassist'.*no assistant turn"):
        encode_example({"example_id": "noassist", "messages": [{"role": "user", "content": "q"}]}, tok, 64)


def logits(model, tok) -> torch.Tensor:
    ids = tok(
        "Question: which river flows through city number 3?", return_tensors="pt", add_special_tokens=False
    )
    with torch.no_grad():
        return model(**ids).logits


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    return out, fit_lora(EXAMPLES, tiny_model_dir, out, PARAMS)


def test_train_writes_adapter_curve_config_status(trained, tiny_model_dir):
    out, outcome = trained
    m = outcome.metrics
    assert m["status"] == "trained" and m["device"] == "cpu" and m["dtype"] == "float32"
    assert m["examples_used"] == len(EXAMPLES) and m["steps"] == 3
    assert m["budget"] == "epochs" and m["max_steps"] is None
    assert m["examples_seen"] == len(EXAMPLES) and m["epochs"] == 1.0
    assert 0 < m["tokens_assistant"] < m["tokens_total"] == m["tokens_seen"]
    assert m["assistant_tokens_seen"] == m["tokens_assistant"]
    assert m["tokens_per_s"] > 0 and m["final_loss"] > 0
    assert (out / "adapter" / "adapter_model.safetensors").exists() and (
        out / "adapter" / "adapter_config.json"
    ).exists()
    curve = json.loads((out / "loss_curve.json").read_text())
    assert [p["step"] for p in curve] == [1, 2, 3] and all(p["loss"] > 0 for p in curve)
    config = json.loads((out / "training_config.json").read_text())
    assert config["train"] == PARAMS.model_dump(mode="json")
    assert (
        config["model_path"] == str(tiny_model_dir)
        and config["examples"] == len(EXAMPLES)
        and len(config["data_hash"]) == 64
    )
    assert json.loads((out / "status.json").read_text()) == {
        "adapter": "adapter",
        "reason": None,
        "status": "trained",
    }
    adapter_config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    # sorted as written (PEFT writes its set of modules in hash order, different in every process)
    assert adapter_config["r"] == 4 and adapter_config["target_modules"] == sorted(PARAMS.target_modules)


def test_saved_adapter_reloads_to_the_trained_model(trained, tiny_model_dir, tok):
    out, outcome = trained
    in_memory = logits(outcome.model.eval(), tok)
    reloaded = logits(load_adapter_model(tiny_model_dir, out / "adapter"), tok)
    base = logits(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval(), tok)
    assert torch.allclose(in_memory, reloaded, atol=1e-6, rtol=0)
    assert (reloaded - base).abs().max() > 1e-3


def test_previous_adapter_is_continued(trained, tiny_model_dir, tok, tmp_path):
    out, _ = trained
    start = build_model(tiny_model_dir, PARAMS, out / "adapter", "float32")
    assert any(p.requires_grad for n, p in start.named_parameters() if "lora_" in n)
    # Continuation starts from the previous adapter's weights, not from a fresh (identity) adapter.
    assert torch.allclose(
        logits(start.eval(), tok), logits(load_adapter_model(tiny_model_dir, out / "adapter"), tok), atol=1e-6
    )
    metrics = fit_lora(
        [chat(i) for i in range(10, 14)], tiny_model_dir, tmp_path, PARAMS, init_adapter=out / "adapter"
    ).metrics
    assert metrics["status"] == "trained" and metrics["init_adapter"] == str(out / "adapter")
    assert json.loads((tmp_path / "training_config.json").read_text())["init_adapter"] == str(out / "adapter")
    before = (out / "adapter" / "adapter_model.safetensors").read_bytes()
    assert (tmp_path / "adapter" / "adapter_model.safetensors").read_bytes() != before
    with pytest.raises(FactoryError, match="cannot continue adapter"):
        build_model(tiny_model_dir, PARAMS.model_copy(update={"lora_r": 8}), out / "adapter", "float32")


def test_empty_set_is_a_recorded_outcome(tiny_model_dir, tmp_path):
    (tmp_path / "adapter").mkdir()  # a stale adapter from an earlier run must not survive
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"stale")
    metrics = fit_lora([], tiny_model_dir, tmp_path, PARAMS).metrics
    assert metrics["status"] == "empty" and "empty" in metrics["reason"]
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "empty"
    assert json.loads((tmp_path / "status.json").read_text())["adapter"] is None
    assert not (tmp_path / "adapter").exists()
    assert json.loads((tmp_path / "loss_curve.json").read_text()) == []


def test_same_seed_same_adapter_bytes(tiny_model_dir, tmp_path, trained):
    out, _ = trained
    fit_lora(EXAMPLES, tiny_model_dir, tmp_path / "again", PARAMS)
    fit_lora(
        EXAMPLES, tiny_model_dir, tmp_path / "other", PARAMS.model_copy(update={"seed": PARAMS.seed + 1})
    )
    first = (out / "adapter" / "adapter_model.safetensors").read_bytes()
    assert (tmp_path / "again" / "adapter" / "adapter_model.safetensors").read_bytes() == first
    assert (tmp_path / "again" / "loss_curve.json").read_bytes() == (out / "loss_curve.json").read_bytes()
    assert (tmp_path / "again" / "training_config.json").read_bytes() == (
        out / "training_config.json"
    ).read_bytes()
    assert (tmp_path / "other" / "adapter" / "adapter_model.safetensors").read_bytes() != first


def test_labelled_positions_loss_equals_the_models_own(tiny_model_dir, tok):
    from peft import get_peft_model

    from factory.train.model import lora_config, project_labelled_positions_only

    encoded = encode_examples([EXAMPLES[0], chat(1, "Answer: Nile")], tok, 128).examples
    batch = PadCollator(tok.pad_token_id)([{"input_ids": e.input_ids, "labels": e.labels} for e in encoded])
    results = []
    for patch in (False, True):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
        if patch:
            assert project_labelled_positions_only(model)
        model = get_peft_model(model, lora_config(PARAMS.model_copy(update={"lora_dropout": 0.0})))
        for p in model.parameters():  # non-zero B so the adapter's gradients are all informative
            if p.requires_grad:
                torch.nn.init.normal_(p, std=0.02)
        model.train()
        out = model(**batch)
        assert (out.logits is None) == patch  # the patched head never builds (batch, seq, vocab) logits
        losses = [out.loss, model(**batch, num_items_in_batch=torch.tensor(7)).loss]
        (losses[0] + losses[1]).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((torch.stack(losses).detach(), grads))
    (plain_loss, plain_grads), (fast_loss, fast_grads) = results
    assert torch.allclose(plain_loss, fast_loss, atol=1e-5, rtol=1e-5)
    assert plain_grads.keys() == fast_grads.keys()
    assert all(torch.allclose(plain_grads[n], fast_grads[n], atol=1e-6, rtol=1e-4) for n in plain_grads)


def test_bad_scheduler_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(FactoryError, match="params.train"):
        fit_lora(
            EXAMPLES[:2], tiny_model_dir, tmp_path, PARAMS.model_copy(update={"lr_scheduler": "sideways"})
        )


def test_step_budget_gives_every_set_the_same_steps(tiny_model_dir, tmp_path):
    """budget: steps -- a small set is cycled, a large one stopped early; both make max_steps steps of
    full batches (3 examples in batches of 2: no short last batch of an epoch)."""
    params = PARAMS.model_copy(update={"budget": "steps", "max_steps": 5})
    small = fit_lora(EXAMPLES[:3], tiny_model_dir, tmp_path / "small", params).metrics
    large = fit_lora([chat(i) for i in range(20, 32)], tiny_model_dir, tmp_path / "large", params).metrics
    for m in (small, large):
        assert m["budget"] == "steps" and m["max_steps"] == 5 and m["steps"] == 5
        assert m["examples_seen"] == 5 * params.batch_size == 10
        assert 0 < m["assistant_tokens_seen"] < m["tokens_seen"]
    assert small["epochs"] == 10 / 3 and large["epochs"] == 10 / 12
    # the small set went round 3 1/3 times, the large one not once
    assert 3 * small["tokens_total"] < small["tokens_seen"] < 4 * small["tokens_total"]
    assert large["tokens_seen"] < large["tokens_total"]
    curve = json.loads((tmp_path / "small" / "loss_curve.json").read_text())
    assert [p["step"] for p in curve] == [1, 2, 3, 4, 5]
    # deterministic under the step budget too: same seed, same adapter bytes
    fit_lora(EXAMPLES[:3], tiny_model_dir, tmp_path / "again", params)
    name = "adapter/adapter_model.safetensors"
    assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "small" / name).read_bytes()
    assert (tmp_path / "again" / "adapter" / "adapter_config.json").read_bytes() == (
        tmp_path / "small" / "adapter" / "adapter_config.json"
    ).read_bytes()


def test_gradient_checkpointing_trains_the_same_adapter(tiny_model_dir, tmp_path, trained):
    """train.gradient_checkpointing recomputes activations (less memory on a shared GPU): the same
    losses and weights up to float rounding."""
    from safetensors.torch import load_file

    out, _ = trained
    fit_lora(EXAMPLES, tiny_model_dir, tmp_path, PARAMS.model_copy(update={"gradient_checkpointing": True}))
    curve = lambda folder: [e["loss"] for e in json.loads((folder / "loss_curve.json").read_text())]  # noqa: E731
    assert curve(tmp_path) == pytest.approx(curve(out), rel=1e-4)
    mine, theirs = (load_file(f / "adapter" / "adapter_model.safetensors") for f in (tmp_path, out))
    assert mine.keys() == theirs.keys()
    assert all(torch.allclose(mine[k], theirs[k], atol=1e-5) for k in mine)
