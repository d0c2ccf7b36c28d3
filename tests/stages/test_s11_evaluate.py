"""Stage evaluate: greedy policy on held-out/test, same questions every round, skip, tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.agent.scripted import ScriptedPolicyLLM
from factory.cli import main
from factory.params.config import Params
from factory.stages import s11_evaluate
from factory.utils import paths
from factory.utils.io import read_json, write_json
from schemas import read_rows
from tests.stages.test_s05_trajectories import DATASETS, make_project, sets, start_chain, use_policy


@pytest.fixture
def project(tmp_path, monkeypatch, ingested):
    monkeypatch.chdir(tmp_path)
    questions = make_project(tmp_path, ingested)
    start_chain(tmp_path, "backtrace")
    return questions


def test_base_model_heldout_evaluation_feeds_the_stopping_rule(project, monkeypatch):
    from factory.bootstrap.stop import heldout_scores

    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    argv = ["evaluate", "--variant", "base", "--split", "heldout"]
    assert main([*argv, *sets(evaluate__n_questions=6, trajectories__n_questions=8)]) == 0
    m = read_json(paths.base_eval_metrics("heldout"))
    rows = read_rows(paths.base_eval_data("heldout"))
    assert (
        len(rows) == 6
        and {r["split"] for r in rows} == {"heldout"}
        and {r["dataset"] for r in rows} == set(DATASETS)
    )
    assert m["status"] == "done" and m["policy"] == "base" and m["questions"] == 6
    assert m["em"] == m["overall"]["em"] == 1.0 and m["f1"] == 1.0
    assert (
        set(m["by_dataset"]) == set(DATASETS)
        and sum(d["trajectories"] for d in m["by_dataset"].values()) == 6
    )
    assert {r["qtype"] for r in rows} == set(m["by_qtype"]) and {r["route"] for r in rows} == set(
        m["by_route"]
    )
    assert all(r["seed"] == Params().evaluate.seed and r["sample"] == 0 for r in rows)
    assert heldout_scores("base") == {r["question_id"]: 1.0 for r in rows}


def test_same_questions_every_round_and_policy_after_the_round(project, monkeypatch):
    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    # round 0 produced no adapter (empty set): the policy after it falls back to the base model
    write_json(paths.adapter_dir("backtrace", 0) / "status.json", {"status": "empty"})
    write_json(paths.decision("backtrace", 0), {"stop": False, "reason": None})
    write_json(paths.adapter_dir("backtrace", 1) / "status.json", {"status": "empty"})
    params = Params(evaluate={"n_questions": 5})
    m0 = s11_evaluate.run(params, "backtrace", 0, "test")
    m1 = s11_evaluate.run(params, "backtrace", 1, "test")
    q0 = [r["question_id"] for r in read_rows(paths.eval_data("backtrace", 0, "test"))]
    q1 = [r["question_id"] for r in read_rows(paths.eval_data("backtrace", 1, "test"))]
    assert q0 == q1 and len(q0) == 5
    assert m0["policy"] == m1["policy"] == "base" and m1["round"] == 1
    # and for every protocol seed: the one base-model evaluation pairs with every chain's
    start_chain(Path("."), "backtrace", seed=1)
    write_json(paths.adapter_dir("backtrace", 0, 1) / "status.json", {"status": "empty"})
    s11_evaluate.run(params, "backtrace", 0, "test", seed=1)
    assert [r["question_id"] for r in read_rows(paths.eval_data("backtrace", 0, "test", 1))] == q0
    assert read_json(paths.eval_metrics("backtrace", 1, "test"))["overall"]["em"] == 1.0


def test_a_round_after_the_stop_point_is_recorded_skipped(project):
    write_json(paths.decision("backtrace", 0), {"stop": True, "reason": "max_rounds (1) reached"})
    m = s11_evaluate.run(Params(), "backtrace", 1, "heldout")
    assert m["status"] == "skipped" and m["reason"] == "max_rounds (1) reached"
    assert read_json(paths.eval_metrics("backtrace", 1, "heldout"))["status"] == "skipped"
    assert read_rows(paths.eval_data("backtrace", 1, "heldout")) == []


@pytest.mark.slow
def test_tiny_model_greedy_evaluation_is_reproducible(project, tiny_model_dir):
    argv = [
        "evaluate",
        "--variant",
        "base",
        "--split",
        "test",
        *sets(
            llm__model=str(tiny_model_dir),
            llm__max_new_tokens=8,
            llm__cache=False,
            evaluate__n_questions=2,
            agent__max_iterations=1,
            agent__repair_attempts=0,
        ),
    ]
    assert main(argv) == 0
    first = read_rows(paths.base_eval_data("test"))
    m = read_json(paths.base_eval_metrics("test"))
    assert (
        len(first) == 2
        and sum(m["overall"]["status"].values()) == 2
        and m["cache"] == {"hits": 0, "misses": 0}
    )
    assert main(argv) == 0  # greedy, no cache: the same outputs again

    def strip(rows):
        return [[s["output"] for s in r["steps"]] for r in rows]

    assert strip(read_rows(paths.base_eval_data("test"))) == strip(first)


def test_the_base_heldout_evaluation_checks_every_sample_of_the_protocol_before_any_work(
    project, monkeypatch, capsys
):
    """The protocol's first LLM stage: a training split too small for trajectories.n_questions stops the
    run here, not in round 0; with the demo's allow_fewer the evaluation runs."""

    def no_llm():
        raise AssertionError("the model was built: work began")

    use_policy(monkeypatch, no_llm)
    argv = ["evaluate", "--variant", "base", "--split", "heldout", *sets(evaluate__n_questions=6)]
    assert main([*argv, *sets(trajectories__n_questions=1000)]) == 1
    err = capsys.readouterr().err
    assert "asked 1000 training questions (trajectories.n_questions), 8 available" in err
    assert "held-out questions" not in err  # the held-out sample fits
    assert not paths.base_eval_metrics("heldout").exists()
    use_policy(monkeypatch, lambda: ScriptedPolicyLLM(project))
    allowed = sets(trajectories__n_questions=1000, trajectories__allow_fewer=True, evaluate__n_questions=7)
    assert main([*argv[:5], *allowed, *sets(evaluate__allow_fewer=True)]) == 0
    m = read_json(paths.base_eval_metrics("heldout"))
    assert (m["asked"], m["questions"]) == (7, 6)
