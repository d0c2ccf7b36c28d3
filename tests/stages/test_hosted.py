"""The hosted profile end to end through the CLI, in a tmp project with no weights anywhere: a stand-in
for a hosted OpenAI-compatible API (the mock server answering with the SCRIPTED gold policy) runs
generation, backtracing, the variants, the causal check, the labels against gold and publishing; the
stages that load weights stop and name model.base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.agent.scripted import ScriptedPolicyLLM
from factory.cli import main
from factory.llm.base import ChatRequest
from factory.utils import paths
from factory.utils.io import read_json
from schemas import read_rows
from tests.mock_openai_server import MockOpenAIServer

KEY_ENV = "HOSTED_TEST_API_KEY"
SECRET = "sk-hosted-standin-0123456789"
VARIANTS = ["backtrace", "random"]
CUT = {  # dataset -> (file, records kept): official train and dev of two corpora, cut small
    "hotpotqa": [("dev_sample.json", 6), ("train_sample.json", 24)],
    "musique": [("dev_sample.jsonl", 6), ("train_sample.jsonl", 24)],
}


def cut_corpora(source: Path, out: Path) -> dict[str, list[str]]:
    """The first records of each official file, in its own format, under ``out`` (same file names, so
    their official split is told by the name as for the originals)."""
    corpora = {}
    for dataset, files in CUT.items():
        (out / dataset).mkdir(parents=True)
        corpora[dataset] = []
        for name, n in files:
            text = (source / dataset / name).read_text(encoding="utf-8")
            if name.endswith(".jsonl"):
                kept = "".join(line + "\n" for line in text.splitlines()[:n])
            else:
                kept = json.dumps(json.loads(text)[:n])
            (out / dataset / name).write_text(kept, encoding="utf-8")
            corpora[dataset].append(str(out / dataset / name))
    return corpora


def agent_script(project: Path):
    """The mock server's replies: the scripted gold policy on the project's ingested questions (read when
    the first request comes, after ingest)."""
    policy: list[ScriptedPolicyLLM] = []

    def script(messages: list[dict], model: str) -> str:
        if not policy:
            policy.append(
                ScriptedPolicyLLM(read_rows(project / paths.QUESTIONS), read_rows(project / paths.PASSAGES))
            )
        request = ChatRequest(tuple((m["role"], m["content"]) for m in messages))
        return policy[0]._one(request).text

    return script


def factory(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


def test_the_hosted_profile_publishes_sets_with_no_weights_and_training_asks_for_them(
    tmp_path, monkeypatch, capsys, corpora
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, SECRET)
    sizes = {
        "corpora": cut_corpora(corpora, tmp_path / "corpora"),
        "llm.api_key_env": KEY_ENV,
        "llm.max_retries": 1,
        "llm.backoff_s": 0,
        "trajectories.n_questions": 6,
        "trajectories.samples": 1,
        "evaluate.n_questions": 2,
        "counterfactual.max_trajectories": 6,  # every correct trajectory: the sample is not per chain
        "relevance.bootstrap_samples": 20,
        "bootstrap.variants": VARIANTS,
        "calibration.graphs": [str(corpora.parent / "external" / "musique_openie_dev.jsonl")],
    }
    with MockOpenAIServer(script=agent_script(tmp_path), base_model="hosted-model") as server:
        sets = [f"llm.base_urls=[{server.base_url}]", "llm.model=hosted-model"]
        sets += [f"{k}={json.dumps(v)}" for k, v in sizes.items()]
        factory(
            "params",
            "--profile",
            "hosted",
            *[a for s in sets for a in ("--set", s)],
            "--output",
            "params.yaml",
        )
        assert "model.base only for prepare-model, train" in capsys.readouterr().err

        # what docs/full-scale.md tells a hosted user to type, in its order
        for stage in ("ingest", "decontaminate", "index"):
            factory(stage)
        factory("evaluate", "--variant", "base", "--split", "heldout")
        calls = {}
        for variant in VARIANTS:
            before = server.state.completions
            chain = ("--variant", variant, "--seed", "0")
            factory("bootstrap", *chain)
            for stage in ("trajectories", "backtrace", "counterfactual", "variants", "export-trace"):
                factory(stage, *chain, "--round", "0")
            calls[variant] = server.state.completions - before
        factory("calibrate-labels")
        factory("validate-labels")
        factory("publish", "--round", "0")
        headers = {r["headers"].get("authorization") for r in server.chat_records()}

    # round 0 of every chain is the same requests (and the causal check re-asks every correct trajectory):
    # the response cache answers the second chain's
    assert calls["backtrace"] > 0 and calls["random"] == 0
    assert headers == {f"Bearer {SECRET}"}  # the key from the environment...
    for path in tmp_path.rglob("*"):  # ... and nowhere on disk
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
    assert not (tmp_path / "models" / "base").exists()  # no weights, no prepared model folder

    published = read_json(paths.METRICS / "published.json")["sets"]
    assert [s["variant"] for s in published] == VARIANTS
    backtrace = published[0]
    assert backtrace["examples"] > 0 and backtrace["seeds"]["0"]["selected_round"] == 0
    assert list((paths.PUBLISHED / "backtrace" / "data" / "seed_0").glob("*.parquet"))
    card = (paths.PUBLISHED / "backtrace" / "README.md").read_text()
    assert "No policy was trained on it" in card and "round 0 (given by --round, not selected)" in card
    assert "openai:hosted-model (hosted, no local weights)" in card
    relevance = read_json(paths.METRICS / "relevance.json")
    assert relevance["verdicts"] and relevance["causal"]["verdicts"]  # labels and causal check vs gold
    assert read_json(paths.CALIBRATION)["status"] == "ok" and (paths.REPORTS / "relevance.md").exists()
    labelled = read_json(paths.stage_metrics("backtrace", "backtrace", 0))
    assert labelled["tokenizer"] == "whitespace"  # no local tokenizer: FA ratios in whitespace tokens, said
    assert "hosted-model: not a local folder" in labelled["tokenizer_fallback_reason"]

    capsys.readouterr()
    for argv in (["train", "--variant", "backtrace", "--round", "0"], ["prepare-model"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "(the hosted profile), but not set: model.base (a local folder" in err
        assert "llm.base_urls (the servers" not in err and "llm.model (the name" not in err  # those are set
    assert not (tmp_path / "models" / "backtrace" / "seed_0" / "round_0").exists()


@pytest.mark.parametrize("round_", [-1, 1])
def test_publish_refuses_a_round_the_run_does_not_have(round_, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("ingest", "decontamination"):
        (tmp_path / paths.METRICS).mkdir(exist_ok=True)
        (tmp_path / paths.METRICS / f"{name}.json").write_text("{}")
    assert main(["publish", "--round", str(round_), "--set", "bootstrap.max_rounds=1"]) == 1
    assert "the rounds of this run are 0..0 (bootstrap.max_rounds)" in capsys.readouterr().err
    assert not (tmp_path / paths.PUBLISHED).exists()
