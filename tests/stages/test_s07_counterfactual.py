"""`factory counterfactual` in a tmp project against the mock OpenAI server: rows, metrics, cache, resume,
skipped rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.cli import main
from factory.params.config import Params
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import read_json
from schemas import COUNTERFACTUAL, read_rows, write_parquet
from tests.causal.test_reask import key_script, key_trajectories
from tests.mock_openai_server import MockOpenAIServer
from tests.variants.test_sets import make_labels

V, R = "backtrace", 0
KNOWN = frozenset({"What is the answer to q_known?"})


def write_round(root, trajectories, sq, variant=V, round_=R) -> None:
    labels = [make_labels(t, sq[t["trajectory_id"]]) for t in trajectories]
    write_parquet(trajectories, root / paths.trajectories(variant, round_), "trajectory")
    write_parquet(labels, root / paths.labels(variant, round_), "labels")


def params_for(server, **counterfactual) -> Params:
    return Params(
        llm={"backend": "openai", "base_urls": [server.base_url], "model": "mock-model", "backoff_s": 0.01},
        counterfactual={"shard_size": 2, **counterfactual},
        relevance={"bootstrap_samples": 50},
    )


@pytest.fixture(scope="module")
def server():
    trajectories, _, keys = key_trajectories()
    with MockOpenAIServer(script=key_script(keys, knows=KNOWN)) as s:
        yield s


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trajectories, sq, _ = key_trajectories()
    write_round(tmp_path, trajectories, sq)
    return trajectories


def test_stage_writes_rows_metrics_and_replays_from_the_cache(project, server):
    from factory.stages import s07_counterfactual

    before = server.state.completions
    m = s07_counterfactual.run(params_for(server), V, R)
    sent = server.state.completions - before
    rows = read_rows(paths.counterfactual(V, R))
    assert [f.name for f in COUNTERFACTUAL] == list(rows[0])
    assert len(rows) == 4 * 7 == m["llm_calls"]["planned"] and m["llm_calls"]["per_trajectory"] == 7
    assert m["status"] == "ok" and (m["trajectories"], m["correct"], m["reasked"]) == (5, 4, 4)
    assert m["llm_calls"]["sent_this_run"] == sent == m["llm_calls"]["cache"]["misses"] < 28
    assert m["random_seeds"] == [41, 42, 43] and {r["random_seed"] for r in rows} == {None, 41, 42, 43}
    assert {r["policy"] for r in rows} == {"base"} and m["policy"] == "base"
    assert m["counts"]["parametric"] == 1 and m["groups"]["all"]["accuracy"]["closed_book"]["value"] == 0.25
    acc = m["groups"]["all"]["accuracy"]
    assert (acc["full"]["value"], acc["without_sq"]["value"], acc["only_sq"]["value"]) == (1.0, 0.75, 0.5)
    assert set(m["verdicts"]) == {"all", "hotpotqa", "2wikimultihopqa", "musique"}
    assert "only 3 such trajectories, 10 needed" in m["verdicts"]["all"]["line"]
    assert read_json(paths.stage_metrics("counterfactual", V, R))["llm_calls"] == m["llm_calls"]
    first = paths.counterfactual(V, R).read_bytes()

    before = server.state.completions
    again = s07_counterfactual.run(params_for(server), V, R)
    assert server.state.completions == before  # every call answered from the response cache
    assert again["llm_calls"]["cache"] == {"hits": sent, "misses": 0}
    assert paths.counterfactual(V, R).read_bytes() == first


def test_killed_run_resumes_to_the_same_file(project, server, monkeypatch, tmp_path):
    from factory.causal import reask as reasking
    from factory.stages import s07_counterfactual

    params = params_for(server, shard_size=1)
    params.llm.cache = False
    real, calls = reasking.reask, []

    def dies_in_third_shard(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is killed mid-shard
        return real(*args, **kwargs)

    monkeypatch.setattr(reasking, "reask", dies_in_third_shard)
    with pytest.raises(KeyboardInterrupt):
        s07_counterfactual.run(params, V, R)
    out = paths.counterfactual(V, R)
    assert not out.exists() and len(list((out.parent / ".round_0.shards").glob("shard_*.parquet"))) == 2
    monkeypatch.setattr(reasking, "reask", real)
    before = server.state.completions
    m = s07_counterfactual.run(params, V, R)
    assert m["llm_calls"]["sent_this_run"] == server.state.completions - before  # only the last two shards
    resumed = out.read_bytes()
    assert len(read_rows(out)) == 28 and not (out.parent / ".round_0.shards").exists()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.chdir(fresh)
    trajectories, sq, _ = key_trajectories()
    write_round(fresh, trajectories, sq)
    full = s07_counterfactual.run(params, V, R)
    assert paths.counterfactual(V, R).read_bytes() == resumed
    assert full["llm_calls"]["sent_this_run"] > m["llm_calls"]["sent_this_run"]


def test_sample_and_conditions_narrow_the_cost(project, server):
    argv = [
        "counterfactual", "--variant", V, "--round", str(R),
        "--set", f"llm.base_urls=[{server.base_url}]", "--set", "llm.backend=openai",
        "--set", "llm.model=mock-model", "--set", "model.base=served",
        "--set", "counterfactual.max_trajectories=2",
        "--set", "counterfactual.conditions=[full, without_sq]", "--set", "relevance.bootstrap_samples=20",
    ]  # fmt: skip
    Path("served").mkdir()  # the served model's weights (a stage on the openai backend needs them locally)
    assert main(argv) == 0
    m = read_json(paths.stage_metrics("counterfactual", V, R))
    assert m["reasked"] == 2 and m["llm_calls"]["planned"] == 4 and m["llm_calls"]["per_trajectory"] == 2
    assert "necessity not computed (without_random not run)" in m["verdicts"]["all"]["line"]
    assert len({r["trajectory_id"] for r in read_rows(paths.counterfactual(V, R))}) == 2


def test_skipped_round_and_missing_inputs(tmp_path, monkeypatch, server):
    from factory.stages import s07_counterfactual

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FactoryError, match="factory trajectories --variant backtrace --round 0"):
        s07_counterfactual.run(params_for(server), V, R)
    write_parquet([], paths.trajectories(V, R), "trajectory")
    m = s07_counterfactual.run(params_for(server), V, R)
    assert m["status"] == "skipped" and read_rows(paths.counterfactual(V, R)) == []
    assert json.loads(paths.stage_metrics("counterfactual", V, R).read_text())["status"] == "skipped"
    trajectories, _, _ = key_trajectories()
    write_parquet(trajectories, paths.trajectories(V, 1), "trajectory")
    with pytest.raises(FactoryError, match="factory backtrace --variant backtrace --round 1"):
        s07_counterfactual.run(params_for(server), V, 1)
    assert main(["counterfactual", "--variant", V, "--round", "1"]) == 1  # a human message, exit 1
