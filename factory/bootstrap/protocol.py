"""The test protocol as the report states it, and published figures it may list beside it.

The test split is every question of the official dev files; ``select`` evaluates each chain's selected
round once on ``evaluate.n_questions`` of them, drawn with ``evaluate.seed`` evenly across datasets,
the same questions for every variant and seed: the protocol of the papers the field compares with
(KnowTrace tests on 500 random questions of a dev file). ``PUBLISHED`` holds figures other systems
report on the same official dev sets: listed apart, never mixed into the factory's own numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from factory.utils import paths
from factory.utils.io import read_json
from factory.utils.templates import fixed

# The words and keys of a sample that ran on fewer questions than asked (factory.execution.sampling)
SHORT = {
    "train": ("training", "trajectories"),
    "heldout": ("held-out", "evaluate"),
    "test": ("test", "evaluate"),
}


@dataclass(frozen=True)
class PublishedFigure:
    """One system's exact match on official dev sets, as its paper reports it."""

    system: str
    model: str
    training: str
    retrieval: str
    em: dict[str, float]  # dataset id -> EM on that dataset's official dev set
    source: str


PUBLISHED = (
    PublishedFigure(
        system="Search-R1",
        model="Qwen2.5-7B (base)",
        training="RL (PPO), outcome reward",
        retrieval="E5 over the 2018 Wikipedia dump, top 3",
        em={"hotpotqa": 0.433, "2wikimultihopqa": 0.382, "musique": 0.196},
        source="Jin et al. 2025, Search-R1, arXiv:2503.09516, Table 2",
    ),
)


def test_protocol(summary: Mapping, ingest: Mapping, n_questions: int, seed: int) -> dict:
    """What the test EM was measured on: per dataset the questions evaluated (from the selected chains'
    test breakdowns) and the official dev files they were drawn from (metrics/ingest.json)."""
    evaluated: dict[str, int] = {}
    for data in summary["variants"].values():
        for sel in data["selected"].values():
            for dataset, stats in ((sel.get("test") or {}).get("by_dataset") or {}).items():
                evaluated[dataset] = max(evaluated.get(dataset, 0), stats.get("trajectories") or 0)
    dev_files: dict[str, list[str]] = {}
    for source, s in sorted((ingest.get("sources") or {}).items()):
        if s["official_split"] == "dev":
            dev_files.setdefault(s["dataset"], []).append(source.rsplit("/", 1)[-1])
    datasets = ingest.get("datasets") or {}
    return {
        # the questions evaluated: fewer than asked where the test split held fewer (evaluate.allow_fewer)
        "n_questions": min(n_questions, sum(evaluated.values())) if evaluated else n_questions,
        "seed": seed,
        "by_dataset": [
            {
                "dataset": d,
                "evaluated": evaluated.get(d, 0),
                "dev_questions": (datasets.get(d) or {}).get("by_split", {}).get("test", 0),
                "files": ", ".join(dev_files[d]),
            }
            for d in sorted(dev_files)
        ],
        "test_only": sorted(d for d, c in datasets.items() if c.get("test_only")),
    }


def short_samples(variants: list[str], seeds: list[int], n_rounds: int) -> list[str]:
    """A line per split whose samples ran on fewer questions than asked (``trajectories.allow_fewer``,
    ``evaluate.allow_fewer``: the split held no more), from the metrics the sampling stages wrote
    (``asked`` beside ``questions``), e.g. 'asked 500 held-out questions (evaluate.n_questions), 184
    available'."""
    found: dict[str, tuple[int, int]] = {}

    def note(split: str, metrics: Mapping | None) -> None:
        asked, ran = (metrics or {}).get("asked"), (metrics or {}).get("questions")
        if asked is not None and ran is not None and ran < asked:
            found[split] = min(found.get(split, (asked, ran)), (asked, ran), key=lambda p: p[1])

    note("heldout", _read(paths.base_eval_metrics("heldout")))
    for variant in variants:
        for seed in seeds:
            for r in range(n_rounds):
                note("train", _read(paths.stage_metrics("trajectories", variant, r, seed)))
                note("heldout", _read(paths.eval_metrics(variant, r, "heldout", seed)))
        test = _read(paths.METRICS / "test" / f"{variant}.json") or {}
        for chain in (test.get("chains") or {}).values():
            note("test", chain.get("test"))
    return [
        f"asked {found[s][0]} {SHORT[s][0]} questions ({SHORT[s][1]}.n_questions), {found[s][1]} available"
        for s in SHORT
        if s in found
    ]


def _read(path) -> dict | None:
    return read_json(path) if path.exists() else None


def test_em_by_dataset(summary: Mapping, datasets: list[str]) -> list[list[str]]:
    """Per variant its selected chains' test EM on each dataset (mean over seeds), as table cells."""
    rows = []
    for name, data in summary["variants"].items():
        cells = [name]
        for d in datasets:
            ems = [
                ((sel.get("test") or {}).get("by_dataset") or {}).get(d, {}).get("em")
                for sel in data["selected"].values()
            ]
            ems = [e for e in ems if e is not None]
            cells.append(fixed(sum(ems) / len(ems), 3) if ems else "–")
        rows.append(cells)
    return rows


def published_rows(datasets: list[str]) -> list[list[str]]:
    """``PUBLISHED`` as table cells over ``datasets`` ("–": not reported)."""
    return [
        [
            f.system,
            f.model,
            f.training,
            f.retrieval,
            *(fixed(f.em.get(d), 3, "–") for d in datasets),
            f.source,
        ]
        for f in PUBLISHED
    ]
