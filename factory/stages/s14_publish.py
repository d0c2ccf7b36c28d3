"""Stage publish: each variant's final supervision set as a Hugging Face dataset folder with a card."""

from __future__ import annotations

import logging
from pathlib import Path

from factory import paths
from factory import publish as publishing
from factory.config import Params
from factory.io import read_json, write_json

COMMAND = "publish"
HELP = "write each variant's final supervision set as a Hugging Face dataset folder (parquet + dataset card)"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("--push-to-hub", dest="push_to_hub", metavar="REPO", default=None,
                        help="also upload each variant to the Hub as REPO-<variant> (token from HF_TOKEN)")


def _model_identity(params: Params) -> str:
    info = Path(params.model.dir) / "factory_model.json"
    base = read_json(info).get("base", params.model.base) if info.exists() else params.model.base
    return f"{params.llm.backend}:{params.llm.model} (base: {base})"


def run(params: Params, push_to_hub: str | None = None) -> list[dict]:
    summary = read_json(paths.METRICS / "summary.json") if (paths.METRICS / "summary.json").exists() else {}
    relevance = (
        read_json(paths.METRICS / "relevance.json") if (paths.METRICS / "relevance.json").exists() else {}
    )
    seed = params.bootstrap.seeds[0]
    results = []
    for variant in params.bootstrap.variants:
        info = {
            "model": _model_identity(params),
            "prompt_version": params.agent.prompt_version,
            "fa_ratio": summary.get("variants", {}).get(variant, {}).get("fa_ratio_by_round"),
            "relevance": relevance.get("verdicts", relevance.get("summary", {})),
            "params": params.digest(
                "trajectories", "agent", "retrieval", "backtrace", "variants", "train", "bootstrap"
            ),
            "datasets": list(params.corpora),
        }
        result = publishing.publish_variant(
            variant, paths.PUBLISHED / variant, info, seed=seed, rounds=len(params.bootstrap.rounds)
        )
        if push_to_hub:
            publishing.push_to_hub(paths.PUBLISHED / variant, f"{push_to_hub}-{variant}")
            result["pushed_to"] = f"{push_to_hub}-{variant}"
        results.append(result)
        log.info(
            "publish %s: %d examples from rounds %s -> %s",
            variant,
            result["examples"],
            result["rounds"],
            result["path"],
        )
    write_json(paths.METRICS / "published.json", {"sets": results})
    return results
