"""Where every artifact lives (the same paths dvc.yaml declares)."""

from __future__ import annotations

from pathlib import Path

INTERIM = Path("data/interim")
QUESTIONS = INTERIM / "questions.parquet"
PASSAGES = INTERIM / "passages.parquet"
QUARANTINE = INTERIM / "quarantine.jsonl"
INDEX_DIR = Path("data/index")
CACHE_DIR = Path("data/cache")
METRICS = Path("metrics")
REPORTS = Path("reports")
MODELS = Path("models")


def trajectories(variant: str, round_: int) -> Path:
    return Path("data/trajectories") / variant / f"round_{round_}.parquet"


def labels(variant: str, round_: int) -> Path:
    return Path("data/labels") / variant / f"round_{round_}.parquet"


def supervision_dir(variant: str, round_: int) -> Path:
    return Path("data/supervision") / variant / f"round_{round_}"


def adapter_dir(variant: str, round_: int) -> Path:
    return MODELS / variant / f"round_{round_}"


def eval_metrics(variant: str, round_: int, split: str) -> Path:
    return METRICS / "eval" / variant / f"round_{round_}_{split}.json"
