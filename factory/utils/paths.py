"""Where every artifact lives (the same paths dvc.yaml declares).

Bootstrapping artifacts are organised per *chain*: a variant repeated under one protocol seed
(``bootstrap.seeds``), then per round: ``<root>/<variant>/seed_<seed>/round_<round>...``.
"""

from __future__ import annotations

import re
from pathlib import Path

INTERIM = Path("data/interim")
QUESTIONS = INTERIM / "questions.parquet"
PASSAGES = INTERIM / "passages.parquet"
QUARANTINE = INTERIM / "quarantine.jsonl"
ROUTES_PREDICTED = INTERIM / "routes_predicted.parquet"
CONTAMINATION = INTERIM / "contamination.jsonl"  # decontaminate: one row per flagged training-pool question
EVAL_QUESTIONS = INTERIM / "eval_questions.parquet"  # decontaminate: every evaluation set's questions
INDEX_DIR = Path("data/index")
CACHE_DIR = Path("data/cache")
CODE_DIR = Path("data/code")  # stage-code: one digest of the code a stage runs per stage module
METRICS = Path("metrics")
REPORTS = Path("reports")
MODELS = Path("models")
SIMULATED_DIR = Path("data/simulated")  # factory simulate: trajectories with known labels (never trained on)
PUBLISHED = Path("data/published")  # factory publish: one Hugging Face dataset folder per variant
GX_DOCS = REPORTS / "gx"  # Great Expectations data docs, one site per gate
PLOTS = REPORTS / "plots"  # CSV series for `dvc plots`
FIGURES = REPORTS / "figures"  # PNG figures of the bootstrapping report
LIVE = Path("dvclive")  # factory train: DVCLive curves per round (dvc plots / dvc exp show)
ENTAILMENT = Path("data/relevance/entailment.parquet")  # validate-labels: the entailment judge's verdicts
CALIBRATION = METRICS / "calibration.json"  # calibrate-labels: the labeller on real LLM-made graphs
CALIBRATION_QUESTIONS = Path("data/calibration/questions.jsonl")  # calibrate-labels: one row per question


def chain(variant: str, seed: int) -> Path:
    return Path(variant) / f"seed_{seed}"


def trajectories(variant: str, round_: int, seed: int = 0) -> Path:
    return Path("data/trajectories") / chain(variant, seed) / f"round_{round_}.parquet"


def labels(variant: str, round_: int, seed: int = 0) -> Path:
    return Path("data/labels") / chain(variant, seed) / f"round_{round_}.parquet"


def counterfactual(variant: str, round_: int, seed: int = 0) -> Path:
    """The round's re-asked final answers: one row per trajectory x condition (x random seed)."""
    return Path("data/counterfactual") / chain(variant, seed) / f"round_{round_}.parquet"


def supervision_dir(variant: str, round_: int, seed: int = 0) -> Path:
    return Path("data/supervision") / chain(variant, seed) / f"round_{round_}"


KEPT = "kept.parquet"  # in a supervision set's folder: what the variant kept of each trajectory


def trace_dir(variant: str, round_: int, seed: int = 0) -> Path:
    return Path("data/trace") / chain(variant, seed) / f"round_{round_}"


def adapter_dir(variant: str, round_: int, seed: int = 0) -> Path:
    """models/<variant>/seed_<s>/round_<r>/ holding adapter/, status.json, loss_curve.json,
    training_config.json."""
    return MODELS / chain(variant, seed) / f"round_{round_}"


def live_dir(variant: str, round_: int, seed: int = 0) -> Path:
    """dvclive/<variant>/seed_<s>/round_<r>/: the round's DVCLive training curves (factory.train.live)."""
    return LIVE / chain(variant, seed) / f"round_{round_}"


def eval_data(variant: str, round_: int, split: str, seed: int = 0) -> Path:
    return Path("data/eval") / chain(variant, seed) / f"round_{round_}_{split}.parquet"


def selected_dir(variant: str) -> Path:
    """data/eval/<variant>/selected/: the test-split trajectories of every chain's selected round."""
    return Path("data/eval") / variant / "selected"


def selected_test_data(variant: str, seed: int) -> Path:
    """Test-split trajectories of a chain's selected round (the test split is used only there)."""
    return selected_dir(variant) / f"seed_{seed}_test.parquet"


def stage_metrics(stage: str, variant: str, round_: int, seed: int = 0) -> Path:
    """metrics/<stage>/<variant>/seed_<s>/round_<r>.json (trajectories, backtrace, variants, train, trace)."""
    return METRICS / stage / chain(variant, seed) / f"round_{round_}.json"


