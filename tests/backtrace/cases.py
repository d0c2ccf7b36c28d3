"""Shared cases of the backtracing tests: trajectories built from (pair, triplets) iterations, id helpers."""

from __future__ import annotations

from factory.backtrace.labels import backtrace
from factory.params.label_sections import BacktraceParams
from factory.simulate.assemble import build_trajectory

TID = "t1"


def make(question: str, iterations, thought: str, answer: str, answers=None, **options) -> dict:
    q = {
        "question_id": "test/q1",
        "question": question,
        "answers": answers or [answer],
        "dataset": "hotpotqa",
        "route": "chain",
        "qtype": "bridge",
        "split": "train",
    }
    return build_trajectory(q, iterations, thought, answer, trajectory_id=TID, dedupe=False, **options)


def t(*ns: int) -> list[str]:
    return [f"{TID}#t{n}" for n in ns]


def p(*ns: int) -> list[str]:
    return [f"{TID}#p{n}" for n in ns]


def kept(
    traj: dict, mode: str | None = None, target_mode: str | None = None, gold_answers=None, **fields
) -> list[str]:
    """S_q of ``backtrace`` under ``BacktraceParams(**fields)`` with ``mode`` / ``target_mode`` when given."""
    fields.update({k: v for k, v in (("mode", mode), ("target_mode", target_mode)) if v is not None})
    return backtrace(traj, BacktraceParams(**fields), gold_answers=gold_answers)["kept_triplet_ids"]


def cycle_trajectory() -> dict:
    """Film X -director-> Jane Doe -born in-> Paris, plus Film X -shot in-> Paris (a cycle), an
    off-path genre and a triplet beyond the target (Paris -capital of-> France)."""
    return make(
        "Where was the director of Film X born?",
        [
            [
                (
                    "Film X",
                    "director",
                    [
                        ("Film X", "director", "Jane Doe"),
                        ("Film X", "genre", "Drama"),
                        ("Film X", "shot in", "Paris"),
                    ],
                )
            ],
            [
                (
                    "Jane Doe",
                    "birthplace",
                    [("Jane Doe", "born in", "Paris"), ("Paris", "capital of", "France")],
                )
            ],
        ],
        "Film X was directed by Jane Doe, who was born in Paris.",
        "Paris",
    )


def words(text: str) -> int:
    return len(text.split())


def fake_embedder(texts):
    import numpy as np

    table = {"nyc": [1.0, 0.0], "new york city": [0.99, 0.1], "mayor": [0.0, 1.0]}
    vecs = np.array([table.get(x, [0.6, 0.6]) for x in texts], dtype=np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
