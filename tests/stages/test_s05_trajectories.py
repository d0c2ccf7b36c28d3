"""Stage trajectories end to end in a tmp project: scripted policy, rationalization, resume, skip, tiny
model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.agent.scripted import ScriptedPolicyLLM
from factory.cli import main
from factory.llm.base import ChatResponse
from factory.params.config import Params
from factory.retrieval.bm25 import BM25Retriever
from factory.utils import paths
from factory.utils.io import read_json, write_json
from schemas import read_rows, write_parquet

DATASETS = ("hotpotqa", "musique")  # the datasets the shared corpora hold official train files of


def make_project(root: Path, ingested, train: int = 4, heldout: int = 3) -> list[dict]:
    """data/interim + a BM25 index for a few questions of each dataset (train and held-out from official
    train, test from official dev), written with the library."""
    questions = []
    for ds in DATASETS:
        for split, n in (("train", train), ("heldout", heldout), ("test", heldout)):
            questions += [q for q in ingested.questions if q["dataset"] == ds and q["split"] == split][:n]
    pids = {p["pid"] for q in questions for p in q["passages"]}
    passages = [p for p in ingested.passages if p["pid"] in pids]
    write_parquet(questions, root / paths.QUESTIONS, "question")
    write_parquet(passages, root / paths.PASSAGES, "passage")
    (root / paths.CONTAMINATION).write_text("")  # decontamination flagged none of them
    BM25Retriever.build(passages).save(root / paths.INDEX_DIR)
    return questions


def start_chain(root: Path, variant: str, seed: int = 0) -> None:
    """The chain's init decision (what `factory bootstrap --round -1` writes): round 0 may run."""
    write_json(root / paths.init_decision(variant, seed), {"stop": False, "reason": None})


@pytest.fixture
def project(tmp_path, monkeypatch, ingested):
    monkeypatch.chdir(tmp_path)
    questions = make_project(tmp_path, ingested)
    start_chain(tmp_path, "backtrace")
    return questions


def use_policy(monkeypatch, make):
    """Inject a test policy where generation and evaluation build their LLM (params can only name
    local|openai)."""
    monkeypatch.setattr("factory.execution.round.make_policy_llm", lambda params, policy: make())


def sets(**kw) -> list[str]:
    out = []
    for k, v in kw.items():
        out += ["--set", f"{k.replace('__', '.')}={json.dumps(v)}"]
    return out


def test_scripted_round_writes_one_record_per_question_and_sample(project, monkeypatch):
    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    argv = [
        "trajectories",
        "--variant",
        "backtrace",
        "--round",
        "0",
        *sets(trajectories__n_questions=6, trajectories__samples=2),
    ]
    assert main(argv) == 0
    rows = read_rows(paths.trajectories("backtrace", 0))
    keys = [(r["question_id"], r["sample"]) for r in rows]
    assert len(rows) == 12 and len(set(keys)) == 12
    assert {r["split"] for r in rows} == {"train"} and {r["dataset"] for r in rows} == set(DATASETS)
    assert all(r["status"] == "ok" and r["correct"] and r["policy"] == "scripted" for r in rows)
    m = read_json(paths.stage_metrics("trajectories", "backtrace", 0))
    assert m["status"] == "done" and m["policy"] == "base" and m["questions"] == 6 and m["samples"] == 2
    o = m["overall"]
    assert (
        sum(o["status"].values()) == o["trajectories"] == 12 and o["em"] == 1.0 and o["answered_rate"] == 1.0
    )
    assert sum(d["trajectories"] for d in m["by_dataset"].values()) == 12 and set(m["by_dataset"]) == set(
        DATASETS
    )
    assert o["mean_steps"] >= 3 and o["mean_triplets"] >= 1 and o["tokens"]["prompt"] > 0
    assert not any(p.name.endswith(".shards") for p in paths.trajectories("backtrace", 0).parent.iterdir())


def test_a_question_decontamination_flagged_is_never_drawn(project, monkeypatch):
    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    train = [q["question_id"] for q in project if q["split"] == "train"]
    flagged = {"question_id": train[0], "rule": "near_duplicate", "eval_set": "hotpotqa/dev_sample.json"}
    paths.CONTAMINATION.write_text(json.dumps(flagged) + "\n")
    argv = [
        "trajectories",
        "--variant",
        "backtrace",
        "--round",
        "0",
        *sets(trajectories__n_questions=len(train)),
    ]
    assert main(argv) == 1  # the flagged question leaves the split one short of the sample: refused
    assert main([*argv, *sets(trajectories__allow_fewer=True)]) == 0  # all there are, said in the metrics
    drawn = {r["question_id"] for r in read_rows(paths.trajectories("backtrace", 0))}
    assert drawn == set(train) - {train[0]}  # every other training question, the flagged one never
    m = read_json(paths.stage_metrics("trajectories", "backtrace", 0))
    assert (m["asked"], m["questions"]) == (len(train), len(train) - 1)


def test_a_split_too_small_for_the_sample_stops_before_any_work(project, monkeypatch, capsys):
    def no_llm():
        raise AssertionError("the model was built: work began")

    use_policy(monkeypatch, no_llm)
    argv = ["trajectories", "--variant", "backtrace", "--round", "0", *sets(trajectories__n_questions=1000)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        "asked 1000 training questions (trajectories.n_questions), 8 available (hotpotqa 4, musique 4)" in err
    )
    assert "corpora.hotpotqa=[" in err and "docs/corpora.md" in err and "trajectories.allow_fewer=true" in err
    assert not paths.trajectories("backtrace", 0).exists()


