"""dvc.yaml never serves stale outputs: code deps, params and outs of every stage checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from factory.cli import stage_names
from factory.params.config import Params
from factory.params.profiles import PROFILES, profile_params, render_profile
from factory.utils import paths
from tests.imports import ROOT

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

# One resolved instance of each matrix / foreach stage: the values its templates are filled with.
ITEM = {"variant": "backtrace", "seed": 0, "r": {"round": 1, "after": "round_0"}}


def _stages() -> list[tuple[str, dict]]:
    return [(name, stage.get("do", stage)) for name, stage in DVC.items()]


def _module(stage: dict) -> Path:
    command = stage["cmd"].split()[1]
    return ROOT / "factory" / "stages" / f"{stage_names()[command]}.py"


CODE_TREE = {"factory", "schemas", "validators"}  # what factory.utils.stage_code reads


def _code_deps(stage: dict) -> set[str]:
    deps = {d.split()[0] for d in stage.get("deps", []) if isinstance(d, str)}
    return {d for d in deps if d.split("/")[0] in CODE_TREE}


@pytest.mark.parametrize("name, stage", _stages(), ids=[n for n, _ in _stages()])
def test_a_stage_depends_on_the_digest_of_its_own_code(name, stage):
    """Every stage's code dep is its module's digest (data/code/<module>.json: its import closure), which
    the stage_code stage writes from the whole code tree; publish hashes the whole tree itself."""
    deps = [d for d in stage.get("deps", []) if isinstance(d, str)]
    if name in ("stage_code", "publish"):
        assert _code_deps(stage) == CODE_TREE
        return
    assert str(paths.CODE_DIR / f"{_module(stage).stem}.json") in deps
    assert not _code_deps(stage), f"stage {name} names code its digest already covers"


def test_stage_code_writes_a_digest_for_every_other_stage_module(tmp_path, monkeypatch):
    from factory.stages import s00_stage_code

    monkeypatch.chdir(tmp_path)
    s00_stage_code.run(Params())
    written = {p.stem for p in (tmp_path / paths.CODE_DIR).glob("*.json")}
    assert written == set(stage_names().values()) - {"s00_stage_code"}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_params_key_a_stage_names_is_written_in_every_profiles_file(profile):
    """DVC refuses a stage whose params key the file lacks ("missing from params.yaml"): the keys stages
    name are protocol keys or whole sections, written in every params file (a section at its defaults
    as a bare `name:`)."""
    data = yaml.safe_load(render_profile(profile, profile_params(profile)))
    for name, stage in _stages():
        for entry in stage.get("params", []):
            keys = entry if isinstance(entry, str) else next(iter(entry))
            node = data
            for key in keys.split("."):
                assert isinstance(node, dict) and key in node, f"{profile}: stage {name} tracks {keys!r}"
                node = node[key]


@pytest.mark.parametrize("name, stage", _stages(), ids=[n for n, _ in _stages()])
def test_every_params_key_exists_in_the_typed_params(name, stage):
    data = Params().model_dump()
    for entry in stage.get("params", []):
        keys = entry if isinstance(entry, str) else next(iter(entry))
        node = data
        for key in keys.split("."):
            assert isinstance(node, dict) and key in node, f"stage {name}: params key {keys!r} is not a param"
            node = node[key]


def _render(text: str, item) -> str:
    if not isinstance(item, dict):
        return text.replace("${item}", str(item))

    def value(match: re.Match) -> str:
        node = item
        for key in match.group(1).split("."):
            node = node[key]
        return str(node)

    return re.sub(r"\$\{item\.([\w.]+)\}", value, text)


def _declared(stage: dict, item) -> set[str]:
    out = set()
    for kind in ("outs", "metrics", "plots"):
        for entry in stage.get(kind, []):
            out.add(_render(entry if isinstance(entry, str) else next(iter(entry)), item))
    return out


def _expected(name: str, v: str, s: int, r: int) -> set[Path]:
    m, reports = paths.METRICS, paths.REPORTS
    chain = {
        "trajectories": paths.trajectories,
        "backtrace": paths.labels,
        "variants": paths.supervision_dir,
        "export_trace": paths.trace_dir,
        "train": paths.adapter_dir,
        "counterfactual": paths.counterfactual,
    }
    if name in chain:
        metrics = {"export_trace": "trace", "variants": "variants"}.get(name, name)
        live = {paths.live_dir(v, r, s) / "metrics.json", paths.live_dir(v, r, s) / "plots" / "metrics"}
        extra = live if name == "train" else set()
        return {chain[name](v, r, s), paths.stage_metrics(metrics, v, r, s), *extra}
    return {
        "stage_code": {paths.CODE_DIR},
        "prepare_model": {Path(Params().model.dir)},
        "ingest": {
            paths.QUESTIONS,
            paths.PASSAGES,
            paths.QUARANTINE,
            paths.GX_DOCS / "ingest",
            m / "ingest.json",
        },
        "decontaminate": {paths.CONTAMINATION, paths.EVAL_QUESTIONS, m / "decontamination.json"},
        "index": {paths.INDEX_DIR, m / "retrieval.json"},
        "classify_routes": {paths.ROUTES_PREDICTED, m / "routes.json"},
        "evaluate_base": {paths.base_eval_data("heldout"), paths.base_eval_metrics("heldout")},
        "start": {
            paths.adapter_dir(v, 0, s).parent / "init",
            paths.supervision_dir(v, 0, s).parent / "init",
            paths.init_decision(v, s),
        },
        "evaluate": {paths.eval_data(v, r, "heldout", s), paths.eval_metrics(v, r, "heldout", s)},
        "decide": {paths.decision(v, r, s)},
        "select": {paths.selected_dir(v), m / "bootstrap" / f"{v}.json", m / "test" / f"{v}.json"},
        "calibrate_labels": {paths.CALIBRATION, paths.CALIBRATION_QUESTIONS},
        "validate_labels": {
            reports / "relevance.md",
            reports / "relevance.png",
            reports / "causal_effects.png",
            reports / "audit.html",
            m / "relevance.json",
            paths.ENTAILMENT,
        },
        "simulate": {
            paths.SIMULATED_DIR,
            reports / "backtrace_sensitivity.md",
            reports / "backtrace_sensitivity.png",
            m / "simulate.json",
        },
        "report": {
            reports / "bootstrap.md",
            paths.FIGURES,
            paths.PLOTS / "em_by_round.csv",
            paths.PLOTS / "fa_by_round.csv",
            m / "summary.json",
            m / "headline.json",
        },
        "publish": {paths.PUBLISHED, m / "published.json"},
    }[name]


@pytest.mark.parametrize("name, stage", _stages(), ids=[n for n, _ in _stages()])
def test_outs_are_the_paths_the_code_writes(name, stage):
    item = ITEM["variant"] if "foreach" in DVC[name] else ITEM
    expected = {str(p) for p in _expected(name, ITEM["variant"], ITEM["seed"], ITEM["r"]["round"])}
    assert _declared(stage, item) == expected


def test_the_checks_see_every_stage_command():
    commands = {stage["cmd"].split()[1] for _, stage in _stages()}
    assert commands == set(stage_names())  # every stage module is a DVC stage, so every one is checked
    assert all(stage["cmd"].startswith("factory ") for _, stage in _stages())


def test_publish_names_every_params_section():
    """The settings fingerprint on every card hashes every param: publish re-runs when any changes."""
    assert set(DVC["publish"]["params"]) == set(Params.model_fields)
