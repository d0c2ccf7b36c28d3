"""The sets as the ecosystem reads them: a published config loaded with `datasets.load_dataset` trains
with TRL's SFTTrainer as it is (assistant-only loss, tiny test model), every line of a round's
train.jsonl passes the checks chat fine-tuning APIs apply (roles, non-empty content, a final assistant
turn, a token count under the model's context), and `load_dataset(<folder>, "seed_0")` returns that
folder's own rows whatever other published folder was loaded into the same cache before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from factory.cli import main
from factory.utils import paths
from factory.utils.io import write_json
from factory.variants.publish import data_fingerprint
from schemas import write_parquet
from tests.stages.test_s08_variants import _cli, _traj, _write_round, question_pool  # noqa: F401
from tests.stages.test_s10_train import example, write_set
from tests.variants.publishable import make_publishable

ROLES = {"system", "user", "assistant"}


def chat_jsonl_problems(path: Path, tokenizer, max_tokens: int) -> list[str]:
    """What a chat fine-tuning API (OpenAI's format) would reject, one message per line at fault."""
    problems = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON ({exc})")
            continue
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not messages:
            problems.append(f"line {n}: no 'messages' list")
            continue
        if set(record) != {"messages"}:
            problems.append(f"line {n}: keys other than 'messages': {sorted(set(record) - {'messages'})}")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                role = m.get("role") if isinstance(m, dict) else None
                problems.append(f"line {n}: message {i} has role {role!r}")
            elif not isinstance(m.get("content"), str) or not m["content"].strip():
                problems.append(f"line {n}: message {i} ({m['role']}) has empty content")
            elif m["role"] == "system" and i != 0:
                problems.append(f"line {n}: system message at position {i}")
        if messages[-1].get("role") != "assistant" if isinstance(messages[-1], dict) else True:
            problems.append(f"line {n}: the last message is not the assistant's")
        if not problems or not problems[-1].startswith(f"line {n}:"):
            tokens = len(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))
            if tokens > max_tokens:
                problems.append(f"line {n}: {tokens} tokens, over the model's {max_tokens}")
    return problems


@pytest.fixture
def published(tmp_path, monkeypatch, question_pool):  # noqa: F811
    """The variants stage's round-0 backtrace set, published as the pipeline publishes it."""
    monkeypatch.chdir(tmp_path)
    write_parquet(question_pool["all"], paths.QUESTIONS, "question")
    _write_round("backtrace", 0, [_traj(q, "backtrace", 0) for q in question_pool["train"][:4]])
    assert _cli("backtrace", 0) == 0
    write_json(paths.METRICS / "summary.json", {"variants": {"backtrace": {"selected": {"0": {"round": 0}}}}})
    make_publishable(questions=False)
    assert main(["publish", "--set", "bootstrap.variants=[backtrace]", "--set", "bootstrap.seeds=[0]"]) == 0
    return tmp_path


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def test_every_train_jsonl_line_passes_the_chat_fine_tuning_checks(published, tokenizer, tiny_model_dir):
    from transformers import AutoConfig

    limit = AutoConfig.from_pretrained(str(tiny_model_dir)).max_position_embeddings
    path = paths.supervision_dir("backtrace", 0) / "train.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) >= 4  # at least one example per correct trajectory
    assert chat_jsonl_problems(path, tokenizer, limit) == []


def test_the_checks_catch_what_an_api_rejects(tmp_path, tokenizer):
    good = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    bad = [
        {"messages": good},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  "}]},
        {"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]},
        {"messages": [{"role": "tool", "content": "x"}, {"role": "assistant", "content": "a"}]},
        {"messages": good, "example_id": "x"},
        {"messages": [{"role": "user", "content": "word " * 300}, {"role": "assistant", "content": "a"}]},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in bad) + "\nnot json\n")
    problems = chat_jsonl_problems(path, tokenizer, max_tokens=100)
    assert [p.split(":")[0] for p in problems] == [f"line {n}" for n in (2, 3, 4, 5, 6, 7)]
    assert "empty content" in problems[0] and "last message" in problems[1] and "role 'tool'" in problems[2]
    assert "over the model's 100" in problems[4]