def eval_metrics(variant: str, round_: int, split: str, seed: int = 0) -> Path:
    return METRICS / "eval" / chain(variant, seed) / f"round_{round_}_{split}.json"


def base_eval_metrics(split: str) -> Path:
    """The base model's evaluation (shared by every chain)."""
    return METRICS / "eval" / "base" / f"{split}.json"


def base_eval_data(split: str) -> Path:
    """The base model's evaluation trajectories (shared by every chain)."""
    return Path("data/eval") / "base" / f"{split}.parquet"


def decision(variant: str, round_: int, seed: int = 0) -> Path:
    """The stopping decision taken after a round's held-out evaluation."""
    return METRICS / "bootstrap" / chain(variant, seed) / f"round_{round_}.json"


def init_decision(variant: str, seed: int = 0) -> Path:
    """A chain's first decision (base model's held-out EM; round 0 may run)."""
    return METRICS / "bootstrap" / chain(variant, seed) / "init.json"


# Which contract (schemas.ARTIFACTS) an artifact follows and the command that rewrites it, by where it
# lives: an artifact that does not match its contract is named with the command that restores it.
_CHAIN = r"(?P<variant>[^/]+)/seed_(?P<seed>\d+)/round_(?P<round>\d+)"
_ROUND = "--variant {variant} --round {round} --seed {seed}"
_PRODUCERS: list[tuple[str, str | None, str]] = [
    (r"data/interim/questions\.parquet", "question", "factory ingest"),
    (r"data/interim/passages\.parquet", "passage", "factory ingest"),
    (r"data/interim/quarantine\.jsonl", None, "factory ingest"),
    (r"data/interim/contamination\.jsonl", None, "factory decontaminate"),
    (r"data/interim/eval_questions\.parquet", "eval_question", "factory decontaminate"),
    (r"data/interim/routes_predicted\.parquet", "route_predictions", "factory classify-routes"),
    (rf"data/trajectories/{_CHAIN}\.parquet", "trajectory", f"factory trajectories {_ROUND}"),
    (rf"data/labels/{_CHAIN}\.parquet", "labels", f"factory backtrace {_ROUND}"),
    (rf"data/counterfactual/{_CHAIN}\.parquet", "counterfactual", f"factory counterfactual {_ROUND}"),
    (rf"data/supervision/{_CHAIN}/train\.parquet", "supervision", f"factory variants {_ROUND}"),
    (rf"data/trace/{_CHAIN}/sft\.parquet", "trace_sft", f"factory export-trace {_ROUND}"),
    (rf"data/trace/{_CHAIN}/rl\.parquet", "trace_rl", f"factory export-trace {_ROUND}"),
    (
        r"data/eval/base/(?P<split>\w+)\.parquet",
        "trajectory",
        "factory evaluate --variant base --split {split}",
    ),
    (
        rf"data/eval/{_CHAIN}_(?P<split>\w+)\.parquet",
        "trajectory",
        f"factory evaluate {_ROUND} --split {{split}}",
    ),
    (
        r"data/eval/(?P<variant>[^/]+)/selected/seed_\d+_test\.parquet",
        "trajectory",
        "factory select --variant {variant}",
    ),
    (r"data/relevance/entailment\.parquet", "entailment", "factory validate-labels"),
    (r"data/simulated/trajectories\.parquet", "trajectory", "factory simulate"),
    (r"metrics/eval/base/(?P<split>\w+)\.json", None, "factory evaluate --variant base --split {split}"),
    (rf"metrics/eval/{_CHAIN}_(?P<split>\w+)\.json", None, f"factory evaluate {_ROUND} --split {{split}}"),
    (rf"metrics/bootstrap/{_CHAIN}\.json", None, f"factory bootstrap {_ROUND}"),
    (
        r"metrics/bootstrap/(?P<variant>[^/]+)/seed_(?P<seed>\d+)/init\.json",
        None,
        "factory bootstrap --variant {variant} --seed {seed}",
    ),
    (r"metrics/summary\.json", None, "factory report"),
    (r"metrics/relevance\.json", None, "factory validate-labels"),
    (rf"models/{_CHAIN}/status\.json", None, f"factory train {_ROUND}"),
]


def producer(path: str | Path) -> tuple[str | None, str | None]:
    """(the contract ``path`` follows, or None; the command that rewrites it, or None) of an artifact."""
    text = Path(path).as_posix()
    for pattern, artifact, command in _PRODUCERS:
        match = re.search(rf"(^|/){pattern}$", text)
        if match:
            return artifact, command.format(**match.groupdict())
    return None, None
