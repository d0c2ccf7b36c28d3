"""`factory check-corpora`, the first step of `make demo`: a clone without ../shared/corpora (every real
user's) stops before any work with one paragraph naming the two ways to get corpora; a checkout with them,
or with hub copies configured, goes on."""

import shutil
import subprocess
import sys

import yaml

from tests.conftest import ROOT


def _check(cwd, *sets):
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run(
        [sys.executable, "-m", "factory.cli", "check-corpora", *args], cwd=cwd, capture_output=True, text=True
    )


def _project(parent):
    """A copy of the project's params.yaml and dvc.yaml in <parent>/project."""
    project = parent / "project"
    project.mkdir(parents=True)
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(ROOT / name, project / name)
    return project


def test_a_clone_without_shared_stops_with_one_paragraph_naming_both_ways(tmp_path):
    project = _project(tmp_path)  # no tmp_path/shared: a clone anywhere else
    run = _check(project)
    assert run.returncode == 1 and run.stdout == ""
    message = run.stderr
    assert (
        message.count("\n") == 1 and message.endswith(".\n") and "Traceback" not in message
    )  # one paragraph
    assert message.startswith(
        "factory check-corpora: no corpus to read: missing ../shared/corpora (named by corpora.hotpotqa, "
        "corpora.2wikimultihopqa, corpora.musique and the ingest stage's deps in dvc.yaml)."
    )
    for way in (  # (a) the official files, where they go, the params
        "hotpot_train_v1.1.json",
        "hotpot_dev_distractor_v1.json",
        "train.json and dev.json",
        "musique_ans_v1.0_train.jsonl",
        "musique_ans_v1.0_dev.jsonl",
        "corpora.hotpotqa",
        "dvc.yaml",
    ):
        assert way in message, way
    for way in (
        "ingest.hf",
        "hotpotqa/hotpot_qa",
        "name: distractor",
        "ohjoonhee/2WikiMultihopQA",
        "dgslibisey/MuSiQue",
        "save_to_disk",
    ):  # (b) the hub ids under ingest.hf
        assert way in message, way
    assert "docs/corpora.md" in message and (ROOT / "docs" / "corpora.md").exists()
    assert sorted(p.name for p in project.iterdir()) == ["dvc.yaml", "params.yaml"]  # no work was done


def test_a_checkout_beside_the_shared_corpora_goes_on(tmp_path, corpora):
    project = _project(tmp_path)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "corpora").symlink_to(corpora)
    (tmp_path / "shared" / "external").symlink_to(corpora.parent / "external")
    run = _check(project)
    assert run.returncode == 0, run.stderr
    assert run.stdout == run.stderr == ""


def test_corpora_without_the_calibration_graphs_stop_with_the_ways_on(tmp_path, corpora):
    project = _project(tmp_path)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "corpora").symlink_to(corpora)
    run = _check(project)
    assert run.returncode == 1 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("factory check-corpora: no calibration graphs: missing ../shared/external")
    assert "factory calibration-graphs" in run.stderr and "docs/corpora.md#real-llm-made-graphs" in run.stderr
    dvc = yaml.safe_load((project / "dvc.yaml").read_text())
    for stage in ("calibrate_labels", "validate_labels"):  # run without, as the message says
        dvc["stages"][stage]["deps"].remove("../shared/external")
    (project / "dvc.yaml").write_text(yaml.safe_dump(dvc, sort_keys=False))
    assert _check(project, "calibration.graphs=[]").returncode == 0


def test_hub_ids_and_saved_folders_under_ingest_hf_go_on_and_a_missing_folder_is_named(tmp_path):
    project = _project(tmp_path)
    dvc = yaml.safe_load((project / "dvc.yaml").read_text())
    dvc["stages"]["ingest"]["deps"].remove("../shared/corpora")  # as docs/corpora.md says for hub copies
    for stage in ("calibrate_labels", "validate_labels"):  # and without the shared calibration graphs
        dvc["stages"][stage]["deps"].remove("../shared/external")
    (project / "dvc.yaml").write_text(yaml.safe_dump(dvc, sort_keys=False))
    (project / "saved_2wiki").mkdir()
    hf = (
        "[{dataset: hotpotqa, path: hotpotqa/hotpot_qa, name: distractor}, "
        "{dataset: 2wikimultihopqa, path: saved_2wiki}]"
    )
    run = _check(project, "corpora={}", f"ingest.hf={hf}")
    assert run.returncode == 0, run.stderr
    run = _check(project, "corpora={}", "ingest.hf=[{dataset: musique, path: ./hub/MuSiQue}]")
    assert run.returncode == 1
    assert "missing ./hub/MuSiQue (named by ingest.hf[0].path)." in run.stderr


def test_make_demo_checks_the_corpora_before_dvc_repro():
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = dry.splitlines()
    check = next(i for i, line in enumerate(lines) if "factory check-corpora" in line)
    repro = next(i for i, line in enumerate(lines) if "dvc repro" in line)
    assert check < repro


def test_a_file_whose_official_split_cannot_be_told_stops_the_check(tmp_path, corpora):
    """make demo's first step refuses it before any work, naming the file and how to state its split."""
    project = tmp_path / "project"
    project.mkdir()
    bench = tmp_path / "HotpotQA_500_benchmark.json"
    shutil.copy(corpora / "hotpotqa" / "dev_sample.json", bench)
    run = _check(project, f"corpora={{hotpotqa: [{bench}]}}")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"cannot tell the official split of {bench} (corpora.hotpotqa)" in run.stderr
    assert (
        _check(project, f"corpora={{hotpotqa: [{bench}]}}", f"splits.official={{{bench}: dev}}").returncode
        == 0
    )
