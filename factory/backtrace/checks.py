"""A trajectory record checked before backtracing: a clear error naming the trajectory and the field."""

from __future__ import annotations

from typing import Any

from factory.utils.errors import FactoryError

STEP_KINDS = frozenset({"explore", "complete", "final"})


class BadTrajectory(FactoryError):
    """A trajectory record that cannot be backtraced; names the trajectory and the field."""

    def __init__(self, trajectory_id: str, field: str, reason: str):
        self.trajectory_id, self.field, self.reason = trajectory_id, field, reason
        super().__init__(f"trajectory {trajectory_id!r}: field {field!r}: {reason}")


def check_trajectory(trajectory: Any) -> str:
    """Full check of the fields backtracing reads; raises BadTrajectory naming the field. Returns the id."""
    if not isinstance(trajectory, dict):
        raise BadTrajectory("?", "record", f"expected a dict, got {type(trajectory).__name__}")
    tid = trajectory.get("trajectory_id")
    if not isinstance(tid, str) or not tid:
        raise BadTrajectory(str(tid), "trajectory_id", "missing or not a string")
    steps, triplets = trajectory.get("steps"), trajectory.get("triplets")
    if not isinstance(steps, list):
        raise BadTrajectory(tid, "steps", "missing or not a list")
    if not isinstance(triplets, list):
        raise BadTrajectory(tid, "triplets", "missing or not a list")
    indices = set()
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("index"), int):
            raise BadTrajectory(tid, f"steps[{n}].index", "missing or not an integer")
        if step["index"] in indices:
            raise BadTrajectory(tid, f"steps[{n}].index", f"duplicate step index {step['index']}")
        if step.get("kind") not in STEP_KINDS:
            raise BadTrajectory(
                tid, f"steps[{n}].kind", f"must be explore|complete|final, got {step.get('kind')!r}"
            )
        for m, pair in enumerate(step.get("pairs") or []):
            for key in ("pair_id", "entity", "relation"):
                if not isinstance(pair, dict) or not isinstance(pair.get(key), str):
                    raise BadTrajectory(tid, f"steps[{n}].pairs[{m}].{key}", "missing or not a string")
        for key in ("output", "thought", "answer"):
            if step.get(key) is not None and not isinstance(step[key], str):
                raise BadTrajectory(tid, f"steps[{n}].{key}", "not a string")
        indices.add(step["index"])
    seen = set()
    for n, trip in enumerate(triplets):
        if not isinstance(trip, dict):
            raise BadTrajectory(tid, f"triplets[{n}]", "not a record")
        for key in ("triplet_id", "subject", "relation", "object"):
            if not isinstance(trip.get(key), str):
                raise BadTrajectory(tid, f"triplets[{n}].{key}", "missing or not a string")
        if trip["triplet_id"] in seen:
            raise BadTrajectory(tid, f"triplets[{n}].triplet_id", f"duplicate id {trip['triplet_id']!r}")
        seen.add(trip["triplet_id"])
        if trip.get("step_index") not in indices:
            raise BadTrajectory(
                tid, f"triplets[{n}].step_index", f"{trip.get('step_index')!r} is not the index of a step"
            )
    for key in ("question", "answer", "final_thought"):
        if trajectory.get(key) is not None and not isinstance(trajectory[key], str):
            raise BadTrajectory(tid, key, "not a string")
    return tid