class WrongUnlessHinted(ScriptedPolicyLLM):
    """Answers wrongly unless the prompt carries the rationalization hint."""

    def _one(self, request):
        user = request.messages[1][1]
        if "Hint:" not in user and user.startswith("Question:") and "Look up:" not in user:
            text = "Thought: I think so.\nSufficient: yes\nAnswer: certainly not this"
            return ChatResponse(text, prompt_tokens=5, completion_tokens=8)
        return super()._one(request)


def test_rationalization_adds_hint_free_records_for_all_wrong_questions(project, monkeypatch):
    use_policy(monkeypatch, lambda: WrongUnlessHinted(project))
    params = Params(trajectories={"n_questions": 3, "samples": 2, "rationalize": True, "shard_size": 2})
    from factory.stages import s05_trajectories

    m = s05_trajectories.run(params, "backtrace", 0)
    rows = read_rows(paths.trajectories("backtrace", 0))
    ordinary = [r for r in rows if not r["rationalized"]]
    hinted = [r for r in rows if r["rationalized"]]
    assert len(ordinary) == 6 and not any(r["correct"] for r in ordinary)
    assert len(hinted) == 3 and all(r["correct"] and r["sample"] == 2 for r in hinted)
    for r in hinted:
        recorded = "\n".join(msg["content"] for s in r["steps"] for msg in s["messages"])
        assert "Hint:" not in recorded and "correct answer is" not in recorded
    assert m["overall"]["trajectories"] == 6 and m["overall"]["em"] == 0.0  # hints never inflate EM
    assert m["rationalized"]["trajectories"] == 3 and m["rationalized"]["correct"] == 3


def test_killed_run_resumes_to_the_same_file(project, monkeypatch, tmp_path, ingested):
    from factory.execution import generate
    from factory.stages import s05_trajectories

    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    params = Params(trajectories={"n_questions": 7, "samples": 2, "shard_size": 2})
    out = paths.trajectories("backtrace", 0)
    real = generate.run_trajectories
    calls = []

    def dies_in_third_shard(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is killed mid-shard
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "run_trajectories", dies_in_third_shard)
    with pytest.raises(KeyboardInterrupt):
        s05_trajectories.run(params, "backtrace", 0)
    assert not out.exists() and len(list((out.parent / ".round_0.shards").glob("shard_*.parquet"))) == 2
    monkeypatch.setattr(generate, "run_trajectories", real)
    s05_trajectories.run(params, "backtrace", 0)
    resumed = out.read_bytes()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.chdir(fresh)
    make_project(fresh, ingested)
    start_chain(fresh, "backtrace")
    s05_trajectories.run(params, "backtrace", 0)
    assert out.read_bytes() == resumed
    assert len(read_rows(out)) == 14


def test_a_round_after_the_stop_point_is_skipped(project, monkeypatch):
    from factory.stages import s05_trajectories

    write_json(paths.decision("backtrace", 0), {"stop": True, "reason": "held-out EM has not improved"})
    m = s05_trajectories.run(Params(), "backtrace", 1)
    assert m == {
        "variant": "backtrace",
        "round": 1,
        "seed": 0,
        "status": "skipped",
        "reason": "held-out EM has not improved",
    }
    assert read_rows(paths.trajectories("backtrace", 1)) == []
    assert read_json(paths.stage_metrics("trajectories", "backtrace", 1))["status"] == "skipped"


def test_missing_inputs_are_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    start_chain(tmp_path, "random")
    assert main(["trajectories", "--variant", "random", "--round", "0"]) == 1


@pytest.mark.slow
def test_tiny_model_round_end_to_end_with_cache(project, tiny_model_dir):
    argv = [
        "trajectories",
        "--variant",
        "backtrace",
        "--round",
        "0",
        *sets(
            llm__model=str(tiny_model_dir),
            llm__max_new_tokens=8,
            llm__batch_size=8,
            trajectories__n_questions=2,
            trajectories__samples=2,
            trajectories__shard_size=2,
            agent__max_iterations=2,
            agent__repair_attempts=0,
        ),
    ]
    assert main(argv) == 0
    out = paths.trajectories("backtrace", 0)
    rows = read_rows(out)
    assert sorted((r["question_id"], r["sample"]) for r in rows) == sorted(
        {(r["question_id"], s) for r in rows for s in (0, 1)}
    )
    assert len(rows) == 4 and all(
        r["status"] in ("ok", "max_iterations", "parse_error", "llm_error") for r in rows
    )
    assert all(r["steps"] and r["model"] and r["policy"] == "base" for r in rows)
    m = read_json(paths.stage_metrics("trajectories", "backtrace", 0))
    assert sum(m["overall"]["status"].values()) == 4 and m["cache"]["misses"] > 0
    first, first_bytes = read_rows(out), out.read_bytes()
    assert main(argv) == 0  # a second run is answered from the response cache
    m2 = read_json(paths.stage_metrics("trajectories", "backtrace", 0))
    # the local backend's replies, unusable ones too, are fixed by its identity: all replayed
    assert m2["cache"]["misses"] == 0 and m2["cache"]["hits"] == m["cache"]["misses"] + m["cache"]["hits"]
    assert read_rows(out) == first  # latency included: the cache replays what was measured
    assert out.read_bytes() == first_bytes  # a rerun answered from the cache writes the same bytes
