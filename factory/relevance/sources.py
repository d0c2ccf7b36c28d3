"""What the validate-labels stage scores: every round of every chain that exists, read as a ``Source``
(its trajectories and backtrace labels), the rounds left out and why, the rounds' counterfactual rows,
and the gold supporting facts and passages the scored trajectories need.

Only what is scored is read whole: the correct trajectories without their prompts and their labels;
of the others the id, question and ``correct`` (they are counted, not read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from factory.relevance.check import Source
from factory.retrieval.store import PassageStore
from factory.utils import paths
from schemas import TRAJECTORY, columns_except, read_rows, require

SCORED_COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])
_ROUND_FILE = re.compile(r"^round_(\d+)\.parquet$")
_SEED_DIR = re.compile(r"^seed_(\d+)$")


def discover_rounds(root: Path = Path("data/trajectories")) -> list[tuple[str, int, int]]:
    """(variant, protocol seed, round) of every trajectory file, in a stable order."""
    found = []
    for path in root.glob("*/seed_*/round_*.parquet"):
        m_round, m_seed = _ROUND_FILE.match(path.name), _SEED_DIR.match(path.parent.name)
        if m_round and m_seed:
            found.append((path.parent.parent.name, int(m_seed.group(1)), int(m_round.group(1))))
    return sorted(found)


def read_scored(path: Path) -> list[dict]:
    """A round's trajectories in file order: the correct ones (the ones scored) without their prompts,
    the others as their id, question and ``correct`` only (they are counted, not read)."""
    outcomes = read_rows(path, columns=["trajectory_id", "question_id", "correct"])
    correct = [t["trajectory_id"] for t in outcomes if t["correct"]]
    full = {t["trajectory_id"]: t for t in read_rows(path, SCORED_COLUMNS, where={"trajectory_id": correct})}
    return [full.get(t["trajectory_id"], t) for t in outcomes]


@dataclass
class Rounds:
    """Every round found: the scored ones, those left out (with the reason) and counterfactual rows by
    round name (for the rounds that have them)."""

    sources: list[Source] = field(default_factory=list)
    left_out: list[dict] = field(default_factory=list)
    counterfactual_rows: dict[str, list[dict]] = field(default_factory=dict)


def read_rounds() -> Rounds:
    """Every round of every chain under data/trajectories: empty files (skipped rounds) and rounds
    without labels are left out and listed."""
    found = Rounds()
    for variant, seed, round_ in discover_rounds():
        name = f"{variant}/seed_{seed}/round_{round_}"
        trajectories = read_scored(paths.trajectories(variant, round_, seed))
        if not trajectories:
            found.left_out.append({"source": name, "reason": "empty trajectory file (skipped round)"})
            continue
        labels_path = paths.labels(variant, round_, seed)
        if not labels_path.exists():
            found.left_out.append(
                {
                    "source": name,
                    "reason": f"{labels_path} is missing (run `factory backtrace`)",
                    "trajectories": len(trajectories),
                }
            )
            continue
        correct = [t["trajectory_id"] for t in trajectories if t["correct"]]
        combos = {(r["mode"], r["target_mode"]) for r in read_rows(labels_path, ["mode", "target_mode"])}
        labels = read_rows(labels_path, where={"trajectory_id": correct})
        found.sources.append(Source(name, trajectories, labels, combos))
        if paths.counterfactual(variant, round_, seed).exists():
            found.counterfactual_rows[name] = read_rows(paths.counterfactual(variant, round_, seed))
    return found


def read_gold(sources: list[Source]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(question_id -> its supporting facts, pid -> passage) for the correct trajectories of ``sources``:
    the passages they retrieved and those their triplets cite. No source: both empty (nothing read)."""
    if not sources:
        return {}, {}
    require(paths.QUESTIONS, "run `factory ingest` first")
    require(paths.INDEX_DIR, "run `factory index` first")
    scored = [t for s in sources for t in s.trajectories if t["correct"]]
    wanted = sorted({t["question_id"] for t in scored})
    questions_by_id = {
        q["question_id"]: q
        for q in read_rows(paths.QUESTIONS, ["question_id", "supporting"], where={"question_id": wanted})
    }
    pids = {p for t in scored for st in t["steps"] for p in st["retrieved"]}
    pids |= {x["source_pid"] for t in scored for x in t["triplets"] if x["source_pid"]}
    return questions_by_id, PassageStore.open(paths.INDEX_DIR).get_many(sorted(pids))
