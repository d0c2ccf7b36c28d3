"""The local transformers + PEFT backend, end to end on the tiny test model (CPU)."""

from __future__ import annotations

import hashlib
import json

import pytest

from factory.llm import identity as identity_mod
from factory.llm.base import ChatRequest, Sampling
from factory.llm.cache import CachedLLM
from factory.llm.local import LocalLLM
from factory.llm.responses import ResponseCache
from factory.params.agent_sections import LLMParams
from factory.utils.errors import FactoryError

QUESTIONS = [
    "Were Scott Derrickson and Ed Wood of the same nationality?",
    "Hi",
    "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
    "Which band released the album that topped the UK charts in 1999?",
    "Who directed the film?",
    "What is the capital of France?",
]


def _requests(sampling: Sampling, questions=QUESTIONS, samples: int = 1) -> list[ChatRequest]:
    return [
        ChatRequest.of(
            [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}], sampling, k
        )
        for q in questions
        for k in range(samples)
    ]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cpu(model_dir, batch_size: int) -> LLMParams:
    """The local backend's section for ``model_dir`` on CPU in fp32 (batch-invariant)."""
    return LLMParams(model=str(model_dir), device="cpu", dtype="float32", batch_size=batch_size)


@pytest.fixture(scope="module")
def sharp_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with its weights scaled up, so greedy decoding is not one repeated token.

    (The random init is so flat that every prompt decodes to the same newline run, which would let
    a batching bug pass unnoticed.)
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("models") / "sharp"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(8.0)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapter_dir(sharp_model_dir, tmp_path_factory):
    """A LoRA adapter with random (non-zero) B, so it changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(sharp_model_dir)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, config)
    out = tmp_path_factory.mktemp("adapters") / "round_1"
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def base_llm(sharp_model_dir):
    llm = LocalLLM(_cpu(sharp_model_dir, batch_size=4))
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def adapter_llm(sharp_model_dir, adapter_dir):
    llm = LocalLLM(_cpu(sharp_model_dir, batch_size=4), adapter_path=adapter_dir)
    yield llm
    llm.close()


def test_batched_greedy_equals_one_by_one_and_keeps_order(base_llm):
    greedy = Sampling(max_new_tokens=16)
    requests = _requests(greedy)
    batched = base_llm.generate(requests)
    single = [base_llm.generate([r])[0] for r in requests]
    assert [r.text for r in batched] == [r.text for r in single]
    assert len({r.text for r in batched}) > 1, "outputs should differ between prompts"
    assert all(r.ok and r.completion_tokens > 0 and r.latency_s > 0 for r in batched)
    # Mixed sampling settings in one call: grouped internally, returned in input order.
    short = Sampling(max_new_tokens=5)
    mixed = [ChatRequest(r.messages, short if i % 2 else greedy) for i, r in enumerate(requests)]
    got = base_llm.generate(mixed)
    short_alone = base_llm.generate([r for r in mixed if r.sampling == short])
    assert [g.text for i, g in enumerate(got) if i % 2 == 0] == [
        b.text for i, b in enumerate(batched) if i % 2 == 0
    ]
    assert [g.text for i, g in enumerate(got) if i % 2] == [s.text for s in short_alone]


SYSTEM_LONG = (
    "You read passages and write down the facts they state about one entity and relation, one per "
    "line, in the form (subject ; relation ; object). Example: (Budapest ; river ; Danube)."
)


def test_prefix_cache_gives_the_tokens_of_whole_prompts(sharp_model_dir, base_llm):
    """Rows with a long system prompt start from its cached keys and values; rows of two different
    prefixes and a row without one share a batch; greedy fp32 output equals whole-prompt prefill."""
    greedy = Sampling(max_new_tokens=12)
    requests = [
        ChatRequest.of([{"role": "system", "content": system}, {"role": "user", "content": q}], greedy)
        for system in (SYSTEM_LONG, SYSTEM_LONG.replace("facts", "claims") + " Be brief.")
        for q in QUESTIONS[:3]
    ] + [ChatRequest.of([{"role": "user", "content": QUESTIONS[3]}], greedy)]
    prompts = [base_llm._prompt(r) for r in requests]
    prefixes = [base_llm._prefix_length(r, p) for r, p in zip(requests, prompts)]
    assert min(prefixes[:6]) >= 32 and prefixes[-1] == 0 and len(set(prefixes[:6])) == 2
    whole = LocalLLM(_cpu(sharp_model_dir, batch_size=8), prefix_cache=False)
    expected = [r.text for r in whole.generate(requests)]
    assert [r.text for r in base_llm.generate(requests)] == expected
    assert [base_llm.generate([r])[0].text for r in requests] == expected  # and alone
    assert len(base_llm._prefixes._kv) >= 2  # the two system prompts were cached
    whole.close()
    assert [_plain_greedy(base_llm, p, 12) for p in prompts] == expected  # = transformers alone


def _plain_greedy(llm: LocalLLM, prompt: list[int], new_tokens: int) -> str:
    """What transformers' own generate makes of one prompt (no cache given, no padding), greedy."""
    import torch

    with torch.inference_mode():
        out = llm.model.generate(
            torch.tensor([prompt]),
            max_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=llm.tokenizer.pad_token_id,
        )
    ids = out[0, len(prompt) :].tolist()
    end = next((j for j, t in enumerate(ids) if t in llm.eos_ids), len(ids))
    return llm.tokenizer.decode(ids[:end], skip_special_tokens=True)


