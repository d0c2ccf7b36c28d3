"""`factory publish`: the selected round of every protocol seed as one dataset config each, and the
push to the Hub through a stand-in for huggingface_hub's client (no network): what it is handed,
and the clear errors before anything is uploaded."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import pytest
import yaml

from factory.cli import main
from factory.utils import paths
from factory.utils.io import write_json
from tests.stages.test_s10_train import example, write_set
from tests.variants.publishable import make_publishable

V = "backtrace"
TOKEN = "hf_standin_secret_0123456789"
ARGS = ["publish", "--set", f"bootstrap.variants=[{V}]", "--set", "bootstrap.seeds=[0,1]"]


class StandInHfApi:
    """A stand-in for huggingface_hub.HfApi: records what the push hands it, uploads nothing."""

    instances: list[StandInHfApi] = []
    fail_with: Exception | None = None

    def __init__(self, token=None):
        self.token, self.calls = token, []
        StandInHfApi.instances.append(self)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, *, folder_path, repo_id, repo_type):
        if StandInHfApi.fail_with is not None:
            raise StandInHfApi.fail_with
        files = sorted(str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file())
        self.calls.append(("upload_folder", folder_path, repo_id, repo_type, files))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(huggingface_hub, "HfApi", StandInHfApi)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    StandInHfApi.instances, StandInHfApi.fail_with = [], None
    for seed in (0, 1):
        write_set(V, 0, [example(V, 0, 10 * seed + i, "base") for i in range(2)], seed=seed)
        round_1 = [example(V, 0, 10 * seed + i, "base") for i in range(2)]  # accumulated
        write_set(V, 1, round_1 + [example(V, 1, 10 * seed + 5, f"{V}-r0")], seed=seed)
        for r in (0, 1):
            write_json(paths.supervision_dir(V, r, seed) / "stats.json", {"status": "built"})
    write_json(paths.supervision_dir(V, 2, 0) / "stats.json", {"status": "skipped"})
    # seed 0 selected round 1; seed 1's base model stayed best
    write_json(
        paths.METRICS / "summary.json",
        {"variants": {V: {"selected": {"0": {"round": 1}, "1": {"round": -1}}, "fa_ratio_by_round": [0.4]}}},
    )
    make_publishable()
    return tmp_path


def test_every_seed_publishes_its_selected_round(project):
    assert main(ARGS) == 0
    out = paths.PUBLISHED / V
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["seed_0", "seed_1"]
    assert header["configs"][0]["default"] is True and "default" not in header["configs"][1]
    assert header["configs"][1]["data_files"] == [{"split": "train", "path": "data/seed_1/train-*.parquet"}]
    assert "| `seed_0` | 0 | round 1 | 0, 1 | 3 |" in card
    assert "| `seed_1` | 1 | base model (round 0's set did not improve it) | 0 | 2 |" in card
    assert "No relevance or causal result: no relevance check was run." in card
    published = json.loads((paths.METRICS / "published.json").read_text())["sets"][0]
    assert published["seeds"]["0"] == {"selected_round": 1, "rounds": [0, 1], "examples": 3, "shards": 1}
    assert published["seeds"]["1"] == {"selected_round": -1, "rounds": [0], "examples": 2, "shards": 1}
    from datasets import load_dataset

    seed_0 = load_dataset(str(out), "seed_0", split="train")
    seed_1 = load_dataset(str(out), "seed_1", split="train")
    assert sorted(seed_0["example_id"]) == ["backtrace/r0/t0/1", "backtrace/r0/t1/1", "backtrace/r1/t5/1"]
    assert sorted(seed_1["example_id"]) == ["backtrace/r0/t10/1", "backtrace/r0/t11/1"]
    assert not StandInHfApi.instances  # no push without --push-to-hub


def test_push_hands_folder_repo_and_token_to_the_hub_client(project, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main([*ARGS, "--push-to-hub", "--set", "publish.repo_id=me/tracefactory"]) == 0
    (api,) = StandInHfApi.instances
    assert api.token == TOKEN  # from the environment
    create, upload = api.calls
    assert create == (
        "create_repo",
        "me/tracefactory-backtrace",
        {"repo_type": "dataset", "exist_ok": True, "private": True},
    )
    assert upload[:4] == ("upload_folder", str(paths.PUBLISHED / V), "me/tracefactory-backtrace", "dataset")
    assert upload[4] == [
        "README.md",
        "data/seed_0/train-00000-of-00001.parquet",
        "data/seed_1/train-00000-of-00001.parquet",
        "fingerprint.json",
    ]
    written = [p for p in Path(project).rglob("*") if p.is_file()]
    assert written and not any(TOKEN.encode() in p.read_bytes() for p in written)  # never written


def test_missing_token_or_repo_id_fails_before_anything_is_uploaded(project, monkeypatch, capsys):
    assert main([*ARGS, "--push-to-hub", "--set", "publish.repo_id=me/tracefactory"]) == 1
    err = capsys.readouterr().err
    assert "HF_TOKEN environment variable" in err and "nothing was uploaded" in err
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main([*ARGS, "--push-to-hub"]) == 1
    err = capsys.readouterr().err
    assert "publish.repo_id" in err and "nothing was uploaded" in err and TOKEN not in err
    assert main([*ARGS, "--push-to-hub", "--set", "publish.repo_id=no-namespace"]) == 1
    assert "'<user or org>/<name>'" in capsys.readouterr().err
    assert not StandInHfApi.instances and not paths.PUBLISHED.exists()


def test_a_failed_upload_is_one_line_without_the_token(project, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    StandInHfApi.fail_with = PermissionError(f"403 Forbidden for token {TOKEN}")
    assert main([*ARGS, "--push-to-hub", "--set", "publish.repo_id=me/tracefactory"]) == 1
    err = capsys.readouterr().err
    assert "push to me/tracefactory-backtrace failed: PermissionError: 403 Forbidden for token ***" in err
    assert TOKEN not in err


def test_a_seed_without_a_selected_round_is_a_clear_error(project, capsys):
    write_json(paths.METRICS / "summary.json", {"variants": {V: {"selected": {"0": {"round": 1}}}}})
    assert main(ARGS) == 1
    assert "no selected round for backtrace seed(s) [1]" in capsys.readouterr().err


def test_the_card_gives_relevance_and_causal_results_as_a_table_with_a_verdict_per_dataset(project):
    def cell(v, lo, hi):
        return {"value": v, "ci": [lo, hi]}

    write_json(
        paths.METRICS / "relevance.json",
        {
            "status": "ok",
            "params": {"bar": 0.8},
            "verdicts": {
                "hotpotqa": {
                    "verdict": "beats",
                    "beats_answer_entity": True,
                    "reaches_bar": False,
                    "precision": 0.71,
                    "recall": 0.64,
                    "f1": 0.67,
                    "answer_entity_f1": 0.41,
                    "line": "hotpotqa: a long sentence",
                },
                "musique": {
                    "verdict": "cannot tell",
                    "precision": None,
                    "recall": None,
                    "f1": None,
                    "answer_entity_f1": None,
                    "line": "musique: cannot tell",
                },
            },
            "causal": {
                "status": "ok",
                "verdicts": {
                    "all": {"verdict": "cannot tell"},
                    "hotpotqa": {"verdict": "load-bearing"},
                    "musique": {"verdict": "cannot tell"},
                },
                "groups": {
                    "dataset=hotpotqa": {
                        "effects": {
                            "necessity_sq": cell(0.5, 0.3, 0.7),
                            "necessity_random": cell(0.1, 0.0, 0.2),
                        }
                    }
                },
            },
        },
    )
    assert main(ARGS) == 0
    card = (paths.PUBLISHED / V / "README.md").read_text()
    section = card.split("## Relevance labels vs gold supporting facts, and the causal check\n\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        "| hotpotqa | 0.71 | 0.64 | 0.67 | 0.41 | S_q beats the answer-entity control; does not reach the 0.8"
        " bar | 50 [30, 70] | 10 [0, 20] | load-bearing |",
        "| musique | n/a | n/a | n/a | n/a | cannot tell (nothing to score) | n/a | n/a | cannot tell |",
    ]
    assert "```json" not in card and "null" not in section


def test_a_seed_that_kept_no_example_gets_no_config_and_the_card_says_so(tmp_path, monkeypatch):
    """datasets refuses a split without rows: an empty chain is stated, never offered as a config."""
    monkeypatch.chdir(tmp_path)
    write_set(V, 0, [example(V, 0, i, "base") for i in range(2)], seed=0)
    write_set(V, 0, [], seed=1)
    for seed in (0, 1):
        write_json(paths.supervision_dir(V, 0, seed) / "stats.json", {"status": "built"})
    write_json(
        paths.METRICS / "summary.json",
        {"variants": {V: {"selected": {"0": {"round": 0}, "1": {"round": 0}}}}},
    )
    make_publishable()
    assert main(ARGS) == 0
    out = paths.PUBLISHED / V
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["seed_0"]
    assert "| none (empty) | 1 | round 0 | 0 | 0 |" in card and "cannot load a split without rows" in card
    assert not list((out / "data" / "seed_1").glob("*.parquet"))
    from datasets import load_dataset

    assert len(load_dataset(str(out), "seed_0", split="train", cache_dir=str(tmp_path / "cache"))) == 2
