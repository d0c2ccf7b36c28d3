"""Stage publish: each variant's final supervision sets (every seed's selected round) as a Hugging Face
dataset folder with a card; `--push-to-hub` uploads them (repo id from publish.repo_id, token from
HF_TOKEN).

Before anything is written, the last gate (``factory.variants.last_gate``) checks every example of
every set: a question of any evaluation set stops the stage. Each card states where its questions
come from (official train only), the evaluation sets they were checked against (files with sha256,
rules, thresholds, counts removed per rule) and the run's settings fingerprint
(``factory.variants.fingerprint``), also written beside it as ``fingerprint.json``."""

from __future__ import annotations

import logging
from pathlib import Path

from factory.params.config import Params
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import after_publishing, outputs_together, read_json, write_json
from factory.variants import publish as publishing
from factory.variants.fingerprint import settings_fingerprint
from factory.variants.last_gate import check_publishable

COMMAND = "publish"
HELP = (
    "write each variant's final supervision sets (the selected round of every seed) as a Hugging Face "
    "dataset folder (parquet + dataset card); --push-to-hub uploads them"
)
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument(
        "--push-to-hub",
        dest="push_to_hub",
        action="store_true",
        help="also upload each variant to the Hub as <publish.repo_id>-<variant> (token from HF_TOKEN)",
    )
    parser.add_argument(
        "--round",
        dest="round_",
        type=int,
        metavar="R",
        help="publish round R's set of every seed as generated, without the held-out selection (no policy "
        "was trained: the hosted profile, docs/full-scale.md); the card says so",
    )


def _model_identity(params: Params) -> str:
    """The generating model as the cards and the fingerprint name it."""
    info = Path(params.model.dir) / "factory_model.json"
    if info.exists():
        base = read_json(info).get("base", params.model.base)
    elif params.llm.backend == "openai":
        # a hosted API: no weights were prepared here, so model.base (its typed default) says nothing
        revision = f", revision {params.llm.model_revision}" if params.llm.model_revision else ""
        return f"openai:{params.llm.model} (hosted, no local weights{revision})"
    else:
        base = params.model.base
    return f"{params.llm.backend}:{params.llm.model} (base: {base})"


def selected_rounds(summary: dict, variant: str, seeds: list[int]) -> dict[int, int]:
    """seed -> the selected round of that chain (metrics/summary.json, written by `factory report`)."""
    selected = (summary.get("variants", {}).get(variant) or {}).get("selected") or {}
    missing = [s for s in seeds if (selected.get(str(s)) or {}).get("round") is None]
    if missing:
        raise FactoryError(
            f"{paths.METRICS / 'summary.json'} has no selected round for {variant} seed(s) {missing}: "
            "run `factory select` and `factory report` first (`dvc repro` runs them in order)"
        )
    return {s: int(selected[str(s)]["round"]) for s in seeds}


def given_round(round_: int, params: Params) -> dict[int, int]:
    """seed -> ``round_`` for every seed (``--round``): checked against the rounds the params run."""
    if not 0 <= round_ < params.bootstrap.max_rounds:
        raise FactoryError(
            f"--round {round_}: the rounds of this run are 0..{params.bootstrap.max_rounds - 1} "
            "(bootstrap.max_rounds); the hosted profile publishes round 0"
        )
    return {s: round_ for s in params.bootstrap.seeds}


@outputs_together()
def run(params: Params, push_to_hub: bool = False, round_: int | None = None) -> list[dict]:
    # A push without a token or a repo id fails here, before anything is written or uploaded.
    token = publishing.hub_token() if push_to_hub else None
    repos = (
        {v: publishing.hub_repo(params.publish.repo_id, v) for v in params.bootstrap.variants}
        if push_to_hub
        else {}
    )
    summary = read_json(paths.METRICS / "summary.json") if (paths.METRICS / "summary.json").exists() else {}
    relevance = (
        read_json(paths.METRICS / "relevance.json") if (paths.METRICS / "relevance.json").exists() else {}
    )
    ingest = read_json(paths.METRICS / "ingest.json")
    decontamination = read_json(paths.METRICS / "decontamination.json")
    model = _model_identity(params)
    seeds = list(params.bootstrap.seeds)
    if round_ is None:
        selected = {v: selected_rounds(summary, v, seeds) for v in params.bootstrap.variants}
    else:  # no policy was trained, so nothing was selected: the round the user names, as generated
        selected = {v: given_round(round_, params) for v in params.bootstrap.variants}
    checked = check_publishable(
        e
        for v, rounds in selected.items()
        for s, r in rounds.items()
        for e in publishing.final_examples(v, s, r)[0]
    )
    log.info("publish: the last gate passed: %d examples, none of an evaluation set", checked)
    provenance = {
        "fingerprint": settings_fingerprint(params, model, ingest, decontamination),
        "ingest": ingest,
        "decontamination": decontamination,
    }
    results = []
    for variant in params.bootstrap.variants:
        info = {
            "model": model,
            "untrained": round_ is not None,
            "prompt_version": params.agent.prompt_version,
            "fa_ratio": summary.get("variants", {}).get(variant, {}).get("fa_ratio_by_round"),
            "relevance": {k: relevance.get(k) for k in ("status", "params", "verdicts", "causal")},
            "params": params.digest(
                "trajectories", "agent", "retrieval", "backtrace", "variants", "train", "bootstrap"
            ),
            "datasets": list(params.corpora),
            **provenance,
        }
        result = publishing.publish_variant(variant, paths.PUBLISHED / variant, info, selected[variant])
        results.append(result)
        log.info(
            "publish %s: %d examples (%s) -> %s",
            variant,
            result["examples"],
            ", ".join(f"seed {s}: round {r['selected_round']}" for s, r in result["seeds"].items()),
            result["path"],
        )
    write_json(paths.METRICS / "published.json", {"sets": results})
    for variant, repo in repos.items():  # the folders as published, once they are
        after_publishing(_push, variant, repo, token, params.publish.private)
    return results


def _push(variant: str, repo: str, token: str, private: bool) -> None:
    publishing.push_to_hub(paths.PUBLISHED / variant, repo, token, private=private)
    log.info("publish %s: uploaded to https://huggingface.co/datasets/%s", variant, repo)