def test_token_counts_and_length_finish(base_llm):
    request = _requests(Sampling(max_new_tokens=7))[0]
    (resp,) = base_llm.generate([request])
    tok = base_llm.tokenizer
    prompt = tok.apply_chat_template(request.message_dicts(), add_generation_prompt=True, tokenize=False)
    assert resp.prompt_tokens == len(tok(prompt, add_special_tokens=False)["input_ids"])
    if resp.finish_reason == "length":
        assert resp.completion_tokens == 7
    else:
        assert resp.completion_tokens <= 7
    assert base_llm.count_tokens("Scott Derrickson nationality") == len(
        tok("Scott Derrickson nationality", add_special_tokens=False)["input_ids"]
    )


def test_stop_strings_trim_output(base_llm):
    free = base_llm.generate(_requests(Sampling(max_new_tokens=16)))
    # Stop at a character that appears in most free outputs.
    stop = max("aeiost", key=lambda c: sum(c in r.text for r in free))
    stopped = base_llm.generate(_requests(Sampling(max_new_tokens=16, stop=(stop,))))
    assert any(stop in r.text for r in free)
    for f, s in zip(free, stopped):
        assert stop not in s.text
        assert f.text.startswith(s.text)
        if stop in f.text:
            assert s.text == f.text[: f.text.index(stop)] and s.finish_reason == "stop"


def test_seeded_sampling_is_reproducible_and_leaves_global_rng_alone(base_llm):
    import torch

    sampled = Sampling(temperature=1.0, top_p=0.95, max_new_tokens=12, seed=5)
    state = torch.get_rng_state()
    first = base_llm.generate(_requests(sampled, samples=2))
    assert torch.equal(state, torch.get_rng_state())
    again = base_llm.generate(_requests(sampled, samples=2))
    assert [r.text for r in first] == [r.text for r in again]
    other_seed = base_llm.generate(
        _requests(Sampling(temperature=1.0, top_p=0.95, max_new_tokens=12, seed=6), samples=2)
    )
    assert [r.text for r in first] != [r.text for r in other_seed]
    assert len({r.text for r in first}) > len(QUESTIONS) // 2  # samples differ, not one greedy string