TRAINING_TEMPLATE = (  # the tiny model's ChatML template with the markers assistant-only loss needs
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\n' }}{% else %}{{ message['content'] + '<|im_end|>' + '\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@pytest.mark.slow
def test_a_published_config_trains_with_trl_sft_trainer_as_it_is(published, tiny_model_dir, tmp_path):
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    train = load_dataset(str(paths.PUBLISHED / "backtrace"), "seed_0", split="train")
    assert "messages" in train.column_names and len(train) >= 4
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        assistant_only_loss=True,
        chat_template_path=None,
        max_length=512,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    tok.chat_template = TRAINING_TEMPLATE
    trainer = SFTTrainer(model=model, args=config, train_dataset=train, processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    labelled = batch["labels"] != -100
    assert labelled.any() and (~labelled & (batch["attention_mask"] == 1)).any()  # prompt tokens unlabelled
    first = batch["input_ids"][0][labelled[0]]
    assert "<|im_end|>" in tok.decode(first)  # the assistant turn's end is learned
    result = trainer.train()
    assert trainer.state.global_step == 2
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert len(losses) == 2 and all(loss > 0 for loss in losses) and result.training_loss > 0


def _publish_set(project: Path, monkeypatch, dataset: str, ids: range) -> Path:
    """Publish a backtrace set of one seed (round 0: examples ``ids`` of ``dataset``) from the project at
    ``project``; returns its folder (every project's is ``data/published/backtrace``)."""
    project.mkdir(exist_ok=True)
    monkeypatch.chdir(project)
    rows = [
        {**example("backtrace", 0, i, "base"), "dataset": dataset, "question_id": f"{dataset}/q{i}"}
        for i in ids
    ]
    write_set("backtrace", 0, rows)
    write_json(paths.supervision_dir("backtrace", 0) / "stats.json", {"status": "built"})
    write_json(paths.METRICS / "summary.json", {"variants": {"backtrace": {"selected": {"0": {"round": 0}}}}})
    make_publishable()
    assert main(["publish", "--set", "bootstrap.variants=[backtrace]", "--set", "bootstrap.seeds=[0]"]) == 0
    return project / paths.PUBLISHED / "backtrace"


def _rows(folder: Path, cache: Path, **kwargs) -> list[tuple[str, str]]:
    """What the documented command returns, as (example id, dataset) pairs, through the cache ``cache``."""
    from datasets import load_dataset

    train = load_dataset(str(folder), "seed_0", split="train", cache_dir=str(cache), **kwargs)
    return sorted(zip(train["example_id"], train["dataset"], strict=True))


def _own(dataset: str, ids: range) -> list[tuple[str, str]]:
    return sorted((f"backtrace/r0/t{i}/1", dataset) for i in ids)


def _header(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text().split("---")[1])


def test_two_published_sets_load_their_own_rows_through_one_cache(tmp_path, monkeypatch):
    # datasets caches a local folder under <folder name>/<config>/0.0.0/<hash of the card's header>: two
    # folders named backtrace with equal headers used to share one entry (the second got the first's rows)
    cache = tmp_path / "hf-cache"
    first = _publish_set(tmp_path / "a", monkeypatch, "hotpotqa", range(0, 3))
    assert _rows(first, cache) == _own("hotpotqa", range(0, 3))
    other = _publish_set(tmp_path / "b", monkeypatch, "2wikimultihopqa", range(0, 2))  # another path
    assert _rows(other, cache) == _own("2wikimultihopqa", range(0, 2))

    before = _header(first)
    rewritten = _publish_set(tmp_path / "a", monkeypatch, "hotpotqa", range(3, 6))  # the same path
    assert rewritten == first
    after = _header(rewritten)
    # the same row count and sizes: only the data fingerprint tells the two sets apart
    assert after["dataset_info"]["splits"] == before["dataset_info"]["splits"]
    assert _rows(rewritten, cache) == _own("hotpotqa", range(3, 6))
    assert after["configs"][0]["description"] != before["configs"][0]["description"]
    assert _rows(other, cache) == _own("2wikimultihopqa", range(0, 2))  # its own entry, still valid

    fingerprint = data_fingerprint(rewritten)
    assert len(fingerprint) == 64 and fingerprint != data_fingerprint(other)
    assert f"data fingerprint {data_fingerprint(rewritten, 'seed_0')} " in after["configs"][0]["description"]
    assert f"Data fingerprint: `{fingerprint}`" in (rewritten / "README.md").read_text()
    same = _publish_set(tmp_path / "c", monkeypatch, "hotpotqa", range(3, 6))  # same inputs, same bytes
    published = sorted(p.relative_to(same) for p in same.rglob("*") if p.is_file())
    assert published == sorted(p.relative_to(rewritten) for p in rewritten.rglob("*") if p.is_file())
    assert all((same / p).read_bytes() == (rewritten / p).read_bytes() for p in published)
    assert str(tmp_path) not in (same / "README.md").read_text()


def test_force_redownload_rebuilds_a_published_set_from_its_own_files(tmp_path, monkeypatch):
    # the split sizes a rebuild is checked against were the cached entry's (another set's): it raised
    # NonMatchingSplitsSizesError; now they are the folder's own (its card's dataset_info)
    cache = tmp_path / "hf-cache"
    first = _publish_set(tmp_path / "a", monkeypatch, "hotpotqa", range(0, 12))
    assert _rows(first, cache) == _own("hotpotqa", range(0, 12))
    other = _publish_set(tmp_path / "b", monkeypatch, "2wikimultihopqa", range(0, 2))
    assert _rows(other, cache, download_mode="force_redownload") == _own("2wikimultihopqa", range(0, 2))
    assert _header(other)["dataset_info"]["splits"][0]["num_examples"] == 2
    assert _rows(first, cache, download_mode="force_redownload") == _own("hotpotqa", range(0, 12))
