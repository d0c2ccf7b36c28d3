"""Are the corpora there? What ``factory check-corpora`` (the first step of ``make demo``) asks before
``dvc repro`` does any work.

The demo's params read the sampled records in ``../shared/corpora``, which only a checkout beside the
project's shared folder has. On any other clone ``dvc repro`` would run ``prepare_model`` first and
then stop inside DVC with "No such file or directory" (the ingest stage's dependency in ``dvc.yaml``).
``missing_sources`` lists what the params and that dependency name but the disk lacks;
``no_corpora_message`` is the one paragraph that says where corpora come from.

A path under ``ingest.hf`` that is not on disk and has the form ``owner/name`` is a hub id, as
``datasets.load_dataset`` reads it; it is not checked here (that needs the network).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from factory.params.config import Params

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
SHOWN = 3  # missing paths named in the message; the rest are counted

# The two ways in, as the message and docs/corpora.md give them (the hub ids' layouts are what
# factory.corpora.hf reads; tests/corpora/test_hf.py builds folders of those shapes).
OFFICIAL = (
    "(a) the official releases: HotpotQA's hotpot_train_v1.1.json and hotpot_dev_distractor_v1.json "
    "(http://curtis.ml.cmu.edu/datasets/hotpot/), 2WikiMultihopQA's train.json and dev.json (the data "
    "zip linked from github.com/Alab-NII/2wikimultihop) and MuSiQue's musique_ans_v1.0_train.jsonl and "
    "musique_ans_v1.0_dev.jsonl (download_data.sh in github.com/StonyBrookNLP/musique), in one folder, "
    "listed under corpora.hotpotqa, corpora.2wikimultihopqa and corpora.musique in params.yaml, with "
    "that folder in place of ../shared/corpora among the ingest stage's deps in dvc.yaml"
)
HUB = (
    "(b) Hugging Face hub copies under ingest.hf, with corpora: {} and the ../shared/corpora dep "
    "removed from dvc.yaml: {dataset: hotpotqa, path: hotpotqa/hotpot_qa, name: distractor}, "
    "{dataset: 2wikimultihopqa, path: ohjoonhee/2WikiMultihopQA} and {dataset: musique, path: "
    "dgslibisey/MuSiQue}, each with split: train and again with split: validation; make demo runs "
    "offline, so run `dvc repro` yourself with network, or save each with datasets' save_to_disk and "
    "give that folder as path"
)


def _dvc_external_deps(dvc_yaml: Path, stage: str) -> list[str]:
    """A stage's deps outside the project folder, where corpora and graph files are (DVC refuses to start a
    stage whose dependency is missing; the project's own code deps are part of the checkout)."""
    try:
        stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages") or {}
    except (OSError, yaml.YAMLError):
        return []  # dvc repro itself names a dvc.yaml it cannot read
    deps = (stages.get(stage) or {}).get("deps") or []
    return [d for d in deps if isinstance(d, str) and (d.startswith("..") or Path(d).is_absolute())]


def missing_sources(params: Params, dvc_yaml: Path | None = Path("dvc.yaml")) -> list[str]:
    """What the run would read but the disk lacks, each as '<path> (named by <the settings naming it>)'."""
    roots = []  # the ingest stage's missing deps: they stand for the missing files under them
    if dvc_yaml is not None and dvc_yaml.exists():
        roots = [dep for dep in _dvc_external_deps(dvc_yaml, "ingest") if not Path(dep).exists()]
    named: dict[str, list[str]] = {root: [] for root in roots}  # missing path -> settings naming it
    for dataset, files in params.corpora.items():
        for f in files:
            if not Path(f).is_file():
                path = next((root for root in roots if _under(f, root)), f)
                if f"corpora.{dataset}" not in named.setdefault(path, []):
                    named[path].append(f"corpora.{dataset}")
    for i, src in enumerate(params.ingest.hf):
        if not Path(src.path).exists() and not HUB_ID.match(src.path):
            named.setdefault(src.path, []).append(f"ingest.hf[{i}].path")
    for root in roots:
        named[root].append("the ingest stage's deps in dvc.yaml")
    missing = [f"{path} (named by {_join(settings)})" for path, settings in named.items()]
    if not params.corpora and not params.ingest.hf:
        missing.append("a corpus (corpora and ingest.hf are both empty in the params)")
    return missing


def _under(path: str, folder: str) -> bool:
    return Path(path) == Path(folder) or Path(folder) in Path(path).parents


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def no_corpora_message(missing: list[str]) -> str:
    """One paragraph: what is missing, and the two ways to get corpora."""
    named = "; ".join(missing[:SHOWN]) + (
        f"; and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    )
    return (
        f"no corpus to read: missing {named}. The defaults read the sampled records of ../shared/corpora, "
        f"which only a checkout next to the project's shared folder has. Get the corpora in one of two ways: "
        f"{OFFICIAL}; or {HUB}. Step by step, with the full run that follows: docs/corpora.md."
    )


CALIBRATION_STAGES = ("calibrate_labels", "validate_labels")  # the stages that read calibration.graphs


def missing_calibration(dvc_yaml: Path | None = Path("dvc.yaml")) -> list[str]:
    """The graph folders the calibration stages' deps in dvc.yaml name but the disk lacks (DVC would stop
    there; a graph file of calibration.graphs that is missing alone is the stage's to say)."""
    if dvc_yaml is None or not dvc_yaml.exists():
        return []
    deps = dict.fromkeys(d for stage in CALIBRATION_STAGES for d in _dvc_external_deps(dvc_yaml, stage))
    return [d for d in deps if not Path(d).exists()]


def no_calibration_message(missing: list[str]) -> str:
    """One paragraph: which graph folder is missing, and the ways on."""
    return (
        f"no calibration graphs: missing {', '.join(missing)} (a dep of the calibrate_labels and "
        "validate_labels stages in dvc.yaml, where calibration.graphs points: the real LLM-made graphs the "
        "labeller is scored on, which only a checkout next to the project's shared folder has). Build a "
        "graph file from public files with `factory calibration-graphs` (HippoRAG's published OpenIE output "
        "and the MuSiQue records), name it in calibration.graphs and its folder in those deps; or run "
        "without: set calibration.graphs to [] and remove the deps. Step by step: "
        "docs/corpora.md#real-llm-made-graphs."
    )
