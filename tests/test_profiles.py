"""Named profiles: nothing the demo shrinks reaches another profile, each prints a params file that loads
back to itself, and a run on a served model without its servers or name stops before any work (without
its weights, only the stages that load them: prepare-model, train)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from factory.cli import main, weight_stages
from factory.params.config import Params, load_params
from factory.params.file import changed_keys, flat
from factory.params.profiles import PROFILES, explain, profile_params, render_profile
from factory.params.served import served_model_missing

ROOT = Path(__file__).resolve().parents[1]
SERVED = ["llm.base_urls=[http://gpu1:8000/v1]", "llm.model=llama"]


def test_the_demo_is_params_yaml_and_every_key_it_shrinks_comes_back_in_the_other_profiles():
    shrunk = changed_keys(load_params(ROOT / "params.yaml"))
    assert "agent.passage_chars" in shrunk and "trajectories.rationalize" in shrunk  # the list is real
    assert set(shrunk) == set(PROFILES["demo"].settings)  # every demo value is a profile setting with a why
    typed = flat(dict(Params()))
    for name in ("pilot", "full", "hosted"):
        mine = flat(dict(profile_params(name)))
        survivors = [
            key for key in shrunk if mine[key] != typed[key] and not PROFILES[name].settings.get(key, None)
        ]
        assert not survivors, f"the {name} profile keeps the demo's {survivors}"
        for key in shrunk:  # restored: the typed default, or the profile's own value with its reason
            setting = PROFILES[name].settings.get(key)
            assert mine[key] == (setting.value if setting else typed[key])
            assert setting is None or setting.why.strip()


@pytest.mark.parametrize("name", list(PROFILES))
def test_a_profile_prints_a_params_file_that_loads_back_to_it(name, tmp_path, capsys):
    assert main(["params", "--profile", name]) == 0
    out = capsys.readouterr()
    assert out.out == render_profile(name, profile_params(name))
    (tmp_path / "p.yaml").write_text(out.out)
    assert load_params(tmp_path / "p.yaml") == profile_params(name)
    for key, setting in PROFILES[name].settings.items():
        assert setting.why and f"{name} profile (typed default" in out.out
        node = yaml.safe_load(out.out)
        for part in key.split("."):
            node = node[part]
        assert node == setting.value  # the profile's keys are written out, not commented
    needs_server = PROFILES[name].settings.get("llm.backend") is not None
    hint = (
        f"before a stage runs on the {name} profile's params: not set: llm.base_urls, llm.model, model.base"
    )
    assert (hint in out.err) == needs_server


def test_the_full_profile_runs_a_served_model_at_the_protocols_size(capsys):
    full = profile_params("full")
    assert full.llm.backend == "openai" and full.bootstrap.seeds == [0, 1, 2]
    assert (full.trajectories.n_questions, full.trajectories.samples, full.evaluate.n_questions) == (
        1000,
        4,
        500,
    )
    assert full.agent.passage_chars == Params().agent.passage_chars  # not the demo's 300
    assert main(["params", "--profile", "full", "--cost"]) == 0
    assert "whole run" in capsys.readouterr().out
    assert main(["params", "--profile", "full", "--explain"]) == 0
    table = capsys.readouterr().out
    assert table == explain("full") and "| `bootstrap.seeds` | [0, 1, 2] | [0] | three repeats" in table


def test_a_stage_on_a_served_profile_without_its_model_stops_before_reading_anything(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main(["params", "--profile", "full", "--output", "params.yaml"]) == 0
    capsys.readouterr()
    stages = (["prepare-model"], ["ingest"], ["trajectories", "--variant", "backtrace", "--round", "0"])
    stages += (["train", "--variant", "backtrace", "--round", "0"],)
    for argv in stages:
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "llm.backend is openai (the full profile), but not set: llm.base_urls" in err
        assert "llm.model (the name the servers serve" in err
        # the weights: only for the stages that load them
        assert ("model.base (a local folder" in err) == (argv[0] in ("prepare-model", "train"))
        # the advice re-writes the user's file, keeping its corpora: never `--profile ... --output`
        assert "vllm serve" in err and "`factory params --params params.yaml --set 'llm.base_urls=[" in err
        assert "--profile" not in err
        assert "\n" not in err.strip()  # one paragraph
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # nothing read or written


def test_the_hosted_profile_needs_a_url_and_a_name_and_no_weights_but_to_train(tmp_path, monkeypatch, capsys):
    hosted = profile_params("hosted", SERVED)
    assert hosted.llm.backend == "openai" and hosted.bootstrap.max_rounds == 1
    assert hosted.model.base == Params().model.base  # not set: a hosted API has no weights on disk
    assert served_model_missing(hosted, weights=False) == []
    assert [m.split(" ", 1)[0] for m in served_model_missing(hosted)] == ["model.base"]
    assert weight_stages() == ["prepare-model", "train"]
    monkeypatch.chdir(tmp_path)
    assert main(["params", "--profile", "hosted", "--output", "params.yaml"]) == 0
    err = capsys.readouterr().err
    assert "not set: llm.base_urls, llm.model, model.base" in err
    assert "model.base only for prepare-model, train" in err
    assert main(["ingest"]) == 1  # no URL, no served name: stops before reading anything
    err = capsys.readouterr().err
    assert "llm.base_urls (the servers" in err and "llm.model (the name" in err
    assert "model.base (a local folder" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_servers_a_served_name_and_local_weights_are_all_a_served_model_needs(tmp_path):
    weights = tmp_path / "Llama"
    weights.mkdir()
    assert served_model_missing(profile_params("full", [*SERVED, f"model.base={weights}"])) == []
    missing = served_model_missing(profile_params("full", [*SERVED, "model.base=/nowhere/Llama"]))
    assert [m.split(" ", 1)[0] for m in missing] == ["model.base"]
    assert served_model_missing(profile_params("demo")) == []  # the local backend needs none of it


def test_an_unknown_profile_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        main(["params", "--profile", "giant"])
    assert "invalid choice: 'giant'" in capsys.readouterr().err


def test_a_bad_set_on_a_profile_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("kept: as it was\n")
    assert (
        main(["params", "--profile", "full", "--set", "evaluate.n_questions=none", "--output", "params.yaml"])
        == 1
    )
    assert "evaluate.n_questions" in capsys.readouterr().err
    assert (tmp_path / "params.yaml").read_text() == "kept: as it was\n"


def test_the_demos_reason_for_two_iterations_is_what_the_cost_formula_gives():
    from factory.bootstrap.cost import calls_per_trajectory

    why = PROFILES["demo"].settings["agent.max_iterations"].why
    demo, typed = calls_per_trajectory(profile_params("demo")), calls_per_trajectory(Params())
    assert f"at most {demo} LLM calls a trajectory instead of {typed}" in why


def test_the_advice_of_the_preflight_keeps_the_users_corpora_and_tells_a_missing_folder_apart(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    mine = "corpora.musique=[/data/mine/musique_ans_v1.0_train.jsonl]"
    assert main(["params", "--profile", "pilot", "--set", mine, "--output", "params.yaml"]) == 0
    capsys.readouterr()
    assert main(["train", "--variant", "backtrace", "--round", "0"]) == 1
    err = capsys.readouterr().err
    advice = err.split("`factory params ", 1)[1].split("`", 1)[0]
    assert main(["params", *shlex.split(advice)]) == 0  # the command the message gives, as given
    after = load_params("params.yaml")
    assert after.corpora["musique"] == ["/data/mine/musique_ans_v1.0_train.jsonl"]  # kept
    assert after.llm.base_urls == ["http://gpu1:8000/v1"] and after.llm.model == "llama"
    capsys.readouterr()
    assert main(["train", "--variant", "backtrace", "--round", "0"]) == 1  # the example's weights: elsewhere
    err = capsys.readouterr().err
    assert (
        "llm.backend is openai (the pilot profile), but folder missing: /models/Llama-3.1-8B-Instruct" in err
    )
    assert "not set" not in err and "--set model.base to the folder holding them" in err
    # a params file that names no profile: "these params"
    text = (tmp_path / "params.yaml").read_text().split("\n", 1)[1]
    (tmp_path / "params.yaml").write_text(text)
    assert main(["prepare-model"]) == 1
    assert "llm.backend is openai (these params), but folder missing" in capsys.readouterr().err
