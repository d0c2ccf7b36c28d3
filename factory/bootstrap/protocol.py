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

from factory.utils.templates import fixed


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
        "n_questions": n_questions,
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