def test_adapter_changes_outputs_and_identity(base_llm, adapter_llm, adapter_dir, sharp_model_dir):
    greedy = Sampling(max_new_tokens=12)
    base_out = base_llm.generate(_requests(greedy))
    lora_out = adapter_llm.generate(_requests(greedy))
    assert [r.text for r in base_out] != [r.text for r in lora_out]
    digest = hashlib.sha256((adapter_dir / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert base_llm.identity.startswith("local:sharp@") and "+" not in base_llm.identity
    assert adapter_llm.identity == f"{base_llm.identity}+{digest[:12]}"
    # The adapter's batched greedy output equals its one-by-one output as well.
    assert [r.text for r in lora_out] == [adapter_llm.generate([r])[0].text for r in _requests(greedy)]


def test_cache_separates_base_and_adapter(base_llm, adapter_llm, tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    requests = _requests(Sampling(max_new_tokens=6))
    base = CachedLLM(base_llm, cache)
    base.generate(requests)
    lora = CachedLLM(adapter_llm, cache)
    lora_out = lora.generate(requests)
    assert (lora.hits, lora.misses) == (0, len(requests))
    assert not any(r.cached for r in lora_out)
    again = CachedLLM(base_llm, cache).generate(requests)
    assert all(r.cached for r in again)


def test_weights_hash_is_memoised_beside_the_folder(sharp_model_dir, monkeypatch):
    first = identity_mod.weights_hash(sharp_model_dir)
    memo = identity_mod.memo_path(sharp_model_dir)
    assert memo.parent == sharp_model_dir.parent and json.loads(memo.read_text())["sha256"] == first
    assert not any(p.name.startswith(".") for p in sharp_model_dir.iterdir())  # the model folder is untouched

    def no_hashing(path, chunk=0):
        raise AssertionError("weights were re-hashed although size and mtime are unchanged")

    monkeypatch.setattr(identity_mod, "file_sha256", no_hashing)
    assert identity_mod.weights_hash(sharp_model_dir) == first


def test_failed_batch_becomes_error_responses(base_llm, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("device fell over")

    monkeypatch.setattr(base_llm.model, "generate", broken)
    out = base_llm.generate(_requests(Sampling(max_new_tokens=4)))
    assert len(out) == len(QUESTIONS)
    assert all(not r.ok and "device fell over" in r.error and r.finish_reason == "error" for r in out)


def test_make_llm_local(sharp_model_dir, tmp_path, monkeypatch):
    from factory.llm import make_llm
    from factory.params.config import Params

    monkeypatch.chdir(tmp_path)
    params = Params()
    params.llm.model = str(tmp_path / "missing")
    with pytest.raises(FactoryError, match="prepare-model"):
        make_llm(params)
    params.llm.model = str(sharp_model_dir)
    params.llm.device = "cpu"
    with pytest.raises(FactoryError, match="adapter folder"):
        make_llm(params, adapter_path=tmp_path / "no-adapter")
    llm = make_llm(params)
    assert isinstance(llm, CachedLLM) and llm.backend == "local" and llm.identity.startswith("local:sharp@")
    (resp,) = llm.generate(_requests(Sampling(max_new_tokens=3))[:1])
    assert resp.ok and (tmp_path / "data" / "cache" / "responses.sqlite").exists()
    llm.close()


def test_int8_quantizes_every_linear_layer_and_names_its_precision(sharp_model_dir, adapter_dir):
    """llm.dtype int8 on the CPU: the linear layers (the untied output projection too) are int8, the
    adapter merged in first (its effect kept), and the identity says int8, so no fp32 reply is served
    for an int8 call or the other way round."""
    import torch

    cfg = _cpu(sharp_model_dir, batch_size=4).model_copy(update={"dtype": "int8"})
    base, adapted = LocalLLM(cfg), LocalLLM(cfg, adapter_path=adapter_dir)
    fp32 = LocalLLM(_cpu(sharp_model_dir, batch_size=4))
    assert base.identity == fp32.identity.removesuffix(":float32") + ":int8"
    assert adapted.identity.startswith(base.identity + "+")
    linear = sum(isinstance(m, torch.nn.Linear) for m in fp32.model.modules())
    for llm in (base, adapted):
        quantized = [m for m in llm.model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
        assert len(quantized) == linear and all(m.weight().dtype == torch.qint8 for m in quantized)
        assert not any(isinstance(m, torch.nn.Linear) for m in llm.model.modules())
    greedy = Sampling(max_new_tokens=12)
    base_out, adapted_out = base.generate(_requests(greedy)), adapted.generate(_requests(greedy))
    assert all(r.ok for r in base_out + adapted_out)
    assert [r.text for r in base_out] != [r.text for r in adapted_out]  # the merged adapter still acts


def test_int8_logits_stay_close_to_fp32(sharp_model_dir):
    """int8 weights change the numbers a little, not the model: next-token logits off by a tenth of their
    spread on a random tiny model whose weights were scaled 8x (a wrong scale or a lost layer is off by
    more than the spread itself). How often the real model's replies agree: bench/llama_server.py."""
    import torch

    fp32 = LocalLLM(_cpu(sharp_model_dir, batch_size=4))
    int8 = LocalLLM(_cpu(sharp_model_dir, batch_size=4).model_copy(update={"dtype": "int8"}))
    ids = torch.tensor([fp32._prompt(r) for r in _requests(Sampling())[:1]])
    with torch.inference_mode():
        a, b = fp32.model(ids).logits[0], int8.model(ids).logits[0]
    spread = a.std()
    assert ((a - b).abs().mean() / spread) < 0.2


def test_int8_on_a_gpu_runs_as_auto(sharp_model_dir, monkeypatch):
    """The demo profile's int8 is a CPU format: on a GPU the backend runs bf16 and says so."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    llm = LocalLLM(LLMParams(model=str(sharp_model_dir), device="auto", dtype="int8"))
    assert llm.device == "cuda" and not llm.int8 and llm.dtype == torch.bfloat16
    assert llm.identity.endswith(":bfloat16")
